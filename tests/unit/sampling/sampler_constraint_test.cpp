// A Sampler with a TokenConstraint: the mask comes first (greedy takes the best allowed token,
// draws never land outside the mask, whatever top-k/top-p/min-p keep), accept() moves the
// constraint on, a row with nothing allowed throws ConstraintDeadEnd, and logprobs stay those of
// the raw row.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <set>
#include <vector>

#include "sampling/sampler.h"
#include "sampling/token_constraint.h"

namespace llms::sampling {
namespace {

// Allows the tokens of `allowed[i]` at the i-th emitted position, then nothing.
class ScriptConstraint : public TokenConstraint {
 public:
  explicit ScriptConstraint(std::vector<std::set<int32_t>> allowed, std::vector<int32_t>* log)
      : allowed_(std::move(allowed)), log_(log) {}
  bool mask(std::span<float> logits) override {
    if (at_ >= allowed_.size() || allowed_[at_].empty()) return false;
    for (size_t id = 0; id < logits.size(); ++id) {
      if (allowed_[at_].count(static_cast<int32_t>(id)) == 0) {
        logits[id] = -std::numeric_limits<float>::infinity();
      }
    }
    return true;
  }
  void accept(int32_t token) override {
    EXPECT_TRUE(at_ < allowed_.size() && allowed_[at_].count(token)) << "token " << token;
    log_->push_back(token);
    ++at_;
  }

 private:
  std::vector<std::set<int32_t>> allowed_;
  std::vector<int32_t>* log_;
  size_t at_ = 0;
};

std::vector<float> ramp(int n) {
  std::vector<float> r(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) r[static_cast<size_t>(i)] = 0.1f * static_cast<float>(i);
  return r;
}

TEST(SamplerConstraint, GreedyTakesTheBestAllowedTokenAndAcceptMovesOn) {
  SamplingParams p;
  p.temperature = 0.0f;
  Sampler s(p, 16);
  std::vector<int32_t> log;
  s.set_constraint(
      std::make_unique<ScriptConstraint>(std::vector<std::set<int32_t>>{{2, 5}, {0, 1}, {}}, &log));
  EXPECT_TRUE(s.constrained());
  std::vector<float> row = ramp(16);  // the raw argmax is 15
  const int32_t first = s.sample(row).token;
  EXPECT_EQ(first, 5);
  s.accept(first);
  row = ramp(16);
  const int32_t second = s.sample(row).token;
  EXPECT_EQ(second, 1);
  s.accept(second);
  EXPECT_EQ(log, (std::vector<int32_t>{5, 1}));
  row = ramp(16);
  EXPECT_THROW(s.sample(row), ConstraintDeadEnd);
  Distribution d;
  row = ramp(16);
  EXPECT_THROW(s.distribution(row, d), ConstraintDeadEnd);
}

TEST(SamplerConstraint, DrawsNeverLeaveTheMaskWhateverTheChainKeeps) {
  for (const float top_p : {1.0f, 0.5f}) {
    for (const int32_t top_k : {0, 3}) {
      SamplingParams p;
      p.temperature = 1.0f;
      p.top_p = top_p;
      p.top_k = top_k;
      p.min_p = 0.05f;
      p.seed = 7;
      p.logprobs = true;
      Sampler s(p, 64);
      std::vector<int32_t> log;
      // Two allowed tokens below the raw top ones, at every position.
      std::vector<std::set<int32_t>> script(2000, std::set<int32_t>{38, 40});
      s.set_constraint(std::make_unique<ScriptConstraint>(script, &log));
      std::set<int32_t> seen;
      for (int i = 0; i < 2000; ++i) {
        std::vector<float> row = ramp(64);
        const SampleResult r = s.sample(row);
        ASSERT_TRUE(r.token == 38 || r.token == 40) << r.token;
        // The raw row's logprob, not the masked one's.
        const std::vector<float> raw = ramp(64);
        double z = 0.0;
        for (float v : raw) z += std::exp(v);
        EXPECT_NEAR(r.logprob, raw[static_cast<size_t>(r.token)] - std::log(z), 1e-4);
        seen.insert(r.token);
        s.accept(r.token);
      }
      // p(40) = 0.55, p(38) = 0.45 after the mask: a nucleus of 0.5 keeps 40 alone.
      EXPECT_EQ(seen.size(), top_p == 1.0f ? 2u : 1u);
      EXPECT_EQ(seen.count(40), 1u);
      Distribution d;
      std::vector<float> row = ramp(64);
      s.set_constraint(
          std::make_unique<ScriptConstraint>(std::vector<std::set<int32_t>>{{38, 40}}, &log));
      s.distribution(row, d);
      for (size_t i = 0; i < d.ids.size(); ++i) {
        if (d.ids[i] != 38 && d.ids[i] != 40) {
          EXPECT_EQ(d.probs[i], 0.0f) << d.ids[i];
        }
      }
      EXPECT_GT(d.prob_of(40), 0.0f);
    }
  }
}

}  // namespace
}  // namespace llms::sampling
