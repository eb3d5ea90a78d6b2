// The step-time model against steps whose cost follows a known linear law: it recovers the law,
// follows a machine that slows down, keeps a term no recent step measured, never goes negative.
#include "sched/step_time_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace llms::sched {
namespace {

struct Law {
  double step_s, prompt_s, decode_s, attended_s;
  double operator()(const StepShape& s) const {
    return step_s + prompt_s * static_cast<double>(s.prompt_tokens) +
           decode_s * static_cast<double>(s.decode_sequences) +
           attended_s * static_cast<double>(s.attended);
  }
};

// Steps like a server's: decode-only ones, decode beside a prompt chunk at some position, and
// prompt-only ones.
StepShape random_step(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> kind(0, 2);
  std::uniform_int_distribution<int64_t> decodes(1, 16);
  std::uniform_int_distribution<int64_t> chunk(1, 512);
  std::uniform_int_distribution<int64_t> position(0, 4000);
  StepShape s;
  const int k = kind(rng);
  if (k != 2) {
    s.decode_sequences = decodes(rng);
    s.attended += s.decode_sequences * position(rng);
  }
  if (k != 0) {
    s.prompt_tokens = chunk(rng);
    s.attended += attended_by_chunk(position(rng), s.prompt_tokens);
  }
  return s;
}

const Law kMachine{8e-3, 1.3e-3, 2.1e-3, 0.7e-6};

TEST(StepTimeModel, AttendedByAChunkCountsEveryRowsPositions) {
  EXPECT_EQ(attended_by_chunk(0, 1), 1);
  EXPECT_EQ(attended_by_chunk(9, 1), 10);     // a decode row at position 9 sees 10 tokens
  EXPECT_EQ(attended_by_chunk(0, 4), 10);     // 1 + 2 + 3 + 4
  EXPECT_EQ(attended_by_chunk(100, 3), 306);  // 101 + 102 + 103
}

TEST(StepTimeModel, KnowsNothingBeforeTheFirstStepAndIgnoresEmptyOnes) {
  StepTimeModel m;
  EXPECT_FALSE(m.known());
  EXPECT_EQ(m.predict(StepShape{100, 4, 5000}), 0.0);
  m.observe(StepShape{}, 0.5);            // no work
  m.observe(StepShape{10, 0, 55}, 0.0);   // no time
  m.observe(StepShape{10, 0, 55}, -1.0);  // negative
  m.observe(StepShape{10, 0, 55}, std::nan(""));
  EXPECT_FALSE(m.known());
  m.observe(StepShape{128, 0, 8256}, 0.2);
  EXPECT_TRUE(m.known());
  EXPECT_EQ(m.estimate().n_steps, 1);
  // The first guess: the first step exactly, a decode step neither free nor a prefill's cost.
  EXPECT_NEAR(m.predict(StepShape{128, 0, 8256}), 0.2, 0.01);
  const double decode = m.predict(StepShape{0, 4, 400});
  EXPECT_GT(decode, 0.005);
  EXPECT_LT(decode, 0.05);
}

TEST(StepTimeModel, RecoversALinearCost) {
  StepTimeModel m;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 400; ++i) {
    const StepShape s = random_step(rng);
    m.observe(s, kMachine(s));
  }
  const StepTimeEstimate e = m.estimate();
  EXPECT_NEAR(e.step_s, kMachine.step_s, 0.02 * kMachine.step_s);
  EXPECT_NEAR(e.prompt_token_s, kMachine.prompt_s, 0.02 * kMachine.prompt_s);
  EXPECT_NEAR(e.decode_sequence_s, kMachine.decode_s, 0.02 * kMachine.decode_s);
  EXPECT_NEAR(e.attended_token_s, kMachine.attended_s, 0.02 * kMachine.attended_s);
  EXPECT_LT(e.relative_error, 0.05);
  for (int i = 0; i < 50; ++i) {
    const StepShape s = random_step(rng);
    EXPECT_NEAR(m.predict(s), kMachine(s), 0.01 * kMachine(s));
  }
}

TEST(StepTimeModel, ToleratesNoiseAndStaysNonNegative) {
  // No fixed cost at all, and 10 % noise: the fit must not trade a negative term for a better
  // fit of the noise.
  const Law law{0.0, 1.5e-3, 1.0e-3, 0.0};
  StepTimeModel m;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> noise(0.9, 1.1);
  for (int i = 0; i < 1000; ++i) {
    const StepShape s = random_step(rng);
    m.observe(s, law(s) * noise(rng));
  }
  const StepTimeEstimate e = m.estimate();
  EXPECT_GE(e.step_s, 0.0);
  EXPECT_GE(e.attended_token_s, 0.0);
  EXPECT_NEAR(e.prompt_token_s, law.prompt_s, 0.1 * law.prompt_s);
  EXPECT_NEAR(e.decode_sequence_s, law.decode_s, 0.15 * law.decode_s);
  const StepShape decode{0, 8, 8000};
  EXPECT_NEAR(m.predict(decode), law(decode), 0.15 * law(decode));
}

TEST(StepTimeModel, FollowsAMachineThatSlowsDown) {
  StepTimeModel m;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 300; ++i) {
    const StepShape s = random_step(rng);
    m.observe(s, kMachine(s));
  }
  const Law slower{2 * kMachine.step_s, 2 * kMachine.prompt_s, 2 * kMachine.decode_s,
                   2 * kMachine.attended_s};
  for (int i = 0; i < 600; ++i) {
    const StepShape s = random_step(rng);
    m.observe(s, slower(s));
  }
  for (int i = 0; i < 50; ++i) {
    const StepShape s = random_step(rng);
    EXPECT_NEAR(m.predict(s), slower(s), 0.05 * slower(s));
  }
}

TEST(StepTimeModel, ATermNoRecentStepMeasuredKeepsItsEstimate) {
  StepTimeModel m;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 300; ++i) {
    const StepShape s = random_step(rng);
    m.observe(s, kMachine(s));
  }
  const double prompt_before = m.estimate().prompt_token_s;
  // Thousands of decode-only steps (no prompt token) with a little noise.
  std::uniform_real_distribution<double> noise(0.97, 1.03);
  std::uniform_int_distribution<int64_t> decodes(1, 8);
  for (int i = 0; i < 5000; ++i) {
    const int64_t n = decodes(rng);
    const StepShape s{0, n, n * 500};
    m.observe(s, kMachine(s) * noise(rng));
  }
  EXPECT_NEAR(m.estimate().prompt_token_s, prompt_before, 0.1 * prompt_before);
  const StepShape chunk{64, 4, attended_by_chunk(1000, 64) + 4 * 200};
  EXPECT_NEAR(m.predict(chunk), kMachine(chunk), 0.1 * kMachine(chunk));
}

}  // namespace
}  // namespace llms::sched
