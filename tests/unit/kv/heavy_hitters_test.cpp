// kv::block_to_evict and HeavyHitterBudget: which block an H2O-style budget gives back.
#include "kv/heavy_hitters.h"

#include <gtest/gtest.h>

#include <vector>

#include "util/error.h"

namespace llms::kv {
namespace {

TEST(HeavyHitters, NothingGoesWithinTheBudgetOrWhenOff) {
  const std::vector<BlockId> table = {0, 1, 2, 3};
  const std::vector<double> scores = {4, 1, 3, 2};
  EXPECT_EQ(block_to_evict(table, scores, 64, 16, {64, 16}), -1);  // 4 blocks = 64 tokens
  EXPECT_EQ(block_to_evict(table, scores, 64, 16, {}), -1);        // off
}

TEST(HeavyHitters, LowestScoreOutsideTheRecentWindowGoesFirst) {
  std::vector<BlockId> table = {0, 1, 2, 3, 4};
  std::vector<double> scores = {4, 1, 3, 0.5, 0.1};
  // 80 tokens held, budget 64, recent 32: blocks 3 and 4 are recent; of 0-2, block 1 is lowest.
  EXPECT_EQ(block_to_evict(table, scores, 80, 16, {64, 32}), 1);
  table[1] = kNoBlock;  // given back: now within budget
  EXPECT_EQ(block_to_evict(table, scores, 80, 16, {64, 32}), -1);
  // Ties: the oldest first.
  table = {0, 1, 2, 3, 4};
  scores = {2, 2, 2, 9, 9};
  EXPECT_EQ(block_to_evict(table, scores, 80, 16, {64, 32}), 0);
  // Only the partial block being written and the recent ones remain: nothing may go.
  table = {kNoBlock, kNoBlock, 7, 8, 9};
  EXPECT_EQ(block_to_evict(table, scores, 70, 16, {32, 32}), -1);
}

TEST(HeavyHitters, BudgetsAreValidatedNamingTheField) {
  EXPECT_NO_THROW((HeavyHitterBudget{64, 32}.validate(16)));
  EXPECT_NO_THROW((HeavyHitterBudget{}.validate(16)));
  for (const HeavyHitterBudget& bad : {HeavyHitterBudget{-1, 0}, HeavyHitterBudget{0, 16},
                                       HeavyHitterBudget{64, -1}, HeavyHitterBudget{47, 16}}) {
    try {
      bad.validate(16);
      ADD_FAILURE() << bad.budget_tokens << " / " << bad.recent_tokens << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("h2o_"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace llms::kv
