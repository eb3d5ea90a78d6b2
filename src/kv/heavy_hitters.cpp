#include "kv/heavy_hitters.h"

#include <string>

#include "util/error.h"

namespace llms::kv {

void HeavyHitterBudget::validate(int32_t block_size) const {
  if (budget_tokens < 0) {
    throw Error(Error::Kind::kInvalidArgument,
                "h2o_budget must be >= 0 (0: off), got " + std::to_string(budget_tokens));
  }
  if (recent_tokens < 0) {
    throw Error(Error::Kind::kInvalidArgument,
                "h2o_recent must be >= 0, got " + std::to_string(recent_tokens));
  }
  if (!enabled()) {
    if (recent_tokens > 0) {
      throw Error(Error::Kind::kInvalidArgument, "h2o_recent needs an h2o_budget");
    }
    return;
  }
  if (budget_tokens < recent_tokens + 2 * int64_t{block_size}) {
    throw Error(Error::Kind::kInvalidArgument,
                "h2o_budget " + std::to_string(budget_tokens) + " must hold h2o_recent " +
                    std::to_string(recent_tokens) + " plus two blocks of " +
                    std::to_string(block_size) + " tokens (a heavy hitter and the block written)");
  }
}

int64_t block_to_evict(std::span<const BlockId> table, std::span<const double> scores,
                       int64_t n_computed, int32_t block_size, const HeavyHitterBudget& budget) {
  if (!budget.enabled()) return -1;
  int64_t held = 0;
  for (BlockId b : table) held += b != kNoBlock ? 1 : 0;
  if (held * block_size <= budget.budget_tokens) return -1;
  // Blocks wholly before the recent window (and so full and computed).
  const int64_t end = (n_computed - budget.recent_tokens) / block_size;
  int64_t best = -1;
  for (int64_t b = 0; b < end && b < static_cast<int64_t>(table.size()); ++b) {
    if (table[static_cast<size_t>(b)] == kNoBlock) continue;
    if (best < 0 || scores[static_cast<size_t>(b)] < scores[static_cast<size_t>(best)]) best = b;
  }
  return best;
}

}  // namespace llms::kv
