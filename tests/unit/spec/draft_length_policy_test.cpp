// spec::StepCostModel and spec::DraftLengthPolicy. The cost model: a measured size predicts its
// running mean (converging to a changed cost); other sizes follow the roofline max(a, b T) fitted
// to small steps (a) and prompt chunks (b), the missing half from the prior knee, and a small
// size past a measured one at least that one's cost plus b per extra token.
// The policy: 0 when disabled, with no sequence, or past disable_by_batch_size; fixed_length
// gives num_speculative_tokens; a memory-bound step with high acceptance speculates, a
// compute-bound one does not (32 sequences), low acceptance lowers k, expensive draft passes
// stop it; acceptance starts at the global rate (0.7), one early rejection does not stop a
// sequence, and observe_no_drafts() drifts a sequence back to the global rate. The plain step's
// cost is measured (a probe without drafts) before speculating is preferred to it, and again
// every kReprobeSteps steps, but not beside a prompt chunk; a process's first (cold) step is not
// learned; a draft model's catch-up counts over the tokens a sequence has left.
#include "spec/draft_length_policy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace llms::spec {
namespace {

TEST(StepCostModel, AMeasuredSizePredictsItsRunningMean) {
  StepCostModel m;
  m.observe(8, 0.010);
  EXPECT_EQ(m.n_observations(), 1);
  EXPECT_DOUBLE_EQ(m.predict(8), 0.010);
  m.observe(8, 0.020);
  EXPECT_GT(m.predict(8), 0.010);
  EXPECT_LT(m.predict(8), 0.020);
  for (int i = 0; i < 60; ++i) m.observe(8, 0.020);  // the cost changed: the mean follows
  EXPECT_NEAR(m.predict(8), 0.020, 0.0002);
  EXPECT_EQ(m.n_observations(), 62);
}

TEST(StepCostModel, OtherSizesFollowTheFittedRoofline) {
  // A decode step (1 token) measures the floor a, a prompt chunk (128 tokens) the slope b.
  const double a = 0.012, b = 0.0023;
  StepCostModel m;
  m.observe(1, a);
  m.observe(128, b * 128);
  // Below the knee: the floor plus the arithmetic of the tokens past the measured one.
  EXPECT_NEAR(m.predict(2), a + b, 1e-12);
  EXPECT_NEAR(m.predict(5), a + 4 * b, 1e-12);
  EXPECT_NEAR(m.predict(16), a + 15 * b, 1e-12);
  EXPECT_NEAR(m.predict(300), b * 300, 1e-12);  // a prompt chunk's size: the arithmetic
  // A measured size keeps its own mean.
  m.observe(16, 0.050);
  EXPECT_DOUBLE_EQ(m.predict(16), 0.050);
}

TEST(StepCostModel, AMissingHalfOfTheRooflineComesFromThePriorKnee) {
  StepCostModel only_prompt;  // the first decision of a server: only a prompt chunk measured
  only_prompt.observe(64, 0.064);
  EXPECT_NEAR(only_prompt.predict(1), 0.001 * StepCostModel::kPriorKnee, 1e-12);
  EXPECT_NEAR(only_prompt.predict(5), 0.001 * StepCostModel::kPriorKnee, 1e-12);
  EXPECT_NEAR(only_prompt.predict(32), 0.032, 1e-12);
  StepCostModel only_decode;
  only_decode.observe(1, 0.016);
  EXPECT_NEAR(only_decode.predict(4), 0.016, 1e-12);
  EXPECT_NEAR(only_decode.predict(32), 0.016 / StepCostModel::kPriorKnee * 32, 1e-12);
  StepCostModel middle;  // neither: the roofline through the nearest measured size
  middle.observe(16, 0.032);
  EXPECT_NEAR(middle.predict(32), 0.064, 1e-12);
  EXPECT_NEAR(middle.predict(4), 0.002 * StepCostModel::kPriorKnee, 1e-12);
}

TEST(StepCostModel, OnlyOneTokenStepsMeasureTheFloorAndEachSizeCountsItsAge) {
  // An AVX2 CPU: a 2-token step runs the padded GEMM and costs ~4x a one-token step.
  StepCostModel m;
  EXPECT_EQ(m.observations_since(1), std::numeric_limits<int64_t>::max());
  m.observe(2, 0.145);
  m.observe(128, 0.0085 * 128);
  // The 2-token step is not the floor: one token is guessed from the prompt's slope.
  EXPECT_NEAR(m.predict(1), 0.0085 * StepCostModel::kPriorKnee, 1e-12);
  EXPECT_EQ(m.observations_since(1), std::numeric_limits<int64_t>::max());  // never seen
  m.observe(1, 0.039);
  EXPECT_DOUBLE_EQ(m.predict(1), 0.039);
  EXPECT_EQ(m.observations_since(1), 0);
  EXPECT_EQ(m.observations_since(2), 2);
  // An unmeasured size costs at least a smaller measured one and the arithmetic of its extra
  // tokens (the roofline says 0.039).
  EXPECT_NEAR(m.predict(3), 0.145 + 0.0085, 1e-12);
  m.observe(7, 0.154);
  EXPECT_EQ(m.observations_since(1), 1);
  EXPECT_EQ(m.observations_since(0), std::numeric_limits<int64_t>::max());  // out of range
  // Between measured small sizes: the chord.
  EXPECT_NEAR(m.predict(4), 0.145 + (0.154 - 0.145) * 2.0 / 5.0, 1e-12);
  // Past the last measured small size: at least that size's cost plus the slope per extra
  // token, or the roofline's.
  EXPECT_NEAR(m.predict(9), 0.154 + 2 * 0.0085, 1e-12);
  EXPECT_NEAR(m.predict(40), 0.154 + 33 * 0.0085, 1e-12);
  EXPECT_NEAR(m.predict(64), 0.0085 * 64, 1e-12);  // a prompt chunk's size
  // Chords span small sizes only: a prompt chunk's cost does not lift a small step's beyond its
  // arithmetic per token.
  StepCostModel flat;
  flat.observe(1, 0.025);
  flat.observe(512, 0.0011 * 512);
  EXPECT_NEAR(flat.predict(5), 0.025 + 4 * 0.0011, 1e-12);
  // Without a measured slope, the smaller size's cost.
  StepCostModel no_slope;
  no_slope.observe(1, 0.025);
  no_slope.observe(3, 0.030);
  EXPECT_NEAR(no_slope.predict(6), 0.030, 1e-12);
}

SpeculativeConfig ngram(int32_t k) {
  SpeculativeConfig c;
  c.method = Method::kNgram;
  c.num_speculative_tokens = k;
  return c;
}

// Measured target steps t(T) = a + b T for every size up to max_t.
void measure(DraftLengthPolicy& p, double a, double b, int32_t max_t) {
  p.observe_target_step(1, 1.0);  // the first step is cold: not learned
  for (int32_t t = 1; t <= max_t; ++t) p.observe_target_step(t, a + b * t);
}

std::vector<int64_t> ids(int n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 1);
  return v;
}

TEST(DraftLengthPolicy, DisabledOrEmptyGivesZero) {
  const std::vector<int64_t> one = {1};
  SpeculativeConfig none = ngram(4);
  none.method = Method::kNone;
  EXPECT_EQ(DraftLengthPolicy(none, false).choose(one), 0);
  EXPECT_EQ(DraftLengthPolicy(ngram(0), false).choose(one), 0);
  SpeculativeConfig fixed = ngram(4);
  fixed.fixed_length = true;
  EXPECT_EQ(DraftLengthPolicy(fixed, false).choose({}), 0);
}

TEST(DraftLengthPolicy, FixedLengthAndBatchSizeLimit) {
  SpeculativeConfig c = ngram(5);
  c.fixed_length = true;
  DraftLengthPolicy p(c, true);
  measure(p, 0.0, 0.001, 200);  // compute-bound: would never pay, but the length is fixed
  for (int64_t s : ids(8)) p.observe_verification(s, 5, 0);
  EXPECT_EQ(p.choose(ids(1)), 5);
  EXPECT_EQ(p.choose(ids(8)), 5);

  c.disable_by_batch_size = 4;
  DraftLengthPolicy limited(c, false);
  EXPECT_EQ(limited.choose(ids(4)), 5);  // at the limit: still speculating
  EXPECT_EQ(limited.choose(ids(5)), 0);  // above it: off
}

TEST(DraftLengthPolicy, MemoryBoundStepsWithHighAcceptanceSpeculate) {
  DraftLengthPolicy p(ngram(4), false);
  measure(p, 0.020, 0.00001, 64);  // reading the weights dominates: t(5) ~ t(1)
  for (int i = 0; i < 30; ++i) p.observe_verification(1, 4, 4);
  EXPECT_GT(p.acceptance(1), 0.95);
  const std::vector<int64_t> one = {1};
  EXPECT_EQ(p.choose(one), 4);
}

TEST(DraftLengthPolicy, ComputeBoundStepsDoNotSpeculateFor32Sequences) {
  DraftLengthPolicy p(ngram(4), false);
  measure(p, 0.0, 0.001, 200);  // t proportional to T: every draft costs a full token
  for (int64_t s : ids(32)) {
    for (int i = 0; i < 30; ++i) p.observe_verification(s, 4, 4);  // even all accepted
  }
  EXPECT_EQ(p.choose(ids(32)), 0);
  // The same acceptance with memory-bound steps would speculate, so the cost decided it.
  DraftLengthPolicy flat(ngram(4), false);
  measure(flat, 0.020, 0.00001, 200);
  for (int64_t s : ids(32)) {
    for (int i = 0; i < 30; ++i) flat.observe_verification(s, 4, 4);
  }
  EXPECT_GT(flat.choose(ids(32)), 0);
}

TEST(DraftLengthPolicy, LowAcceptanceLowersK) {
  const std::vector<int64_t> one = {1};
  DraftLengthPolicy high(ngram(4), false), low(ngram(4), false);
  for (DraftLengthPolicy* p : {&high, &low}) measure(*p, 0.020, 0.002, 64);
  for (int i = 0; i < 30; ++i) {
    high.observe_verification(1, 4, 4);
    low.observe_verification(1, 4, 0);
  }
  EXPECT_LT(low.acceptance(1), 0.1);
  const int32_t k_high = high.choose(one), k_low = low.choose(one);
  EXPECT_GT(k_high, 0);
  EXPECT_LT(k_low, k_high);
  EXPECT_EQ(k_low, 0);
}

TEST(DraftLengthPolicy, ExpensiveDraftPassesStopSpeculation) {
  const std::vector<int64_t> one = {1};
  DraftLengthPolicy costly(ngram(4), true), cheap(ngram(4), true);
  for (DraftLengthPolicy* p : {&costly, &cheap}) {
    measure(*p, 0.020, 0.00001, 64);
    for (int i = 0; i < 30; ++i) p->observe_verification(1, 4, 4);
  }
  for (int i = 0; i < 10; ++i) {
    costly.observe_draft_pass(1, 0.020);  // a draft pass costs a whole target step
    cheap.observe_draft_pass(1, 0.0002);
  }
  EXPECT_EQ(costly.choose(one), 0);
  EXPECT_GT(cheap.choose(one), 0);
}

TEST(DraftLengthPolicy, ADraftModelsCatchUpIsWeighedOverTheTokensLeft) {
  // Memory-bound steps, cheap draft passes (2 ms a token in catch-up passes), drafts kept:
  // without an outlook this speculates.
  DraftLengthPolicy p(ngram(4), true);
  measure(p, 0.020, 0.00001, 64);
  for (int i = 0; i < 30; ++i) p.observe_verification(1, 4, 4);
  for (int i = 0; i < 10; ++i) {
    p.observe_draft_pass(1, 0.002);
    p.observe_draft_pass(1500, 1500 * 0.002);
  }
  const std::vector<int64_t> one = {1};
  ASSERT_GT(p.choose(one), 0);
  using Outlook = DraftLengthPolicy::Outlook;
  // The draft model is a 1,500-token prompt behind (3 s to catch up): with 8 tokens left that
  // never pays back, with 100,000 it does.
  const std::vector<Outlook> short_run = {{1500, 8}}, long_run = {{1500, 100000}};
  EXPECT_EQ(p.choose(one, 0, short_run), 0);
  EXPECT_GT(p.choose(one, 0, long_run), 0);
  // Behind by no more than a drafting step computes anyway (1 + k_max): no extra cost.
  const std::vector<Outlook> in_step = {{5, 1}};
  EXPECT_EQ(p.choose(one, 0, in_step), p.choose(one));
  // A proposer without passes to pay (n-grams) ignores the outlook.
  DraftLengthPolicy free_drafts(ngram(4), false);
  measure(free_drafts, 0.020, 0.00001, 64);
  for (int i = 0; i < 30; ++i) free_drafts.observe_verification(1, 4, 4);
  EXPECT_GT(free_drafts.choose(one, 0, short_run), 0);
  // An outlook that does not match the sequences is ignored.
  const std::vector<Outlook> two = {{1500, 8}, {1500, 8}};
  EXPECT_EQ(p.choose(one, 0, two), p.choose(one));
}

TEST(DraftLengthPolicy, ThePlainStepIsMeasuredBeforeSpeculatingIsPreferredToIt) {
  // Measured on a 2-core AVX2 EPYC, 1.5B target: 1 token 39 ms, 2-7 tokens 145-154 ms (the
  // GEMM padded to 8 activation rows), prompt chunks 8.5 ms a token, draft passes 15 ms. A
  // policy that had only seen speculating steps guessed the plain step from the floor and
  // speculated at 0.72x of plain.
  SpeculativeConfig c = ngram(6);
  DraftLengthPolicy p(c, true);
  const std::vector<int64_t> one = {1};
  p.observe_target_step(30, 1.0);                                // the cold first step: not learned
  p.observe_target_step(128, 0.0085 * 128);                      // the prompt
  for (int i = 0; i < 30; ++i) p.observe_verification(1, 6, 5);  // drafts are mostly kept
  for (int32_t t = 2; t <= 7; ++t) p.observe_target_step(t, 0.145 + 0.0015 * (t - 2));
  for (int i = 0; i < 10; ++i) p.observe_draft_pass(1, 0.015);
  EXPECT_EQ(p.choose(one), 0);  // the plain step was never measured: measure it
  p.observe_target_step(1, 0.039);
  EXPECT_EQ(p.choose(one), 0);  // now known: speculating loses here

  // Memory-bound steps (verification costs about a plain step): after the one probe, speculate.
  DraftLengthPolicy flat(c, true);
  flat.observe_target_step(30, 1.0);
  flat.observe_target_step(128, 0.0085 * 128);
  for (int i = 0; i < 30; ++i) flat.observe_verification(1, 6, 5);
  for (int32_t t = 2; t <= 7; ++t) flat.observe_target_step(t, 0.040 + 0.001 * t);
  for (int i = 0; i < 10; ++i) flat.observe_draft_pass(1, 0.004);
  EXPECT_EQ(flat.choose(one), 0);
  flat.observe_target_step(1, 0.039);
  EXPECT_GT(flat.choose(one), 0);
  // It goes on speculating for kReprobeSteps steps; after more, the plain step is timed again.
  for (int64_t i = 0; i < DraftLengthPolicy::kReprobeSteps; ++i) flat.observe_target_step(5, 0.045);
  EXPECT_GT(flat.choose(one), 0);
  flat.observe_target_step(5, 0.045);
  EXPECT_EQ(flat.choose(one), 0);
  flat.observe_target_step(1, 0.039);
  EXPECT_GT(flat.choose(one), 0);
  // A fixed length never probes.
  c.fixed_length = true;
  EXPECT_EQ(DraftLengthPolicy(c, true).choose(one), 6);
}

TEST(DraftLengthPolicy, BesideAPromptChunkThereIsNoProbe) {
  // Memory-bound steps measured at every size but one token: a decode-only step probes, a step
  // beside a prompt chunk (whose sizes vary too much to probe each) goes by the estimates.
  DraftLengthPolicy p(ngram(4), false);
  p.observe_target_step(1, 1.0);  // cold
  for (int32_t t = 2; t <= 120; ++t) p.observe_target_step(t, 0.040 + 0.00001 * t);
  for (int i = 0; i < 30; ++i) p.observe_verification(1, 4, 4);
  const std::vector<int64_t> one = {1};
  EXPECT_EQ(p.choose(one), 0);
  EXPECT_GT(p.choose(one, 4), 0);  // 5-9 token steps all measured flat: draft
}

TEST(DraftLengthPolicy, TheFirstStepIsNotLearned) {
  // A process's first step (a 30-token prompt) pays page faults: 1 s, where a decode step takes
  // 20 ms and verifying a few tokens about as much. Learned, it would put a 7-token step on the
  // chord to it (0.22 s) and the policy would never draft, so never correct it.
  const std::vector<int64_t> one = {1};
  DraftLengthPolicy first(ngram(6), false);
  first.observe_target_step(30, 1.0);
  first.observe_target_step(1, 0.020);
  for (int i = 0; i < 30; ++i) first.observe_verification(1, 6, 6);
  EXPECT_GT(first.choose(one), 0);
  // The same slow step after a first one is learned, and then it decides.
  DraftLengthPolicy later(ngram(6), false);
  later.observe_target_step(1, 0.020);
  later.observe_target_step(30, 1.0);
  later.observe_target_step(1, 0.020);
  for (int i = 0; i < 30; ++i) later.observe_verification(1, 6, 6);
  EXPECT_EQ(later.choose(one), 0);
}

TEST(DraftLengthPolicy, AcceptanceStartsAtTheGlobalRateAndOneRejectionDoesNotStopIt) {
  DraftLengthPolicy p(ngram(4), false);
  EXPECT_NEAR(p.acceptance(7), 0.7, 1e-12);  // nothing measured
  measure(p, 0.020, 0.00001, 64);
  const std::vector<int64_t> one = {1};
  p.observe_verification(1, 4, 0);  // a first draft, all rejected
  EXPECT_LT(p.acceptance(1), 0.7);
  EXPECT_GT(p.acceptance(1), 0.3);
  EXPECT_GT(p.choose(one), 0);
  p.remove(1);  // forgotten: back to the global rate
  EXPECT_DOUBLE_EQ(p.acceptance(1), p.acceptance(12345));
}

TEST(DraftLengthPolicy, NoDraftsDriftsBackToTheGlobalRate) {
  DraftLengthPolicy p(ngram(4), false);
  // Sequences 2..9 accept everything (the global rate is high); sequence 1 nothing.
  for (int i = 0; i < 20; ++i) {
    for (int64_t s = 2; s <= 9; ++s) p.observe_verification(s, 4, 4);
    p.observe_verification(1, 4, 0);
  }
  const double global = p.acceptance(1000);  // an unknown sequence gets the global rate
  const double other = p.acceptance(2);
  double gap = global - p.acceptance(1);
  ASSERT_GT(gap, 0.3);
  const std::vector<int64_t> idle = {1};
  for (int i = 0; i < 300; ++i) {
    p.observe_no_drafts(idle);
    const double now = global - p.acceptance(1);
    ASSERT_LE(now, gap + 1e-12) << "step " << i;  // monotone toward the global rate
    gap = now;
  }
  EXPECT_LT(gap, 0.02);
  EXPECT_GE(gap, 0.0);
  EXPECT_DOUBLE_EQ(p.acceptance(1000), global);  // the global rate itself is not moved
  EXPECT_DOUBLE_EQ(p.acceptance(2), other);      // nor are the other sequences
}

}  // namespace
}  // namespace llms::spec
