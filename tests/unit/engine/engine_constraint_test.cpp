// Structured output through the engine's seam (GenerationRequest::constraint): every sample's
// tokens obey its own constraint; with speculation (prompt lookup, a draft model, token trees)
// greedy output is the same as without; n samples each get their own; a constraint that allows
// nothing more ends the request as a stop saying why, and the others go on; preemption and
// chunked prefill change nothing.
#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <random>

#include "engine_fixture.h"
#include "sampling/token_constraint.h"

namespace llms::engine {
namespace {

using testing_support::collect;
using testing_support::Collected;
using testing_support::EngineTest;
using testing_support::ids_of;

// At the i-th generated position, tokens t with (t + i) % 3 == 0 and t < limit; nothing from
// position `length` on (length < 0: no end).
class ModuloConstraint : public sampling::TokenConstraint {
 public:
  ModuloConstraint(int32_t limit, int32_t length) : limit_(limit), length_(length) {}
  bool mask(std::span<float> logits) override {
    if (length_ >= 0 && position_ >= length_) return false;
    for (size_t t = 0; t < logits.size(); ++t) {
      if (!allowed(static_cast<int32_t>(t), position_)) {
        logits[t] = -std::numeric_limits<float>::infinity();
      }
    }
    return true;
  }
  void accept(int32_t token) override {
    EXPECT_TRUE(allowed(token, position_)) << "token " << token << " at " << position_;
    ++position_;
  }
  bool allowed(int32_t t, int32_t i) const { return t < limit_ && (t + i) % 3 == 0; }

 private:
  int32_t limit_;
  int32_t length_;
  int32_t position_ = 0;
};

class ModuloFactory : public sampling::TokenConstraintFactory {
 public:
  ModuloFactory(int32_t limit, int32_t length) : limit_(limit), length_(length) {}
  std::unique_ptr<sampling::TokenConstraint> make() const override {
    return std::make_unique<ModuloConstraint>(limit_, length_);
  }

 private:
  int32_t limit_;
  int32_t length_;
};

class EngineConstraintTest : public EngineTest {};

void expect_obeys(const std::vector<TokenOutput>& tokens, int32_t limit) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    EXPECT_LT(tokens[i].id, limit) << "position " << i;
    EXPECT_EQ((tokens[i].id + static_cast<int32_t>(i)) % 3, 0) << "position " << i;
  }
}

TEST_F(EngineConstraintTest, TokensObeyAndSpeculationChangesNothing) {
  std::mt19937 rng(21);
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 4; ++i) {
    GenerationRequest r = greedy(random_prompt(rng, 20 + 7 * i), 24);
    r.ignore_eos = true;
    r.constraint = std::make_shared<ModuloFactory>(200, -1);
    requests.push_back(r);
  }
  auto run = [&](EngineConfig c) {
    Engine e(*file_, *tok_, c);
    std::vector<Collected> out(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) e.add_request(requests[i], collect(out[i]));
    run_to_end(e);
    e.kv_cache().check_invariants();
    return out;
  };
  const std::vector<Collected> plain = run(config(256));
  for (const Collected& c : plain) {
    ASSERT_EQ(c.tokens.at(0).size(), 24u);
    expect_obeys(c.tokens.at(0), 200);
  }
  // Preemption (8 blocks for 4 sequences of ~3-5 blocks) and chunked prefill (a 16-token
  // budget): the constraint's state lives with the sample, so recomputing changes nothing.
  {
    EngineConfig tight = config(8, 16);
    Engine e(*file_, *tok_, tight);
    std::vector<Collected> out(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) e.add_request(requests[i], collect(out[i]));
    run_to_end(e);
    EXPECT_GT(e.stats().n_preemptions, 0);
    for (size_t i = 0; i < plain.size(); ++i) {
      EXPECT_EQ(ids_of(out[i].tokens.at(0)), ids_of(plain[i].tokens.at(0))) << "request " << i;
    }
  }
  for (int variant = 0; variant < 3; ++variant) {
    EngineConfig c = config(256);
    c.speculative.num_speculative_tokens = 4;
    c.speculative.fixed_length = true;
    if (variant == 0) {
      c.speculative.method = spec::Method::kNgram;
      c.speculative.prompt_lookup_min = 1;
    } else {
      c.speculative.method = spec::Method::kDraft;
      c.draft_file = file_;
      c.speculative.draft_tree_width = variant == 2 ? 3 : 1;
    }
    const std::vector<Collected> spec = run(c);
    for (size_t i = 0; i < plain.size(); ++i) {
      EXPECT_EQ(ids_of(spec[i].tokens.at(0)), ids_of(plain[i].tokens.at(0)))
          << "variant " << variant << " request " << i;
    }
  }
}

TEST_F(EngineConstraintTest, SampledSamplesEachObeyTheirOwn) {
  std::mt19937 rng(22);
  GenerationRequest r = greedy(random_prompt(rng, 16), 12);
  r.ignore_eos = true;
  r.n = 3;
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 3;
  r.constraint = std::make_shared<ModuloFactory>(120, -1);
  Engine e(*file_, *tok_, config(64));
  Collected out;
  e.add_request(r, collect(out));
  run_to_end(e);
  for (int32_t i = 0; i < 3; ++i) {
    ASSERT_EQ(out.tokens.at(i).size(), 12u) << "sample " << i;
    expect_obeys(out.tokens.at(i), 120);
  }
}

TEST_F(EngineConstraintTest, ADeadEndStopsItsRequestSayingWhy) {
  std::mt19937 rng(23);
  GenerationRequest ends = greedy(random_prompt(rng, 16), 20);
  ends.ignore_eos = true;
  ends.constraint = std::make_shared<ModuloFactory>(200, 5);
  GenerationRequest free_text = greedy(random_prompt(rng, 16), 20);
  free_text.ignore_eos = true;
  Engine e(*file_, *tok_, config(64));
  Collected a, b;
  e.add_request(ends, collect(a));
  e.add_request(free_text, collect(b));
  run_to_end(e);
  EXPECT_EQ(a.tokens.at(0).size(), 5u);
  EXPECT_EQ(a.finish.at(0), FinishReason::kStop);
  EXPECT_NE(a.stop_reason.at(0).find("structured output"), std::string::npos)
      << a.stop_reason.at(0);
  EXPECT_TRUE(a.request_finished);
  EXPECT_EQ(b.tokens.at(0).size(), 20u);
  EXPECT_EQ(b.finish.at(0), FinishReason::kLength);
  EXPECT_EQ(e.kv_cache().n_free_blocks(), 64);
}

}  // namespace
}  // namespace llms::engine
