// kv/step_batch: the one thing the scheduler hands the model executor each step.
//
// A step is a flat list of tokens from any number of sequences: a prefill chunk, one decode
// token and a few speculative tokens all look the same. Each sequence names its slice of the
// flat list, how many tokens its cache holds once this step is done, and the block table that
// maps its positions to KV blocks (position p lives in block_table[p / block_size], slot
// p % block_size). Rows whose logits are wanted are listed explicitly, so a prefill chunk that
// does not end its prompt costs no output projection.
//
// Token trees (speculative decoding verifies several drafted branches in one pass): a slice may
// end in a tree region, its last `tree_parents.size()` cache slots. Region node r lives in slot
// tree_base + r (tree_base = n_context - tree size) and its parent is region node
// tree_parents[r] < r, or -1 for a node that follows the context before the region directly.
// A node sits at position tree_base + depth (depth 0 for a -1 parent; RoPE uses it) and attends
// to the context before the region and to its own ancestors (itself included) only, exactly as
// if its branch had been laid out in slots tree_base, tree_base + 1, ... The slice's queries are
// the region's last nodes (earlier ones are in the cache from earlier steps: a draft model grows
// its tree one level per step). Without a tree a slice is a plain run of positions.
//
// Cache groups (kv/kv_groups.h): with n_kv_groups > 1 a block table interleaves the groups'
// tables, entry b * n_kv_groups + g for block index b of group g, and a windowed group's entries
// before its window may be -1, as may any entry an H2O-style eviction gave back (attention skips
// them; the KV manager's invariants keep a window's given-back entries outside every window).
//
// Invariants (checked by validate()): slices are disjoint, cover `tokens` in order, each has
// n_query >= 1 and n_context >= n_query, its block table covers n_context positions, and
// positions[i] of a slice are n_context - n_query .. n_context - 1 (with a tree: the region's
// queries hold its last n_query nodes, each parent precedes its child, positions follow depths).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace llms::kv {

using BlockId = int32_t;
// A block-table entry given back: it fell out of a cache group's window, or was evicted.
inline constexpr BlockId kNoBlock = -1;

struct SequenceSlice {
  int64_t seq_id = 0;       // the engine's id; opaque here
  int32_t query_begin = 0;  // index in StepBatch::tokens of this sequence's first token
  int32_t n_query = 0;      // tokens of this sequence in this step
  int32_t n_context = 0;    // tokens in the cache after this step (earlier ones + n_query)
  std::span<const BlockId> block_table;   // owned by the caller; valid during the step
                                          // (n_kv_groups entries per block index)
  std::span<const int32_t> tree_parents;  // empty: no tree; owned by the caller like block_table

  int32_t tree_base() const { return n_context - static_cast<int32_t>(tree_parents.size()); }
  // The cache slot of query j (its position, unless it is a tree node).
  int32_t slot_of(int32_t j) const { return n_context - n_query + j; }
};

// Moves one token's keys and values within the cache (every layer): a tree's kept branch is
// moved to the slots a plain run would have used. Slots are positions of a sequence; the block
// table maps them.
struct SlotCopy {
  BlockId src_block = 0;
  int32_t src_slot = 0;  // within the block
  BlockId dst_block = 0;
  int32_t dst_slot = 0;
};

// The position of a slot in the slice's tree region: tree_base + the node's depth.
int32_t tree_position(const SequenceSlice& s, int32_t slot);

struct StepBatch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  std::vector<SequenceSlice> sequences;
  std::vector<int32_t> logits_rows;  // indices into tokens, ascending
  int32_t n_kv_groups = 1;           // tables interleaved per cache group; clear() keeps it

  void clear() {
    tokens.clear();
    positions.clear();
    sequences.clear();
    logits_rows.clear();
  }

  // Appends a sequence's next n tokens; `already_cached` tokens precede them in its cache. The
  // last n_last_logits of them (at most n, 0: none) want logits: 1 for a decode step or the end
  // of a prompt, 1 + k when k speculative tokens are verified.
  // tree_parents: the slice's tree region (see above; its last n tokens are the new ones), or
  // empty.
  void add_sequence(int64_t seq_id, std::span<const int32_t> new_tokens, int32_t already_cached,
                    std::span<const BlockId> block_table, int32_t n_last_logits,
                    std::span<const int32_t> tree_parents = {});

  // Throws llms::Error(kInvalidArgument) describing the first broken invariant.
  void validate(int32_t block_size, int32_t n_blocks_total) const;
};

}  // namespace llms::kv
