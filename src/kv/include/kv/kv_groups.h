// kv/kv_groups: which layers share a block table (a KV cache group), so that sliding-window
// layers give back the blocks that fell out of their window while full-attention layers keep
// the whole context (vLLM's hybrid allocator, in its simplest form).
//
// Every group has the same number of member layers, so one block of the shared pool (a "page")
// holds block_size tokens of `members` layers whichever group it serves, and pages move freely
// between groups: the pool is one budget, not a split decided up front. Layers are grouped by
// window: layers of one window fill groups of `members` in layer order; the group size is the
// smallest count of layers that share a window (Gemma 3 270M: 3 global layers, 15 sliding ones:
// 6 groups of 3), and a last group short of members leaves its spare member slots unused.
// A model with one window for every layer (all full, or all sliding) has one group.
// Attention sinks (StreamingLLM): a windowed layer may also keep its first `sinks` tokens for
// good; layers group by (window, sinks), and such a group holds its first ceil(sinks / block)
// blocks besides its window.
//
// A layer's keys and values for block index b of a sequence live in page
// table[b * n_groups() + group_of(layer)], member slot member_of(layer) (kv/step_batch.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace llms::kv {

class KvGroupLayout {
 public:
  // One group of every layer, no window: what a model without sliding layers gets.
  static KvGroupLayout single(int32_t n_layers);
  // Layers grouped by their window (0: full attention) and sinks (empty: none; only with a
  // window). Throws llms::Error(kInvalidArgument) for no layers, a negative window or sink
  // count, sinks without a window, or spans of different lengths.
  static KvGroupLayout from_windows(std::span<const int64_t> layer_windows,
                                    std::span<const int64_t> layer_sinks = {});

  int32_t n_groups() const { return static_cast<int32_t>(windows_.size()); }
  int32_t n_layers() const { return static_cast<int32_t>(group_of_.size()); }
  // Member slots per page (layers per group).
  int32_t members() const { return members_; }
  // 0 for a full-attention group, else its sliding window in tokens.
  int64_t window(int32_t group) const { return windows_[static_cast<size_t>(group)]; }
  std::span<const int64_t> windows() const { return windows_; }
  // Tokens at the start of the sequence a windowed group keeps besides its window.
  int64_t sinks(int32_t group) const { return sinks_[static_cast<size_t>(group)]; }
  std::span<const int64_t> sinks() const { return sinks_; }
  int32_t group_of(int32_t layer) const { return group_of_[static_cast<size_t>(layer)]; }
  int32_t member_of(int32_t layer) const { return member_of_[static_cast<size_t>(layer)]; }
  // Whether some group has a window (blocks can be given back mid-sequence).
  bool has_window() const;

 private:
  int32_t members_ = 0;
  std::vector<int64_t> windows_;
  std::vector<int64_t> sinks_;
  std::vector<int32_t> group_of_;
  std::vector<int32_t> member_of_;
};

// Pool blocks one sequence of n_tokens holds at most across cache groups of these windows, when
// each step computes at most max_step_tokens of its tokens: a full group holds every block, a
// windowed one its window plus one step (which can straddle one more block than it fills).
// Requires n_tokens >= 0, max_step_tokens >= 1, block_size >= 1.
// `sinks` (per group, or empty) adds a windowed group's sink blocks.
int64_t blocks_for_sequence(std::span<const int64_t> windows, std::span<const int64_t> sinks,
                            int32_t block_size, int64_t n_tokens, int64_t max_step_tokens);

}  // namespace llms::kv
