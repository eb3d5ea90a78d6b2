#include "kv/step_batch.h"

#include <algorithm>
#include <string>

#include "util/error.h"

namespace llms::kv {

void StepBatch::add_sequence(int64_t seq_id, std::span<const int32_t> new_tokens,
                             int32_t already_cached, std::span<const BlockId> block_table,
                             int32_t n_last_logits, std::span<const int32_t> tree_parents) {
  SequenceSlice s;
  s.seq_id = seq_id;
  s.query_begin = static_cast<int32_t>(tokens.size());
  s.n_query = static_cast<int32_t>(new_tokens.size());
  s.n_context = already_cached + s.n_query;
  s.block_table = block_table;
  s.tree_parents = tree_parents;
  const auto n_tree = static_cast<int32_t>(tree_parents.size());
  for (int32_t i = 0; i < s.n_query; ++i) {
    tokens.push_back(new_tokens[i]);
    const int32_t slot = already_cached + i;
    positions.push_back(n_tree > 0 && slot >= s.n_context - n_tree ? tree_position(s, slot) : slot);
  }
  const int32_t n_rows = std::clamp(n_last_logits, 0, s.n_query);
  for (int32_t i = s.n_query - n_rows; i < s.n_query; ++i) logits_rows.push_back(s.query_begin + i);
  sequences.push_back(s);
}

int32_t tree_position(const SequenceSlice& s, int32_t slot) {
  const int32_t base = s.tree_base();
  int32_t depth = 0;
  // Parents precede children (validate() checks it), so the walk ends; a broken table is caught
  // there, and here a bound keeps the walk finite.
  for (int32_t r = s.tree_parents[slot - base];
       r >= 0 && depth < static_cast<int32_t>(s.tree_parents.size()); r = s.tree_parents[r]) {
    ++depth;
  }
  return base + depth;
}

void StepBatch::validate(int32_t block_size, int32_t n_blocks_total) const {
  auto fail = [](const std::string& what) {
    throw Error(Error::Kind::kInvalidArgument, "StepBatch: " + what);
  };
  if (positions.size() != tokens.size()) fail("positions and tokens differ in length");
  if (n_kv_groups < 1) fail("n_kv_groups must be >= 1");
  int32_t expected_begin = 0;
  for (size_t i = 0; i < sequences.size(); ++i) {
    const auto& s = sequences[i];
    std::string where = "sequence " + std::to_string(s.seq_id);
    if (s.query_begin != expected_begin) fail(where + " does not start where the previous ended");
    if (s.n_query < 1 || s.n_context < s.n_query) fail(where + " has a bad query/context length");
    const int64_t entries_needed =
        (int64_t{s.n_context} + block_size - 1) / block_size * n_kv_groups;
    if (static_cast<int64_t>(s.block_table.size()) < entries_needed) {
      fail(where + " has " + std::to_string(s.block_table.size()) + " table entries for " +
           std::to_string(s.n_context) + " tokens in " + std::to_string(n_kv_groups) +
           " cache groups");
    }
    for (int64_t b = 0; b < entries_needed; ++b) {
      // -1: given back (a window's or an eviction's); attention skips it and refuses to write
      // into it.
      if (s.block_table[b] < -1 || s.block_table[b] >= n_blocks_total) {
        fail(where + " names block " + std::to_string(s.block_table[b]) + " outside the pool");
      }
    }
    const auto n_tree = static_cast<int32_t>(s.tree_parents.size());
    if (n_tree > s.n_context) fail(where + " has a token tree larger than its context");
    for (int32_t r = 0; r < n_tree; ++r) {
      if (s.tree_parents[r] < -1 || s.tree_parents[r] >= r) {
        fail(where + " has a tree node whose parent does not precede it");
      }
    }
    for (int32_t j = 0; j < s.n_query; ++j) {
      const int32_t slot = s.slot_of(j);
      const int32_t want = n_tree > 0 && slot >= s.tree_base() ? tree_position(s, slot) : slot;
      if (positions[s.query_begin + j] != want) fail(where + " has a position out of order");
    }
    expected_begin += s.n_query;
  }
  if (expected_begin != static_cast<int32_t>(tokens.size())) fail("tokens outside any sequence");
  for (size_t i = 0; i < logits_rows.size(); ++i) {
    if (logits_rows[i] < 0 || logits_rows[i] >= static_cast<int32_t>(tokens.size()) ||
        (i > 0 && logits_rows[i] <= logits_rows[i - 1])) {
      fail("logits_rows must be ascending indices into tokens");
    }
  }
}

}  // namespace llms::kv
