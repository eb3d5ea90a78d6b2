#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "util/error.h"

namespace llms::sampling {
namespace {

std::vector<float> logits_of(std::initializer_list<float> v) { return std::vector<float>(v); }

std::vector<int> histogram(SamplingParams p, const std::vector<float>& logits, int n_draws) {
  p.seed = 1234;
  Sampler s(p, static_cast<int32_t>(logits.size()));
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n_draws; ++i) {
    std::vector<float> l = logits;
    ++counts[s.sample(l).token];
  }
  return counts;
}

TEST(Sampler, GreedyTakesTheArgmaxAndTheLowestIdOnATie) {
  SamplingParams p;
  p.temperature = 0.0f;
  Sampler s(p, 5);
  auto l = logits_of({1, 3, 2, 3, 0});
  EXPECT_EQ(s.sample(l).token, 1);
}

// The lane-parallel argmax against std::max_element: random rows of every length around the
// lane count, values from a small set so that ties (across lanes, within a lane, in the tail)
// are common, and the maximum placed first, last and in the tail.
TEST(Sampler, ArgmaxEqualsMaxElementWithTies) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> value(-3, 3);
  EXPECT_EQ(argmax({}), -1);
  int n_cases = 0;
  for (int n : {1, 2, 15, 16, 17, 31, 32, 33, 47, 100, 1000, 151936}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = static_cast<float>(value(rng));
      if (trial == 1) x.front() = 9.0f;
      if (trial == 2) x.back() = 9.0f;
      if (trial == 3 && n > 2) x[static_cast<size_t>(n - 2)] = x[static_cast<size_t>(n - 1)] = 9.0f;
      if (trial == 4) std::fill(x.begin(), x.end(), -1.0f);
      const auto expected = static_cast<int32_t>(std::max_element(x.begin(), x.end()) - x.begin());
      ASSERT_EQ(argmax(x), expected) << "n " << n << ", trial " << trial;
      ++n_cases;
    }
  }
  EXPECT_EQ(n_cases, 240);
}

TEST(Sampler, SameSeedSameTokensOtherSeedOtherTokens) {
  SamplingParams p;
  std::vector<float> logits(100);
  for (int i = 0; i < 100; ++i) logits[i] = std::sin(i * 0.7f);
  auto run = [&](uint64_t seed) {
    p.seed = seed;
    Sampler s(p, 100);
    std::vector<int32_t> out;
    for (int i = 0; i < 50; ++i) {
      auto l = logits;
      out.push_back(s.sample(l).token);
    }
    return out;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST(Sampler, UnfilteredDrawsFollowTheSoftmax) {
  auto logits = logits_of({0.0f, 1.0f, 2.0f, -1.0f});
  const int n = 40000;
  auto counts = histogram(SamplingParams{}, logits, n);
  double z = 0;
  for (float l : logits) z += std::exp(l);
  for (size_t i = 0; i < logits.size(); ++i) {
    double p = std::exp(logits[i]) / z;
    double sigma = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(counts[i], n * p, 4 * sigma) << "token " << i;
  }
}

TEST(Sampler, TemperatureSharpens) {
  auto logits = logits_of({0.0f, 1.0f});
  SamplingParams cold;
  cold.temperature = 0.25f;  // p(1) = 1 / (1 + e^-4) = 0.982
  auto counts = histogram(cold, logits, 10000);
  EXPECT_NEAR(counts[1] / 10000.0, 0.982, 0.01);
}

TEST(Sampler, TopKKeepsOnlyTheBestK) {
  SamplingParams p;
  p.top_k = 2;
  auto counts = histogram(p, logits_of({3.0f, 0.0f, 2.9f, 1.0f}), 5000);
  EXPECT_EQ(counts[1] + counts[3], 0);
  EXPECT_GT(counts[0], 0);
  EXPECT_GT(counts[2], 0);
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
  // probabilities 0.5, 0.3, 0.2: top_p 0.6 keeps {0, 1}, renormalised to 0.625 / 0.375.
  SamplingParams p;
  p.top_p = 0.6f;
  auto logits = logits_of({std::log(0.5f), std::log(0.3f), std::log(0.2f)});
  const int n = 20000;
  auto counts = histogram(p, logits, n);
  EXPECT_EQ(counts[2], 0);
  double sigma = std::sqrt(n * 0.625 * 0.375);
  EXPECT_NEAR(counts[0], n * 0.625, 4 * sigma);
}

TEST(Sampler, TopPBeyondThePrefixStillExact) {
  // 1000 equal tokens: top_p 0.5 must keep 500 of them (more than the sorted prefix).
  std::vector<float> logits(1000, 0.0f);
  SamplingParams p;
  p.top_p = 0.5f;
  auto counts = histogram(p, logits, 20000);
  int used = 0;
  for (int i = 0; i < 1000; ++i) used += counts[i] > 0;
  for (int i = 500; i < 1000; ++i) EXPECT_EQ(counts[i], 0) << i;  // ties keep the lowest ids
  EXPECT_GT(used, 450);
}

TEST(Sampler, MinPDropsTokensFarBelowTheBest) {
  SamplingParams p;
  p.min_p = 0.5f;  // keeps tokens with p >= 0.5 * p_max
  auto logits = logits_of({std::log(0.5f), std::log(0.3f), std::log(0.2f)});
  auto counts = histogram(p, logits, 5000);
  EXPECT_EQ(counts[2], 0);  // 0.2 < 0.25
  EXPECT_GT(counts[1], 0);  // 0.3 >= 0.25
}

TEST(Sampler, PenaltiesAndBias) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  p.logit_bias = {{3, -100.0f}};
  Sampler s(p, 4);
  std::vector<int32_t> prompt = {0, 1};
  s.set_prompt(prompt);
  s.accept(1);
  s.accept(1);
  auto l = logits_of({4.0f, -1.0f, 1.5f, 9.0f});
  auto r = s.sample(l);
  EXPECT_FLOAT_EQ(l[0], 2.0f);                             // 4 / 2 (prompt token)
  EXPECT_FLOAT_EQ(l[1], -1.0f * 2.0f - 0.25f * 2 - 0.5f);  // * 2, then 2 x 0.25 + 0.5
  EXPECT_FLOAT_EQ(l[2], 1.5f);                             // untouched
  EXPECT_FLOAT_EQ(l[3], -91.0f);                           // biased away
  EXPECT_EQ(r.token, 0);
}

TEST(Sampler, LogprobsAreTheRawLogSoftmax) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = true;
  p.n_top_logprobs = 2;
  p.logit_bias = {{0, -100.0f}};  // changes the choice, not the reported distribution
  Sampler s(p, 3);
  auto l = logits_of({2.0f, 1.0f, 0.0f});
  auto r = s.sample(l);
  double z = std::log(std::exp(2.0) + std::exp(1.0) + std::exp(0.0));
  EXPECT_EQ(r.token, 1);
  EXPECT_NEAR(r.logprob, 1.0 - z, 1e-5);
  ASSERT_EQ(r.top_logprobs.size(), 2u);
  EXPECT_EQ(r.top_logprobs[0].token, 0);
  EXPECT_NEAR(r.top_logprobs[0].logprob, 2.0 - z, 1e-5);
  EXPECT_EQ(r.top_logprobs[1].token, 1);
}

TEST(Sampler, RefusesOutOfRangeParameters) {
  auto refuses = [](auto mutate, const char* name) {
    SamplingParams p;
    mutate(p);
    try {
      p.validate(10);
      ADD_FAILURE() << name << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  };
  refuses([](SamplingParams& p) { p.temperature = -0.1f; }, "temperature");
  refuses([](SamplingParams& p) { p.temperature = NAN; }, "temperature");
  refuses([](SamplingParams& p) { p.top_p = 0.0f; }, "top_p");
  refuses([](SamplingParams& p) { p.top_p = 1.5f; }, "top_p");
  refuses([](SamplingParams& p) { p.min_p = -1.0f; }, "min_p");
  refuses([](SamplingParams& p) { p.presence_penalty = 2.5f; }, "presence_penalty");
  refuses([](SamplingParams& p) { p.frequency_penalty = -3.0f; }, "frequency_penalty");
  refuses([](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "repetition_penalty");
  refuses([](SamplingParams& p) { p.n_top_logprobs = 21; }, "top_logprobs");
  refuses([](SamplingParams& p) { p.logit_bias = {{10, 1.0f}}; }, "logit_bias");
  refuses([](SamplingParams& p) { p.logit_bias = {{1, 101.0f}}; }, "logit_bias");
}

}  // namespace
}  // namespace llms::sampling
