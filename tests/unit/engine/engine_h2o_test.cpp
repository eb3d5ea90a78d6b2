// H2O-style heavy-hitter eviction in the engine (kv/heavy_hitters.h) on the tiny qwen2 model:
// each sequence holds at most its budget of blocks after every step, runs to the end, computes
// exactly what full attention computes until it first exceeds the budget, and bad budgets are
// refused naming the field. Pool invariants are checked after every step.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine_fixture.h"
#include "util/error.h"

namespace llms::engine {
namespace {

using namespace testing_support;

constexpr int64_t kBudget = 64;  // 4 blocks of 16
constexpr int64_t kRecent = 32;

class HeavyHitterTest : public EngineTest {
 protected:
  static EngineConfig h2o_config(int32_t n_blocks) {
    EngineConfig c = config(n_blocks, 32);
    c.h2o_budget = kBudget;
    c.h2o_recent = kRecent;
    return c;
  }
};

TEST_F(HeavyHitterTest, EvictionHoldsEachSequenceToItsBudget) {
  std::mt19937 rng(9);
  const GenerationRequest r = greedy(random_prompt(rng, 40), 200);
  Collected full;
  {
    Engine e(*file_, *tok_, config(64, 32));
    e.add_request(r, collect(full));
    run_to_end(e);
  }
  Engine e(*file_, *tok_, h2o_config(64));
  Collected got;
  e.add_request(r, collect(got));
  int guard = 0;
  while (e.has_unfinished()) {
    ASSERT_TRUE(e.step());
    ASSERT_LT(++guard, 10000);
    EXPECT_LE(e.kv_cache().n_blocks() - e.kv_cache().n_free_blocks(), kBudget / 16);
  }
  ASSERT_EQ(got.tokens[0].size(), 200u);
  EXPECT_EQ(got.finish[0], FinishReason::kLength);
  EXPECT_GE(e.stats().h2o_evictions, (240 - kBudget) / 16 - 1);
  // Until the cache first holds more than the budget (64 positions: 24 generated tokens) the
  // run is full attention's.
  for (size_t t = 0; t + 40 < static_cast<size_t>(kBudget); ++t) {
    ASSERT_EQ(got.tokens[0][t].id, full.tokens[0][t].id) << "token " << t;
  }
  EXPECT_EQ(e.kv_cache().n_free_blocks(), 64);
}

TEST_F(HeavyHitterTest, EvictionAmongOthersAndWithPrefixHits) {
  std::mt19937 rng(10);
  const std::vector<int32_t> shared = random_prompt(rng, 48);
  Engine e(*file_, *tok_, h2o_config(40));
  std::vector<Collected> got(6);
  for (int i = 0; i < 6; ++i) {
    auto prompt = shared;
    const auto tail = random_prompt(rng, 5 + 7 * i);
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    e.add_request(greedy(prompt, 60 + 10 * i), collect(got[static_cast<size_t>(i)]));
    e.step();
  }
  run_to_end(e);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(got[static_cast<size_t>(i)].tokens[0].size(), static_cast<size_t>(60 + 10 * i));
  }
  EXPECT_GT(e.stats().h2o_evictions, 0);
  EXPECT_GT(e.stats().prefix_hits, 0);
  EXPECT_EQ(e.kv_cache().n_free_blocks(), 40);
  e.kv_cache().check_invariants();
}

TEST_F(HeavyHitterTest, BudgetsOutOfRangeAreRefusedNamingTheField) {
  EngineConfig c = h2o_config(16);
  c.h2o_budget = kRecent + 16;  // no room for a heavy hitter and the block written
  expect_refused(c, "h2o_budget");
  c = h2o_config(16);
  c.h2o_budget = 0;  // a recent window without a budget
  expect_refused(c, "h2o_recent");
  c = h2o_config(16);
  c.h2o_recent = -1;
  expect_refused(c, "h2o_recent");
  c = h2o_config(16);
  c.streaming_window = 64;
  expect_refused(c, "h2o_budget");
}

}  // namespace
}  // namespace llms::engine
