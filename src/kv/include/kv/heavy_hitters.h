// kv/heavy_hitters: H2O-style eviction under a KV budget per sequence, at block granularity.
//
// H2O (Zhang et al., 2023) keeps, besides the most recent tokens, the "heavy hitters": the
// tokens that have drawn the most attention so far, summed over every query that saw them; the
// rest is evicted so each sequence holds at most a fixed budget. Paged, the unit is a block:
// a block's score is the attention mass its keys received (summed over layers, heads and
// queries; the runner reports it per step), and while a sequence holds more than budget_tokens
// the full block outside the recent window with the lowest score is given back. Unlike a
// sliding window this changes what later tokens compute, so blocks computed after a sequence's
// first eviction never serve as a cached prefix (kv/kv_cache_manager.h).
#pragma once

#include <cstdint>
#include <span>

#include "kv/step_batch.h"

namespace llms::kv {

struct HeavyHitterBudget {
  int64_t budget_tokens = 0;  // the most a sequence holds (0: off)
  int64_t recent_tokens = 0;  // its last tokens, never evicted

  bool enabled() const { return budget_tokens > 0; }
  // Throws llms::Error(kInvalidArgument) naming h2o_budget or h2o_recent: the budget must hold
  // the recent window plus two blocks (one heavy hitter and the block being written).
  void validate(int32_t block_size) const;
};

// The block index to give back next, or -1 when the sequence fits its budget or nothing may go:
// `table` is the sequence's block table (one group; kNoBlock where a block was given back),
// `scores` its blocks' accumulated attention (at least the table's length), n_computed the
// tokens in its cache. Candidates are held blocks that lie wholly before the recent window;
// the lowest score goes first, the oldest among equals.
int64_t block_to_evict(std::span<const BlockId> table, std::span<const double> scores,
                       int64_t n_computed, int32_t block_size, const HeavyHitterBudget& budget);

}  // namespace llms::kv
