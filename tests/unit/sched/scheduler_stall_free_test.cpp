// Stall-free batching in the scheduler, driven by the fake engine with steps that cost what a
// known linear law says (fed back through observe_step): prefill chunks beside decode work fit
// the step-time target, steps without decode work take the whole budget, a target nothing fits
// still moves one prompt token, long prompts share the budget, short ones are not held back, and
// the token streams stay what they must be.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "fake_engine.h"
#include "sched/scheduler.h"
#include "util/error.h"

namespace llms::sched {
namespace {

using testing::expected_stream;
using testing::FakeEngine;
using testing::iota_tokens;

struct Law {
  double step_s, prompt_s, decode_s, attended_s;
  double operator()(const StepShape& s) const {
    return step_s + prompt_s * static_cast<double>(s.prompt_tokens) +
           decode_s * static_cast<double>(s.decode_sequences) +
           attended_s * static_cast<double>(s.attended);
  }
};
const Law kMachine{5e-3, 1e-3, 2e-3, 0.0};

SchedulerConfig make_config(int32_t budget, double max_step_seconds) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = 16;
  c.max_model_len = 8192;
  c.max_step_seconds = max_step_seconds;
  return c;
}

// One fake-engine step whose measured time is the law's.
SchedulerOutput timed_step(FakeEngine& eng, Scheduler& sched, const Law& law = kMachine) {
  SchedulerOutput out = eng.step();
  sched.observe_step(out, law(out.shape));
  return out;
}

int32_t prompt_tokens_of(const SchedulerOutput& out) {
  return static_cast<int32_t>(out.shape.prompt_tokens);
}

// The model learns from a few steps of every kind; these runs give it decode-only steps,
// prompt-only steps and mixed ones before the checks.
void warm_up(Scheduler& sched) {
  const auto observe = [&](StepShape shape) {
    SchedulerOutput out;
    out.shape = shape;
    sched.observe_step(out, kMachine(shape));
  };
  for (int64_t i = 0; i < 40; ++i) {
    observe({0, 1 + i % 4, 100});
    observe({64 + i, 0, 0});
    observe({8 + i, 2, 0});
  }
}

TEST(SchedulerStallFree, ChunksBesideDecodeWorkFitTheTarget) {
  kv::KvCacheManager kv(512, 16, true);
  Scheduler sched(make_config(512, 0.0505), kv);
  warm_up(sched);
  FakeEngine eng(sched, kv);
  eng.add(1, iota_tokens(10, 0), 200);  // a stream
  timed_step(eng, sched);
  eng.add(2, iota_tokens(3000, 1000), 2);  // a long prompt arrives
  int mixed_steps = 0;
  while (sched.has_sequence(2) && sched.info(2).n_computed < 3000) {
    const SchedulerOutput out = timed_step(eng, sched);
    // The stream never waits a step.
    ASSERT_TRUE(std::any_of(out.scheduled.begin(), out.scheduled.end(),
                            [](const ScheduledSequence& ss) { return ss.seq_id == 1; }));
    EXPECT_LE(kMachine(out.shape), 0.0505);
    // 50.5 ms - 5 ms fixed - 2 ms for the stream: 43 prompt tokens (the last chunk may be less).
    if (sched.info(2).n_computed < 3000) {
      EXPECT_EQ(prompt_tokens_of(out), 43);
    }
    EXPECT_DOUBLE_EQ(out.target_seconds, 0.0505);
    EXPECT_FALSE(out.target_unreachable);
    ++mixed_steps;
  }
  EXPECT_EQ(mixed_steps, (3000 + 42) / 43);
  while (!eng.idle()) timed_step(eng, sched);
  EXPECT_EQ(eng.finished().at(1), expected_stream(1, iota_tokens(10, 0), 200));
  EXPECT_EQ(eng.finished().at(2), expected_stream(2, iota_tokens(3000, 1000), 2));
}

TEST(SchedulerStallFree, StepsWithoutDecodeWorkTakeTheWholeBudget) {
  kv::KvCacheManager kv(512, 16, true);
  Scheduler sched(make_config(512, 0.05), kv);
  warm_up(sched);
  FakeEngine eng(sched, kv);
  eng.add(1, iota_tokens(1500, 0), 4);
  for (int i = 0; i < 2; ++i) {
    const SchedulerOutput out = timed_step(eng, sched);
    EXPECT_EQ(out.n_tokens, 512);
    EXPECT_EQ(out.target_seconds, 0.0);
  }
}

TEST(SchedulerStallFree, WithoutATargetOnlyTheBudgetLimitsAStep) {
  kv::KvCacheManager kv(512, 16, true);
  Scheduler sched(make_config(512, 0.0), kv);
  warm_up(sched);
  FakeEngine eng(sched, kv);
  eng.add(1, iota_tokens(10, 0), 50);
  timed_step(eng, sched);
  eng.add(2, iota_tokens(1500, 1000), 2);
  const SchedulerOutput out = timed_step(eng, sched);
  EXPECT_EQ(out.shape.decode_sequences, 1);
  EXPECT_EQ(prompt_tokens_of(out), 511);
  EXPECT_EQ(sched.step_time_target(), 0.0);
}

TEST(SchedulerStallFree, ATargetNothingFitsStillMovesOnePromptTokenAndSaysSo) {
  kv::KvCacheManager kv(512, 16, true);
  Scheduler sched(make_config(512, 0.004), kv);  // below the 5 ms fixed cost of any step
  warm_up(sched);
  FakeEngine eng(sched, kv);
  eng.add(1, iota_tokens(10, 0), 40);
  timed_step(eng, sched);
  eng.add(2, iota_tokens(20, 1000), 2);
  for (int i = 0; i < 20; ++i) {
    const SchedulerOutput out = timed_step(eng, sched);
    ASSERT_EQ(prompt_tokens_of(out), 1) << "step " << i;
    EXPECT_TRUE(out.target_unreachable);
  }
  EXPECT_EQ(sched.info(2).n_computed, 20);  // the prompt got through, one token per step
  while (!eng.idle()) timed_step(eng, sched);
  EXPECT_EQ(eng.finished().at(2), expected_stream(2, iota_tokens(20, 1000), 2));
}

TEST(SchedulerStallFree, LongPromptsShareTheBudgetAndAShortOneFinishesInItsFirstStep) {
  kv::KvCacheManager kv(1024, 16, true);
  Scheduler sched(make_config(512, 0.0), kv);
  FakeEngine eng(sched, kv);
  eng.add(1, iota_tokens(2000, 0), 2);
  eng.add(2, iota_tokens(2000, 5000), 2);
  SchedulerOutput out = eng.step();
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(out.scheduled[0].n_new, 256);  // neither waits behind the other's whole prefill
  EXPECT_EQ(out.scheduled[1].n_new, 256);
  eng.add(3, iota_tokens(30, 9000), 2);  // a short prompt arrives
  out = eng.step();
  ASSERT_EQ(out.scheduled.size(), 3u);
  EXPECT_EQ(out.scheduled[2].seq_id, 3);
  EXPECT_EQ(out.scheduled[2].n_new, 30);  // all of it: it samples this step
  EXPECT_TRUE(out.scheduled[2].samples);
  EXPECT_EQ(out.scheduled[0].n_new, 241);  // the rest split evenly, the odd token to the first
  EXPECT_EQ(out.scheduled[1].n_new, 241);
  eng.run_to_completion(1000);
  EXPECT_EQ(eng.finished().at(1), expected_stream(1, iota_tokens(2000, 0), 2));
  EXPECT_EQ(eng.finished().at(2), expected_stream(2, iota_tokens(2000, 5000), 2));
  EXPECT_EQ(eng.finished().at(3), expected_stream(3, iota_tokens(30, 9000), 2));
}

TEST(SchedulerStallFree, TheLongPrefillLimitHoldsBackLongPromptsNotShortOnes) {
  kv::KvCacheManager kv(1024, 16, true);
  SchedulerConfig cfg = make_config(512, 0.0);
  cfg.max_long_partial_prefills = 1;
  Scheduler sched(cfg, kv);
  FakeEngine eng(sched, kv);
  eng.add(1, iota_tokens(2000, 0), 2);
  eng.add(2, iota_tokens(2000, 5000), 2);
  eng.add(3, iota_tokens(100, 9000), 2);  // short: a quarter of the budget is 128
  const SchedulerOutput out = eng.step();
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(out.scheduled[0].seq_id, 1);
  EXPECT_EQ(out.scheduled[0].n_new, 412);
  EXPECT_EQ(out.scheduled[1].seq_id, 3);  // passes the long prompt held back
  EXPECT_EQ(out.scheduled[1].n_new, 100);
  EXPECT_FALSE(sched.info(2).is_running);
  EXPECT_FALSE(kv.has_sequence(2));
  eng.run_to_completion(1000);
  EXPECT_EQ(eng.finished().size(), 3u);
}

TEST(SchedulerStallFree, PriorityLevelsAreServedInOrderThenShared) {
  kv::KvCacheManager kv(1024, 16, true);
  SchedulerConfig cfg = make_config(512, 0.0);
  cfg.policy = Policy::kPriority;
  Scheduler sched(cfg, kv);
  FakeEngine eng(sched, kv);
  eng.add(1, iota_tokens(2000, 0), 2, /*priority=*/1);
  eng.add(2, iota_tokens(300, 5000), 2, /*priority=*/0);
  eng.add(3, iota_tokens(2000, 9000), 2, /*priority=*/1);
  const SchedulerOutput out = eng.step();
  ASSERT_EQ(out.scheduled.size(), 3u);
  EXPECT_EQ(out.scheduled[0].seq_id, 2);  // the higher priority first, whole
  EXPECT_EQ(out.scheduled[0].n_new, 300);
  EXPECT_EQ(out.scheduled[1].n_new, 106);  // the rest shared by the lower level
  EXPECT_EQ(out.scheduled[2].n_new, 106);
}

TEST(SchedulerStallFree, ADerivedTargetFollowsTheDecodeStepAndLeavesThePromptsTheirShare) {
  kv::KvCacheManager kv(2048, 16, true);
  SchedulerConfig cfg = make_config(512, -1.0);
  cfg.max_num_seqs = 64;
  Scheduler sched(cfg, kv);
  EXPECT_EQ(sched.step_time_target(), 0.0);  // nothing measured yet
  warm_up(sched);
  // 2 x a one-sequence decode step (5 ms + 2 ms).
  EXPECT_NEAR(sched.step_time_target(), 2 * 7e-3, 1e-4);
  FakeEngine eng(sched, kv);
  for (int64_t id = 1; id <= 40; ++id)
    eng.add(id, iota_tokens(4, static_cast<int32_t>(id * 10)), 100);
  while (sched.n_waiting() > 0 || sched.info(40).n_computed < 4) timed_step(eng, sched);
  eng.add(100, iota_tokens(3000, 50000), 2);
  const SchedulerOutput out = timed_step(eng, sched);
  // 40 decode rows cost 85 ms: the prompts keep three quarters of the step (340 ms), not what
  // the 14 ms of the plain target would leave them (nothing).
  EXPECT_EQ(out.shape.decode_sequences, 40);
  EXPECT_NEAR(out.target_seconds, kMachine({0, 40, 0}) / 0.25, 1e-3);
  EXPECT_NEAR(prompt_tokens_of(out), 255, 1);
  EXPECT_FALSE(out.target_unreachable);
}

TEST(SchedulerStallFree, RefusesBadTargets) {
  kv::KvCacheManager kv(64, 16, true);
  const auto refused = [&](SchedulerConfig c, const char* fragment) {
    try {
      Scheduler s(c, kv);
      ADD_FAILURE() << "accepted; expected " << fragment;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  SchedulerConfig c = make_config(64, 0.0);
  c.max_step_seconds = std::nan("");
  refused(c, "max_step_seconds");
  c.max_step_seconds = 1e9;
  refused(c, "max_step_seconds");
  c = make_config(64, 0.0);
  c.max_long_partial_prefills = 0;
  refused(c, "max_long_partial_prefills");
  c = make_config(64, -1.0);
  c.itl_target_factor = 0.5;
  refused(c, "itl_target_factor");
  c = make_config(64, -1.0);
  c.min_prefill_share = 1.0;
  refused(c, "min_prefill_share");
}

}  // namespace
}  // namespace llms::sched
