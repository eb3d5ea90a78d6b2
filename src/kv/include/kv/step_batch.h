// kv/step_batch: the one thing the scheduler hands the model executor each step.
//
// A step is a flat list of tokens from any number of sequences: a prefill chunk, one decode
// token and a few speculative tokens all look the same. Each sequence names its slice of the
// flat list, how many tokens its cache holds once this step is done, and the block table that
// maps its positions to KV blocks (position p lives in block_table[p / block_size], slot
// p % block_size). Rows whose logits are wanted are listed explicitly, so a prefill chunk that
// does not end its prompt costs no output projection.
//
// Invariants (checked by validate()): slices are disjoint, cover `tokens` in order, each has
// n_query >= 1 and n_context >= n_query, its block table covers n_context positions, and
// positions[i] of a slice are n_context - n_query .. n_context - 1.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace llms::kv {

using BlockId = int32_t;

struct SequenceSlice {
  int64_t seq_id = 0;       // the engine's id; opaque here
  int32_t query_begin = 0;  // index in StepBatch::tokens of this sequence's first token
  int32_t n_query = 0;      // tokens of this sequence in this step
  int32_t n_context = 0;    // tokens in the cache after this step (earlier ones + n_query)
  std::span<const BlockId> block_table;  // owned by the caller; valid during the step
};

struct StepBatch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  std::vector<SequenceSlice> sequences;
  std::vector<int32_t> logits_rows;  // indices into tokens, ascending

  void clear() {
    tokens.clear();
    positions.clear();
    sequences.clear();
    logits_rows.clear();
  }

  // Appends a sequence's next n tokens; `already_cached` tokens precede them in its cache. The
  // last n_last_logits of them (at most n, 0: none) want logits: 1 for a decode step or the end
  // of a prompt, 1 + k when k speculative tokens are verified.
  void add_sequence(int64_t seq_id, std::span<const int32_t> new_tokens, int32_t already_cached,
                    std::span<const BlockId> block_table, int32_t n_last_logits);

  // Throws llms::Error(kInvalidArgument) describing the first broken invariant.
  void validate(int32_t block_size, int32_t n_blocks_total) const;
};

}  // namespace llms::kv
