// Speculative decoding through the engine, on tiny models the project writes: greedy output is
// the same with and without speculation (prompt n-grams, a draft model equal to the target, a
// draft model that disagrees) under chunked prefill, prefix caching, preemption, n > 1, stop
// strings inside an accepted run, exact max_tokens, logprobs, aborts and priorities; sampled
// output follows the target's distribution (chi-square over 20,000 draws); refusals name the
// flag; and a fault inside a step ends only the request it concerns. KV invariants are checked
// after every step (config()).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine_fixture.h"
#include "kv/step_batch.h"
#include "model/cpu_runner.h"
#include "sampling/sampler.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace llms::engine {
namespace {

using namespace testing_support;

class EngineSpecTest : public EngineTest {
 protected:
  static void SetUpTestSuite() {
    EngineTest::SetUpTestSuite();
    // A draft with the same tokenizer but other weights: it proposes mostly wrong tokens.
    model::TinyModelSpec spec;
    spec.architecture = "qwen2";
    spec.n_layers = 1;
    spec.n_embd = 32;
    spec.n_ff = 64;
    spec.n_heads = 2;
    spec.n_kv_heads = 1;
    spec.n_ctx = 2048;
    spec.seed = 7;
    spec.weight_stddev = 0.3f;
    other_path_ = new std::filesystem::path(dir_->path() / "other_draft.gguf");
    model::write_tiny_model(spec, *other_path_);
    other_draft_ = new gguf::GgufFile(gguf::GgufFile::open(*other_path_));
  }
  static void TearDownTestSuite() {
    delete other_draft_;
    delete other_path_;
    EngineTest::TearDownTestSuite();
  }

  // A prompt that repeats itself, so prompt lookup finds n-grams.
  static std::vector<int32_t> repetitive_prompt(std::mt19937& rng, size_t n) {
    std::vector<int32_t> unit = random_prompt(rng, 7);
    std::vector<int32_t> p;
    while (p.size() < n) {
      p.insert(p.end(), unit.begin(), unit.end());
      p.push_back(static_cast<int32_t>(rng() % 256));
    }
    p.resize(n);
    return p;
  }

  // Trees: the draft model proposes token trees (kSelfTree: width 2, kOtherTree: width 3).
  enum class Kind { kNgram, kSelfDraft, kOtherDraft, kSelfTree, kOtherTree };

  static EngineConfig spec_config(Kind kind, int32_t k, int32_t n_blocks, int32_t budget = 512,
                                  int32_t max_seqs = 64) {
    EngineConfig c = config(n_blocks, budget, max_seqs);
    c.speculative.num_speculative_tokens = k;
    c.speculative.fixed_length = true;  // always draft k: exercise verification every step
    c.speculative.prompt_lookup_min = 1;
    c.speculative.prompt_lookup_max = 3;
    if (kind == Kind::kNgram) {
      c.speculative.method = spec::Method::kNgram;
    } else {
      c.speculative.method = spec::Method::kDraft;
      const bool self = kind == Kind::kSelfDraft || kind == Kind::kSelfTree;
      c.draft_file = self ? file_ : other_draft_;
      if (kind == Kind::kSelfTree) c.speculative.draft_tree_width = 2;
      if (kind == Kind::kOtherTree) c.speculative.draft_tree_width = 3;
    }
    return c;
  }

  // Runs every request to the end in one engine; returns the collected outputs.
  static std::vector<Collected> run_all(const EngineConfig& c,
                                        const std::vector<GenerationRequest>& requests,
                                        EngineStats* stats = nullptr) {
    Engine e(*file_, *tok_, c);
    std::vector<Collected> out(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) e.add_request(requests[i], collect(out[i]));
    run_to_end(e);
    if (stats != nullptr) *stats = e.stats();
    EXPECT_EQ(e.kv_cache().n_free_blocks(), e.kv_pool().n_blocks);
    e.kv_cache().check_invariants();
    return out;
  }

  static void expect_same_tokens(const std::vector<Collected>& plain,
                                 const std::vector<Collected>& spec, const char* what) {
    ASSERT_EQ(plain.size(), spec.size());
    for (size_t i = 0; i < plain.size(); ++i) {
      for (const auto& [index, tokens] : plain[i].tokens) {
        const auto it = spec[i].tokens.find(index);
        ASSERT_NE(it, spec[i].tokens.end()) << what << ": request " << i << " sample " << index;
        EXPECT_EQ(ids_of(it->second), ids_of(tokens))
            << what << ": request " << i << " sample " << index;
        ASSERT_EQ(it->second.size(), tokens.size());
        for (size_t t = 0; t < tokens.size(); ++t) {
          // The target's logprobs, from rows computed in a multi-token query instead of alone.
          EXPECT_NEAR(it->second[t].logprob, tokens[t].logprob, 2e-3f)
              << what << ": request " << i << " token " << t;
        }
        EXPECT_EQ(spec[i].finish.at(index), plain[i].finish.at(index));
        EXPECT_EQ(spec[i].text.at(index), plain[i].text.at(index));
      }
    }
  }

  static std::vector<GenerationRequest> mixed_requests(std::mt19937& rng, int n_requests) {
    std::vector<GenerationRequest> rs;
    for (int i = 0; i < n_requests; ++i) {
      auto prompt = i % 2 == 0 ? random_prompt(rng, 20 + 9 * i) : std::vector<int32_t>{};
      if (prompt.empty()) {
        std::vector<int32_t> unit = random_prompt(rng, 6);
        for (int r = 0; r < 8; ++r) prompt.insert(prompt.end(), unit.begin(), unit.end());
      }
      rs.push_back(greedy(prompt, 12 + (i * 5) % 17));
    }
    return rs;
  }

  static inline std::filesystem::path* other_path_ = nullptr;
  static inline gguf::GgufFile* other_draft_ = nullptr;
};

TEST_F(EngineSpecTest, GreedyOutputIsTheSameWithEveryProposer) {
  std::mt19937 rng(11);
  const std::vector<GenerationRequest> requests = mixed_requests(rng, 8);
  const std::vector<Collected> plain = run_all(config(256), requests);
  for (Kind kind :
       {Kind::kNgram, Kind::kSelfDraft, Kind::kOtherDraft, Kind::kSelfTree, Kind::kOtherTree}) {
    for (int32_t k : {1, 3, 8}) {
      EngineStats s;
      const std::vector<Collected> spec = run_all(spec_config(kind, k, 256), requests, &s);
      const std::string what =
          "proposer " + std::to_string(static_cast<int>(kind)) + " k " + std::to_string(k);
      expect_same_tokens(plain, spec, what.c_str());
      EXPECT_GT(s.spec_num_drafts, 0) << what;
      EXPECT_GT(s.spec_num_draft_tokens, 0) << what;
      EXPECT_LE(s.spec_num_accepted_tokens, s.spec_num_draft_tokens) << what;
      int64_t by_position = 0;
      ASSERT_EQ(s.spec_accepted_per_pos.size(), static_cast<size_t>(k));
      for (size_t j = 0; j < s.spec_accepted_per_pos.size(); ++j) {
        by_position += s.spec_accepted_per_pos[j];
        if (j > 0) {
          EXPECT_LE(s.spec_accepted_per_pos[j], s.spec_accepted_per_pos[j - 1]);
        }
      }
      EXPECT_EQ(by_position, s.spec_num_accepted_tokens) << what;
      if (kind == Kind::kSelfDraft) {
        // The target drafting for itself: every draft is the target's argmax.
        EXPECT_EQ(s.spec_num_accepted_tokens, s.spec_num_draft_tokens) << what;
        EXPECT_LT(s.n_steps, plain.size() * 30u) << what;
      }
      if (kind == Kind::kSelfTree) {
        // The target's own argmax is the first child of every node of the draft's tree (the
        // draft is the target): each verification keeps at least that child of the root.
        EXPECT_GE(s.spec_num_accepted_tokens, s.spec_num_drafts) << what;
      }
    }
  }
}

TEST_F(EngineSpecTest, ComposesWithChunkingPrefixCachingPreemptionAndPriorities) {
  std::mt19937 rng(12);
  std::vector<std::vector<int32_t>> prefixes = {repetitive_prompt(rng, 48),
                                                repetitive_prompt(rng, 80)};
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 16; ++i) {
    auto prompt = prefixes[i % 2];
    auto tail = random_prompt(rng, 5 + (i * 7) % 30);
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    GenerationRequest r = greedy(prompt, 16 + i % 9);
    r.priority = i % 3;
    requests.push_back(r);
  }
  EngineConfig plain_config = config(256);
  plain_config.enable_prefix_caching = false;
  std::vector<Collected> plain;
  for (const auto& r : requests) plain.push_back(run_all(plain_config, {r})[0]);
  for (Kind kind : {Kind::kNgram, Kind::kSelfDraft, Kind::kOtherDraft, Kind::kOtherTree}) {
    // 20 blocks for 16 sequences of up to ~140 tokens: preemption; a 48-token budget: chunks.
    EngineConfig c = spec_config(kind, 4, 20, 48, 64);
    c.scheduler.policy = sched::Policy::kPriority;
    EngineStats s;
    const std::vector<Collected> spec = run_all(c, requests, &s);
    expect_same_tokens(plain, spec, "composed");
    EXPECT_GT(s.n_preemptions, 0);
    EXPECT_GT(s.prefix_hits, 0);
    EXPECT_GT(s.spec_num_draft_tokens, 0);
  }
}

TEST_F(EngineSpecTest, SamplesStopStringsAndMaxTokensInsideAcceptedRuns) {
  std::mt19937 rng(13);
  const std::vector<int32_t> prompt = repetitive_prompt(rng, 60);
  // The plain continuation, to pick a stop string from its middle.
  GenerationRequest base = greedy(prompt, 24);
  const Collected plain = run_all(config(64), {base})[0];
  const std::string text = plain.text.at(0);
  ASSERT_GE(text.size(), 8u);
  for (Kind kind : {Kind::kNgram, Kind::kSelfDraft, Kind::kSelfTree}) {
    // max_tokens exact: every length from 1 to 9 with drafts of 8.
    for (int32_t max_tokens = 1; max_tokens <= 9; ++max_tokens) {
      GenerationRequest r = greedy(prompt, max_tokens);
      const Collected got = run_all(spec_config(kind, 8, 64), {r})[0];
      ASSERT_EQ(got.tokens.at(0).size(), static_cast<size_t>(max_tokens));
      const std::vector<int32_t> all = ids_of(plain.tokens.at(0));
      EXPECT_EQ(ids_of(got.tokens.at(0)),
                std::vector<int32_t>(all.begin(), all.begin() + max_tokens));
      EXPECT_EQ(got.finish.at(0), FinishReason::kLength);
    }
    // A stop string inside what the drafts cover: the same cut as without speculation.
    GenerationRequest stop = greedy(prompt, 24);
    // Three ASCII bytes from the middle on (random byte tokens also give partial UTF-8).
    size_t at = text.size() / 3;
    auto ascii = [&](size_t i) { return text[i] >= 0x20 && text[i] < 0x7f; };
    while (at + 3 < text.size() && !(ascii(at) && ascii(at + 1) && ascii(at + 2))) ++at;
    ASSERT_LT(at + 3, text.size()) << "no ASCII run to stop at";
    stop.stop = {text.substr(at, 3)};
    const Collected plain_stop = run_all(config(64), {stop})[0];
    const Collected spec_stop = run_all(spec_config(kind, 8, 64), {stop})[0];
    EXPECT_EQ(spec_stop.text.at(0), plain_stop.text.at(0));
    EXPECT_EQ(spec_stop.finish.at(0), FinishReason::kStop);
    EXPECT_EQ(spec_stop.stop_reason.at(0), stop.stop[0]);
    EXPECT_EQ(ids_of(spec_stop.tokens.at(0)), ids_of(plain_stop.tokens.at(0)));
    // n = 3 greedy samples: each the plain continuation.
    GenerationRequest n3 = greedy(prompt, 20);
    n3.n = 3;
    const Collected plain_n = run_all(config(64), {n3})[0];
    const Collected spec_n = run_all(spec_config(kind, 4, 64), {n3})[0];
    for (int32_t i = 0; i < 3; ++i) {
      EXPECT_EQ(ids_of(spec_n.tokens.at(i)), ids_of(plain_n.tokens.at(i))) << "sample " << i;
    }
  }
}

TEST_F(EngineSpecTest, SameSeedSameSampledTextAndAbortMidStep) {
  std::mt19937 rng(14);
  GenerationRequest r = greedy(repetitive_prompt(rng, 50), 30);
  r.sampling.temperature = 0.8f;
  r.sampling.top_p = 0.9f;
  r.sampling.seed = 5;
  // With speculation a seeded run repeats itself (the verifier's draws come from the sampler's
  // own generator).
  const Collected a = run_all(spec_config(Kind::kSelfDraft, 4, 64), {r})[0];
  const Collected b = run_all(spec_config(Kind::kSelfDraft, 4, 64), {r})[0];
  EXPECT_EQ(ids_of(a.tokens.at(0)), ids_of(b.tokens.at(0)));

  // Abort while drafts are pending: the blocks come back, the others go on.
  Engine e(*file_, *tok_, spec_config(Kind::kNgram, 6, 64));
  Collected first, second;
  const int64_t id = e.add_request(greedy(repetitive_prompt(rng, 40), 40), collect(first));
  e.add_request(greedy(repetitive_prompt(rng, 40), 12), collect(second));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(e.step());
  e.abort(id);
  e.kv_cache().check_invariants();
  run_to_end(e);
  EXPECT_EQ(first.finish.at(0), FinishReason::kAbort);
  EXPECT_EQ(second.finish.at(0), FinishReason::kLength);
  EXPECT_EQ(second.tokens.at(0).size(), 12u);
  EXPECT_EQ(e.kv_cache().n_free_blocks(), 64);
}

// The output distribution with speculation is the target's: the joint distribution of the first
// two tokens (the second always verified against a draft) over 20,000 draws, against
// p(t1) p(t2 | t1) computed from the model directly. Temperature 1, and with top-p. The top-p
// value is one whose cut has a margin in every row involved: the engine's batched rows differ
// from the lone rows computed here in the last bits, which must not move a token across the cut.
TEST_F(EngineSpecTest, SampledOutputFollowsTheTargetDistribution) {
  const std::vector<int32_t> prompt = {72, 101, 108, 108, 111, 32, 119};
  auto pool = std::make_shared<ThreadPool>(1);
  model::CpuRunner runner(*file_, pool);
  runner.allocate_kv(16, 4, kv::KvCacheType::kF16,
                     runner.config().single_kv_layout());  // as the engine's default
  const std::vector<kv::BlockId> table = {0, 1, 2, 3};
  auto row_after = [&](const std::vector<int32_t>& tokens) {
    kv::StepBatch b;
    b.add_sequence(1, tokens, 0, table, 1);
    const model::LogitsView v = runner.execute(b);
    return std::vector<float>(v.row(0).begin(), v.row(0).end());
  };
  // The smallest distance between top_p and a partial sum of a row's sorted probabilities.
  auto cut_margin = [](std::vector<float> row, float top_p) {
    const float top = *std::max_element(row.begin(), row.end());
    double total = 0.0;
    for (float& l : row) total += (l = std::exp(l - top));
    std::sort(row.begin(), row.end(), std::greater<>());
    double mass = 0.0;
    double margin = 1.0;
    for (float p : row) {
      mass += p / total;
      margin = std::min(margin, std::abs(mass - top_p));
    }
    return margin;
  };
  // Rows differ from the engine's by ~1e-6 relative; a margin of 1e-4 in mass is ample.
  constexpr double kMargin = 1e-4;
  float cut = 0.0f;
  for (const float candidate : {0.8f, 0.75f, 0.85f, 0.7f, 0.9f, 0.65f, 0.6f}) {
    sampling::SamplingParams first;
    first.top_p = candidate;
    sampling::Sampler first_sampler(first, runner.n_vocab());
    std::vector<float> row = row_after(prompt);
    double margin = cut_margin(row, candidate);
    sampling::Distribution support;
    first_sampler.distribution(row, support);
    for (size_t i = 0; i < support.ids.size() && margin > kMargin; ++i) {
      std::vector<int32_t> next = prompt;
      next.push_back(support.ids[i]);
      margin = std::min(margin, cut_margin(row_after(next), candidate));
    }
    if (margin > kMargin) {
      cut = candidate;
      break;
    }
  }
  ASSERT_GT(cut, 0.0f) << "no top_p with a margin in every row";
  for (const float top_p : {1.0f, cut}) {
    sampling::SamplingParams params;
    params.temperature = 1.0f;
    params.top_p = top_p;
    // Expected joint probabilities from the target itself.
    sampling::Sampler dist_sampler(params, runner.n_vocab());
    std::vector<float> row = row_after(prompt);
    sampling::Distribution p1;
    dist_sampler.distribution(row, p1);
    std::map<std::pair<int32_t, int32_t>, double> expected;
    for (size_t i = 0; i < p1.ids.size(); ++i) {
      std::vector<int32_t> next = prompt;
      next.push_back(p1.ids[i]);
      std::vector<float> row2 = row_after(next);
      sampling::Distribution p2;
      dist_sampler.distribution(row2, p2);
      for (size_t j = 0; j < p2.ids.size(); ++j) {
        expected[{p1.ids[i], p2.ids[j]}] = p1.probs[i] * p2.probs[j];
      }
    }

    // 20,000 draws: 200 requests of n = 100 samples, each seeded differently.
    EngineConfig c = spec_config(Kind::kSelfDraft, 3, 2048, 2048, 256);
    Engine e(*file_, *tok_, c);
    std::map<std::pair<int32_t, int32_t>, int64_t> observed;
    int64_t n_draws = 0;
    std::vector<Collected> outs(200);
    for (int r = 0; r < 200; ++r) {
      GenerationRequest req;
      req.prompt = prompt;
      req.max_tokens = 3;  // room for a draft after the first token
      req.n = 100;
      req.ignore_eos = true;
      req.sampling = params;
      req.sampling.seed = 1000u + static_cast<uint64_t>(r) * 100u;
      e.add_request(req, collect(outs[static_cast<size_t>(r)]));
    }
    run_to_end(e);
    for (const Collected& o : outs) {
      for (const auto& [index, tokens] : o.tokens) {
        ASSERT_EQ(tokens.size(), 3u);
        ++observed[{tokens[0].id, tokens[1].id}];
        ++n_draws;
      }
    }
    ASSERT_EQ(n_draws, 20000);
    EXPECT_GT(e.stats().spec_num_draft_tokens, 0);
    // Chi-square over cells with an expected count of at least 5 (the rest pooled into one).
    double chi2 = 0.0;
    int df = -1;
    double pooled_expected = 0.0;
    int64_t pooled_observed = 0;
    int64_t covered = 0;
    for (const auto& [cell, p] : expected) {
      const double exp_count = p * static_cast<double>(n_draws);
      const auto it = observed.find(cell);
      const int64_t obs = it == observed.end() ? 0 : it->second;
      covered += obs;
      if (exp_count < 5.0) {
        pooled_expected += exp_count;
        pooled_observed += obs;
        continue;
      }
      chi2 += (obs - exp_count) * (obs - exp_count) / exp_count;
      ++df;
    }
    // A pair outside the target's support would be a lossless-ness bug.
    EXPECT_EQ(covered, n_draws) << "draws outside the target's processed support";
    if (pooled_expected > 0.0) {
      chi2 += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) /
              pooled_expected;
      ++df;
    }
    ASSERT_GT(df, 3);
    // Critical value at p = 0.001 by the Wilson-Hilferty approximation: the test fails by chance
    // once in a thousand seeds, and the seeds are fixed.
    const double z = 3.0902;
    const double h = 2.0 / (9.0 * df);
    const double critical = df * std::pow(1.0 - h + z * std::sqrt(h), 3.0);
    EXPECT_LT(chi2, critical) << "top_p " << top_p << " df " << df;
  }
}

TEST_F(EngineSpecTest, AFaultInsideAStepEndsOnlyItsRequest) {
  std::mt19937 rng(15);
  const std::vector<int32_t> good_prompt = random_prompt(rng, 30);
  std::vector<int32_t> bad_prompt = random_prompt(rng, 30);
  const int32_t poison = 270;  // a merged token: no random byte prompt holds it
  ASSERT_LT(poison, tok_->n_vocab());
  bad_prompt[10] = poison;
  const Collected alone = run_all(config(64), {greedy(good_prompt, 10)})[0];
  for (bool speculate : {false, true}) {
    EngineConfig c = speculate ? spec_config(Kind::kNgram, 4, 64) : config(64);
    c.fault_token_id = poison;
    Engine e(*file_, *tok_, c);
    Collected good, bad, after;
    e.add_request(greedy(good_prompt, 10), collect(good));
    e.add_request(greedy(bad_prompt, 10), collect(bad));
    run_to_end(e);
    EXPECT_EQ(bad.finish.at(0), FinishReason::kError);
    EXPECT_TRUE(bad.request_finished);
    EXPECT_EQ(good.finish.at(0), FinishReason::kLength);
    EXPECT_EQ(ids_of(good.tokens.at(0)), ids_of(alone.tokens.at(0)));
    EXPECT_EQ(e.stats().n_failed_requests, 1);
    // The engine serves the next request as if nothing happened.
    e.add_request(greedy(good_prompt, 10), collect(after));
    run_to_end(e);
    EXPECT_EQ(ids_of(after.tokens.at(0)), ids_of(alone.tokens.at(0)));
    EXPECT_EQ(e.kv_cache().n_free_blocks(), 64);
  }
}

TEST_F(EngineSpecTest, PerRequestDraftLengthCapsOrTurnsSpeculationOff) {
  std::mt19937 rng(5);
  const std::vector<GenerationRequest> requests = mixed_requests(rng, 4);
  const std::vector<Collected> plain = run_all(config(256), requests);
  for (int32_t cap : {0, 1, 2}) {
    std::vector<GenerationRequest> capped = requests;
    for (GenerationRequest& r : capped) r.num_speculative_tokens = cap;
    EngineStats s;
    const std::vector<Collected> spec = run_all(spec_config(Kind::kSelfDraft, 8, 256), capped, &s);
    expect_same_tokens(plain, spec, "capped");
    if (cap == 0) {
      EXPECT_EQ(s.spec_num_drafts, 0);
    } else {
      EXPECT_GT(s.spec_num_drafts, 0);
      EXPECT_LE(s.spec_num_draft_tokens, s.spec_num_drafts * cap) << "cap " << cap;
      for (size_t j = static_cast<size_t>(cap); j < s.spec_accepted_per_pos.size(); ++j) {
        EXPECT_EQ(s.spec_accepted_per_pos[j], 0) << "cap " << cap << " position " << j;
      }
    }
  }
  Engine e(*file_, *tok_, spec_config(Kind::kNgram, 4, 64));
  for (int32_t bad : {-2, 17}) {
    GenerationRequest r = requests[0];
    r.num_speculative_tokens = bad;
    try {
      e.add_request(r, [](const RequestOutput&) {});
      ADD_FAILURE() << "accepted num_speculative_tokens " << bad;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("num_speculative_tokens"), std::string::npos)
          << err.what();
    }
  }
}

TEST_F(EngineSpecTest, RefusesBadSpeculativeConfigNamingTheFlag) {
  auto expect_refusal = [&](EngineConfig c, const std::string& needle) {
    try {
      Engine e(*file_, *tok_, c);
      ADD_FAILURE() << "accepted; expected a refusal naming " << needle;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(needle), std::string::npos) << err.what();
    }
  };
  EngineConfig c = spec_config(Kind::kNgram, 17, 8);
  expect_refusal(c, "--num-speculative-tokens");
  c = spec_config(Kind::kNgram, 0, 8);
  expect_refusal(c, "--num-speculative-tokens");
  c = spec_config(Kind::kSelfDraft, 4, 8);
  c.draft_file = nullptr;
  expect_refusal(c, "--draft-model");

  // A draft whose tokenizer differs (SentencePiece-style pieces instead of byte-level BPE).
  model::TinyModelSpec spec;
  spec.tokenizer = model::TinyTokenizerKind::kSentencePieceLike;
  spec.architecture = "llama";
  const auto path = dir_->path() / "other_vocab.gguf";
  model::write_tiny_model(spec, path);
  const gguf::GgufFile other = gguf::GgufFile::open(path);
  c = spec_config(Kind::kSelfDraft, 4, 8);
  c.draft_file = &other;
  expect_refusal(c, "--draft-model: its vocabulary differs from the target's at token 0");

  // The draft model runs only beside a CPU target so far: refused before any device is asked.
  c = spec_config(Kind::kSelfDraft, 4, 8);
  c.device = Device::kCuda;
  expect_refusal(c, "--speculative-method draft is not implemented with --device cuda yet");
}

}  // namespace
}  // namespace llms::engine
