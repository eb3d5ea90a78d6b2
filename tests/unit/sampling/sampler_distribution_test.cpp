// Sampler::distribution() and its companions (draw_from, uniform01, fill_logprobs, is_greedy,
// wants_logprobs, Distribution::prob_of), the pieces speculative verification is built on: the
// greedy distribution is the argmax alone; with temperature, top-k, top-p and min-p the candidates
// and their probabilities equal an independent computation (softmax(logits / T) renormalised over
// the kept set) and are exactly the tokens sample() can return; penalties and logit bias are
// applied with the current penalty state; draws follow the distribution (chi-square tests with
// fixed seeds, so the outcome is reproducible).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "chi_square.h"
#include "sampling/sampler.h"

namespace llms::sampling {
namespace {

using testing::chi_square;
using testing::chi_square_critical_p001;

// The processed distribution computed independently from (already penalised) logits: ids in
// (logit desc, id asc) order, top-k, softmax at temperature T over the top-k set, the smallest
// prefix whose mass reaches top_p, then min_p against the largest kept probability;
// renormalised. id -> probability.
std::map<int32_t, double> reference(const std::vector<float>& logits, const SamplingParams& p) {
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  if (p.temperature == 0.0f) return {{ids[0], 1.0}};
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < ids.size()) ids.resize(p.top_k);
  std::vector<double> w;
  for (int32_t id : ids) w.push_back(std::exp((logits[id] - logits[ids[0]]) / p.temperature));
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  size_t keep = ids.size();
  if (p.top_p < 1.0f) {
    double mass = 0;
    keep = 0;
    while (keep < ids.size() && mass < p.top_p * total) mass += w[keep++];
  }
  std::map<int32_t, double> out;
  double kept_total = 0;
  for (size_t i = 0; i < keep; ++i) {
    if (w[i] >= p.min_p * w[0]) {
      out[ids[i]] = w[i];
      kept_total += w[i];
    }
  }
  for (auto& [id, q] : out) q /= kept_total;
  return out;
}

void expect_matches(const Distribution& d, const std::map<int32_t, double>& want,
                    const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(d.ids.size(), d.probs.size());
  std::set<int32_t> got_ids(d.ids.begin(), d.ids.end());
  EXPECT_EQ(got_ids.size(), d.ids.size()) << "an id appears twice";
  std::set<int32_t> want_ids;
  for (const auto& [id, q] : want) want_ids.insert(id);
  ASSERT_EQ(got_ids, want_ids);
  double sum = 0;
  for (size_t i = 0; i < d.ids.size(); ++i) {
    EXPECT_NEAR(d.probs[i], want.at(d.ids[i]), 1e-5) << "token " << d.ids[i];
    EXPECT_EQ(d.prob_of(d.ids[i]), d.probs[i]);
    sum += d.probs[i];
  }
  EXPECT_NEAR(sum, 1.0, 1e-5);
}

// Twelve logits with distinct, well separated probabilities (no ties at a filter boundary).
const std::vector<float> kLogits12 = {1.3f, -0.4f, 2.1f, 0.2f,  -1.7f, 0.9f,
                                      3.0f, -0.9f, 1.7f, -2.5f, 0.5f,  -0.1f};

TEST(SamplerDistribution, GreedyIsTheArgmaxAloneAndTheLowestIdOnATie) {
  SamplingParams p;
  p.temperature = 0.0f;
  Sampler s(p, 5);
  EXPECT_TRUE(s.is_greedy());
  Distribution d;
  d.ids = {4, 4};  // stale contents are replaced
  d.probs = {0.5f, 0.5f};
  std::vector<float> l = {1, 3, 2, 3, 0};
  s.distribution(l, d);
  EXPECT_EQ(d.ids, std::vector<int32_t>{1});
  EXPECT_EQ(d.probs, std::vector<float>{1.0f});
  EXPECT_EQ(d.prob_of(1), 1.0f);
  EXPECT_EQ(d.prob_of(3), 0.0f);
  EXPECT_EQ(d.prob_of(-1), 0.0f);

  // A long row (the lane-parallel argmax), the tie across lanes.
  std::vector<float> big(1000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = std::sin(0.37f * static_cast<float>(i));
  big[517] = big[900] = 5.0f;
  Sampler g(p, 1000);
  std::vector<float> copy = big;
  g.distribution(copy, d);
  EXPECT_EQ(d.ids, std::vector<int32_t>{517});
  copy = big;
  EXPECT_EQ(g.sample(copy).token, 517);
}

TEST(SamplerDistribution, MatchesAnIndependentComputationAndWhatSampleReturns) {
  struct Case {
    const char* name;
    float temperature;
    int32_t top_k;
    float top_p;
    float min_p;
  };
  const Case cases[] = {
      {"plain", 1.0f, 0, 1.0f, 0.0f},      {"hot", 1.7f, 0, 1.0f, 0.0f},
      {"cold", 0.5f, 0, 1.0f, 0.0f},       {"top_k 5", 1.0f, 5, 1.0f, 0.0f},
      {"top_p 0.9", 1.0f, 0, 0.9f, 0.0f},  {"top_p 0.5 T 0.8", 0.8f, 0, 0.5f, 0.0f},
      {"min_p 0.1", 1.0f, 0, 1.0f, 0.1f},  {"top_k 8 top_p 0.85", 1.2f, 8, 0.85f, 0.0f},
      {"all four", 0.9f, 9, 0.93f, 0.05f}, {"top_k past vocab", 1.0f, 50, 1.0f, 0.0f},
  };
  for (const Case& c : cases) {
    SamplingParams p;
    p.temperature = c.temperature;
    p.top_k = c.top_k;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    p.seed = 99;
    Sampler s(p, 12);
    EXPECT_FALSE(s.is_greedy());
    Distribution d;
    std::vector<float> l = kLogits12;
    s.distribution(l, d);
    const auto want = reference(kLogits12, p);
    expect_matches(d, want, c.name);
    // sample() returns only candidates, and every candidate of probability >= 1 % shows up
    // within 5,000 draws (a miss has probability below 0.99^5000 ~ 1e-22).
    std::set<int32_t> seen;
    for (int i = 0; i < 5000; ++i) {
      std::vector<float> row = kLogits12;
      const int32_t t = s.sample(row).token;
      EXPECT_GT(d.prob_of(t), 0.0f) << c.name << ": sample() returned non-candidate " << t;
      seen.insert(t);
    }
    for (size_t i = 0; i < d.ids.size(); ++i) {
      if (d.probs[i] >= 0.01f) {
        EXPECT_TRUE(seen.count(d.ids[i])) << c.name << " " << d.ids[i];
      }
    }
  }
}

TEST(SamplerDistribution, TopPOverALargeVocabularyMatchesTheReference) {
  // More candidates in the nucleus than the sampler's sorted prefix (256).
  std::vector<float> logits(3000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = 0.002f * static_cast<float>(i % 1499);
  SamplingParams p;
  p.top_p = 0.7f;
  Sampler s(p, 3000);
  Distribution d;
  std::vector<float> l = logits;
  s.distribution(l, d);
  expect_matches(d, reference(logits, p), "large top_p");
  EXPECT_GT(d.ids.size(), 256u);
}

TEST(SamplerDistribution, PenaltiesAndBiasFollowThePenaltyState) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  p.logit_bias = {{2, 1.5f}, {9, -3.0f}};
  Sampler s(p, 12);
  const std::vector<int32_t> prompt = {0, 1};
  s.set_prompt(prompt);

  // The chain by hand: prompt tokens get the repetition penalty, then the bias.
  std::vector<float> want = kLogits12;
  want[0] /= 2.0f;  // positive: divided
  want[1] *= 2.0f;  // negative: multiplied
  want[2] += 1.5f;
  want[9] -= 3.0f;
  Distribution d;
  std::vector<float> l = kLogits12;
  s.distribution(l, d);
  EXPECT_EQ(l, want);  // the row is processed in place, as sample() does
  SamplingParams plain;
  expect_matches(d, reference(want, plain), "prompt penalty and bias");

  // After output tokens 6 (twice) and 1: frequency and presence penalties, repetition for 6.
  s.accept(6);
  s.accept(6);
  s.accept(1);
  want = kLogits12;
  want[0] /= 2.0f;
  want[1] = want[1] * 2.0f - (0.25f * 1 + 0.5f);
  want[6] = want[6] / 2.0f - (0.25f * 2 + 0.5f);
  want[2] += 1.5f;
  want[9] -= 3.0f;
  l = kLogits12;
  s.distribution(l, d);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(l[i], want[i]) << "token " << i;
  expect_matches(d, reference(want, plain), "after accept()");
  // Token 6 was the favourite; its penalties moved its probability down.
  Sampler fresh(p, 12);
  fresh.set_prompt(prompt);
  Distribution before;
  l = kLogits12;
  fresh.distribution(l, before);
  EXPECT_LT(d.prob_of(6), before.prob_of(6) * 0.5f);

  // distribution() itself records nothing: asking twice gives the same answer.
  Distribution again;
  l = kLogits12;
  s.distribution(l, again);
  EXPECT_EQ(again.ids, d.ids);
  EXPECT_EQ(again.probs, d.probs);
}

TEST(SamplerDistribution, GreedyFollowsPenaltiesToo) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 4.0f;
  Sampler s(p, 12);
  Distribution d;
  std::vector<float> l = kLogits12;
  s.distribution(l, d);
  EXPECT_EQ(d.ids, std::vector<int32_t>{6});  // 3.0
  s.accept(6);                                // 3.0 / 4 = 0.75: 2 (2.1) is now the argmax
  l = kLogits12;
  s.distribution(l, d);
  EXPECT_EQ(d.ids, std::vector<int32_t>{2});
}

TEST(SamplerDistribution, DrawFromFollowsTheDistribution) {
  SamplingParams p;
  p.seed = 2024;
  Sampler s(p, 16);
  Distribution d;
  EXPECT_EQ(s.draw_from(d), -1);  // empty
  d.ids = {7, 3, 11, 0, 5, 14};
  d.probs = {0.4f, 0.25f, 0.2f, 0.1f, 0.04f, 0.01f};
  const int n = 40000;
  for (float scale : {1.0f, 0.37f}) {  // unnormalised weights (a rejection residual) too
    Distribution w = d;
    for (float& q : w.probs) q *= scale;
    std::vector<double> counts(d.ids.size(), 0), expected;
    for (int i = 0; i < n; ++i) {
      const int32_t t = s.draw_from(w);
      const auto it = std::find(d.ids.begin(), d.ids.end(), t);
      ASSERT_NE(it, d.ids.end()) << "drew " << t;
      ++counts[static_cast<size_t>(it - d.ids.begin())];
    }
    for (float q : d.probs) expected.push_back(n * static_cast<double>(q));
    const auto chi = chi_square(counts, expected);
    EXPECT_EQ(chi.df, 5);
    EXPECT_TRUE(chi.passes()) << "scale " << scale << ": chi-square " << chi.statistic
                              << " >= " << chi_square_critical_p001(chi.df);
  }
}

TEST(SamplerDistribution, SampleFollowsDistributionWithTopP) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.9f;
  p.seed = 77;
  Sampler s(p, 12);
  Distribution d;
  std::vector<float> l = kLogits12;
  s.distribution(l, d);
  ASSERT_LT(d.ids.size(), 12u);  // the nucleus cut something
  ASSERT_GT(d.ids.size(), 3u);
  const int n = 30000;
  std::vector<double> counts(12, 0);
  for (int i = 0; i < n; ++i) {
    std::vector<float> row = kLogits12;
    ++counts[static_cast<size_t>(s.sample(row).token)];
  }
  std::vector<double> expected(12, 0), cand_counts, cand_expected;
  for (int32_t id = 0; id < 12; ++id) {
    if (d.prob_of(id) == 0.0f) {
      EXPECT_EQ(counts[id], 0.0) << "token " << id << " is outside the nucleus";
    } else {
      cand_counts.push_back(counts[id]);
      cand_expected.push_back(n * static_cast<double>(d.prob_of(id)));
    }
  }
  const auto chi = chi_square(cand_counts, cand_expected);
  EXPECT_GE(chi.df, 3);
  EXPECT_TRUE(chi.passes()) << "chi-square " << chi.statistic
                            << " >= " << chi_square_critical_p001(chi.df);
}

TEST(SamplerDistribution, Uniform01IsSeededAndUniform) {
  SamplingParams p;
  p.seed = 5;
  Sampler a(p, 4), b(p, 4);
  const int n = 50000;
  std::vector<double> counts(10, 0);
  for (int i = 0; i < n; ++i) {
    const double u = a.uniform01();
    ASSERT_EQ(u, b.uniform01());  // same seed, same stream
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    ++counts[static_cast<size_t>(u * 10)];
  }
  const auto chi = chi_square(counts, std::vector<double>(10, n / 10.0));
  EXPECT_EQ(chi.df, 9);
  EXPECT_TRUE(chi.passes()) << "chi-square " << chi.statistic;
  p.seed = 6;
  Sampler c(p, 4);
  EXPECT_NE(c.uniform01(), a.uniform01());
}

TEST(SamplerDistribution, FillLogprobsReportsTheRawLogSoftmax) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = true;
  p.n_top_logprobs = 3;
  p.logit_bias = {{6, -100.0f}};  // moves the choice, not the reported logprobs
  Sampler s(p, 12);
  EXPECT_TRUE(s.wants_logprobs());
  SampleResult r;
  s.fill_logprobs(kLogits12, r, 8);
  double z = 0;
  for (float x : kLogits12) z += std::exp(static_cast<double>(x));
  const double log_z = std::log(z);
  EXPECT_NEAR(r.logprob, 1.7 - log_z, 1e-5);
  ASSERT_EQ(r.top_logprobs.size(), 3u);
  const int32_t best[] = {6, 2, 8};  // 3.0, 2.1, 1.7
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(r.top_logprobs[i].token, best[i]);
    EXPECT_NEAR(r.top_logprobs[i].logprob, kLogits12[best[i]] - log_z, 1e-5);
  }
  // The same as sample() reports for the token it picks from the same row.
  std::vector<float> row = kLogits12;
  const SampleResult from_sample = s.sample(row);
  EXPECT_EQ(from_sample.token, 2);  // 6 biased away
  SampleResult filled;
  s.fill_logprobs(kLogits12, filled, from_sample.token);
  EXPECT_FLOAT_EQ(filled.logprob, from_sample.logprob);
  ASSERT_EQ(filled.top_logprobs.size(), from_sample.top_logprobs.size());
  for (size_t i = 0; i < filled.top_logprobs.size(); ++i) {
    EXPECT_EQ(filled.top_logprobs[i].token, from_sample.top_logprobs[i].token);
  }

  SamplingParams only_chosen;
  only_chosen.logprobs = true;
  EXPECT_TRUE(Sampler(only_chosen, 4).wants_logprobs());
  SamplingParams only_top;
  only_top.n_top_logprobs = 1;
  EXPECT_TRUE(Sampler(only_top, 4).wants_logprobs());
  EXPECT_FALSE(Sampler(SamplingParams{}, 4).wants_logprobs());
  EXPECT_FALSE(Sampler(SamplingParams{}, 4).is_greedy());
}

}  // namespace
}  // namespace llms::sampling
