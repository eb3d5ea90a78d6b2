// Engine tests on a tiny random-weight model the project writes itself: request lifecycle, stop
// rules, n > 1 sharing, aborts in every state, refusals, and batch invariance (a greedy request
// gives the same tokens alone or among others, with chunked prefill, prefix hits and
// preemption). Invariants of the KV pool are checked after every step.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "engine_fixture.h"
#include "gguf/gguf_file.h"
#include "model/tiny_model.h"
#include "temp_dir.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace llms::engine {
namespace {

using namespace testing_support;

TEST_F(EngineTest, GreedyRequestRunsToMaxTokensWithMetrics) {
  Engine e(*file_, *tok_, config(64));
  Collected c;
  std::mt19937 rng(1);
  e.add_request(greedy(random_prompt(rng, 40), 10), collect(c));
  run_to_end(e);
  ASSERT_TRUE(c.request_finished);
  EXPECT_EQ(c.tokens[0].size(), 10u);
  EXPECT_EQ(c.finish[0], FinishReason::kLength);
  EXPECT_EQ(c.n_events_after_finish, 0);
  EXPECT_EQ(c.metrics.n_prompt_tokens, 40);
  EXPECT_EQ(c.metrics.n_generated_tokens, 10);
  EXPECT_GT(c.metrics.time_to_first_token, 0.0);
  EXPECT_GE(c.metrics.e2e_time, c.metrics.time_to_first_token);
  // Greedy: the chosen token is the most likely one.
  for (const auto& t : c.tokens[0]) {
    ASSERT_EQ(t.top_logprobs.size(), 2u);
    EXPECT_EQ(t.top_logprobs[0].token, t.id);
    EXPECT_GE(t.top_logprobs[0].logprob, t.top_logprobs[1].logprob);
  }
  EXPECT_EQ(e.kv_cache().n_free_blocks(), 64);
  e.kv_cache().check_invariants();
}

TEST_F(EngineTest, SameSeedSameTokensAndSamplesDiffer) {
  auto run = [&](uint64_t seed) {
    Engine e(*file_, *tok_, config(64));
    Collected c;
    GenerationRequest r;
    std::mt19937 rng(2);
    r.prompt = random_prompt(rng, 20);
    r.max_tokens = 12;
    r.n = 3;
    r.ignore_eos = true;
    r.sampling.temperature = 1.5f;
    r.sampling.seed = seed;
    e.add_request(std::move(r), collect(c));
    run_to_end(e);
    std::vector<std::vector<int32_t>> out;
    for (int i = 0; i < 3; ++i) out.push_back(ids_of(c.tokens[i]));
    return out;
  };
  auto a = run(7);
  auto b = run(7);
  auto d = run(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, d);
  EXPECT_NE(a[0], a[1]);  // each sample has its own generator
  for (const auto& s : a) EXPECT_EQ(s.size(), 12u);
}

TEST_F(EngineTest, SamplesOfOnePromptShareItsBlocks) {
  // 5 samples of a 1,024-token prompt, 32 tokens each: 5 separate copies would take
  // 5 x ceil(1056 / 16) = 330 blocks.
  Engine e(*file_, *tok_, config(400, 512));
  Collected c;
  GenerationRequest r;
  std::mt19937 rng(3);
  r.prompt = random_prompt(rng, 1024 - 32);
  r.max_tokens = 32;
  r.n = 5;
  r.ignore_eos = true;
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 1;
  e.add_request(std::move(r), collect(c));
  int32_t peak = 0;
  while (e.has_unfinished()) {
    ASSERT_TRUE(e.step());
    peak = std::max(peak, 400 - e.kv_cache().n_free_blocks());
  }
  const int32_t separate = 5 * e.kv_cache().blocks_for(1024);
  EXPECT_LE(peak, separate * 3 / 10) << "peak " << peak << " blocks vs " << separate;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(c.tokens[i].size(), 32u) << i;
  EXPECT_EQ(e.kv_cache().n_free_blocks(), 400);
}

TEST_F(EngineTest, StopTokenIdsAndStopStrings) {
  std::mt19937 rng(4);
  auto prompt = random_prompt(rng, 30);
  std::vector<int32_t> reference;
  std::string reference_text;
  {
    Engine e(*file_, *tok_, config(64));
    Collected c;
    e.add_request(greedy(prompt, 24), collect(c));
    run_to_end(e);
    reference = ids_of(c.tokens[0]);
    reference_text = c.text[0];
  }
  ASSERT_EQ(reference.size(), 24u);
  {
    // Stop at the first occurrence of the 6th token's id.
    const int32_t stop_id = reference[5];
    size_t first = std::find(reference.begin(), reference.end(), stop_id) - reference.begin();
    Engine e(*file_, *tok_, config(64));
    Collected c;
    auto r = greedy(prompt, 24);
    r.stop_token_ids = {stop_id};
    e.add_request(std::move(r), collect(c));
    run_to_end(e);
    EXPECT_EQ(c.finish[0], FinishReason::kStop);
    EXPECT_EQ(c.tokens[0].size(), first + 1);
    EXPECT_FALSE(c.stop_reason[0].empty());
  }
  // A stop string from the middle of the reference text: output is the text before it.
  const std::string text = reference_text;
  ASSERT_GE(text.size(), 12u) << "the reference output is too short to pick a stop string from";
  {
    size_t at = text.size() / 2;
    // Start at a UTF-8 character boundary.
    while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
    size_t len = 3;
    while (at + len < text.size() && (static_cast<unsigned char>(text[at + len]) & 0xC0) == 0x80)
      ++len;
    ASSERT_LE(at + len, text.size());
    {
      std::string stop = text.substr(at, len);
      Engine e(*file_, *tok_, config(64));
      Collected c;
      auto r = greedy(prompt, 24);
      r.stop = {stop};
      e.add_request(std::move(r), collect(c));
      run_to_end(e);
      EXPECT_EQ(c.finish[0], FinishReason::kStop);
      EXPECT_EQ(c.stop_reason[0], stop);
      EXPECT_EQ(c.text[0], text.substr(0, text.find(stop)));
    }
  }
}

TEST_F(EngineTest, AbortInEveryStateFreesBlocks) {
  // One sequence at a time and a small budget: request A prefills in chunks while B waits.
  Engine e(*file_, *tok_, config(64, 16, 1));
  std::mt19937 rng(5);
  Collected a, b, d;
  int64_t id_a = e.add_request(greedy(random_prompt(rng, 100), 50), collect(a));
  int64_t id_b = e.add_request(greedy(random_prompt(rng, 20), 5), collect(b));
  ASSERT_TRUE(e.step());  // A: first chunk
  EXPECT_EQ(e.stats().n_running, 1);
  EXPECT_EQ(e.stats().n_waiting, 1);
  e.abort(id_b);  // waiting
  EXPECT_TRUE(b.request_finished);
  EXPECT_EQ(b.finish[0], FinishReason::kAbort);
  e.abort(id_a);  // running, mid-prefill
  EXPECT_EQ(a.finish[0], FinishReason::kAbort);
  EXPECT_EQ(e.kv_cache().n_free_blocks(), 64);
  EXPECT_FALSE(e.has_unfinished());
  // Decoding.
  int64_t id_d = e.add_request(greedy(random_prompt(rng, 10), 50), collect(d));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(e.step());
  EXPECT_GT(d.tokens[0].size(), 0u);
  e.abort(id_d);
  EXPECT_EQ(d.finish[0], FinishReason::kAbort);
  EXPECT_EQ(e.kv_cache().n_free_blocks(), 64);
  e.kv_cache().check_invariants();
  e.abort(id_d);  // twice: ignored
  e.abort(12345);
  EXPECT_FALSE(e.step());
}

TEST_F(EngineTest, RefusesBadRequestsNamingTheField) {
  Engine e(*file_, *tok_, config(8));  // 128 tokens of KV
  auto expect_error = [&](GenerationRequest r, const std::string& needle) {
    try {
      e.add_request(std::move(r), nullptr);
      ADD_FAILURE() << "accepted; expected an error mentioning " << needle;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(needle), std::string::npos) << err.what();
    }
  };
  expect_error(greedy({}, 4), "prompt");
  expect_error(greedy({1, 2, 1 << 20}, 4), "outside the vocabulary");
  expect_error(greedy({1, 2, -1}, 4), "outside the vocabulary");
  expect_error(greedy({1, 2}, 0), "max_tokens");
  expect_error(greedy(std::vector<int32_t>(2000, 1), 100), "context_length_exceeded");
  expect_error(greedy(std::vector<int32_t>(100, 1), 100), "KV");  // the pool holds 128 tokens
  auto r = greedy({1, 2}, 4);
  r.sampling.temperature = -1.0f;
  expect_error(r, "temperature");
  EXPECT_FALSE(e.has_unfinished());
  EXPECT_EQ(e.kv_cache().n_free_blocks(), 8);
}

// Engine flags out of range are refused at start naming the flag, before anything is sized from
// them (a huge max_num_seqs once ended in std::bad_alloc; a max_model_len beyond the model's
// context was silently cut to it).
TEST_F(EngineTest, RefusesBadConfigNamingTheFlag) {
  auto expect_error = [&](EngineConfig c, const std::string& needle) {
    try {
      Engine e(*file_, *tok_, c);
      ADD_FAILURE() << "accepted; expected an error mentioning " << needle;
    } catch (const Error& err) {
      EXPECT_EQ(err.kind(), Error::Kind::kInvalidArgument) << err.what();
      EXPECT_NE(std::string(err.what()).find(needle), std::string::npos) << err.what();
    }
  };
  EngineConfig c = config(8);
  c.scheduler.max_model_len = 2049;  // the tiny model's context is 2048
  expect_error(c, "max_model_len 2049 exceeds the model's context length 2048");
  c = config(8);
  c.scheduler.max_model_len = -1;
  expect_error(c, "max_model_len");
  c = config(8, 512, kMaxNumSeqs + 1);
  expect_error(c, "max_num_seqs");
  c = config(8, kMaxNumBatchedTokens + 1);
  expect_error(c, "max_num_batched_tokens");
  c = config(8);
  c.n_kv_blocks = 0;
  c.kv_cache_memory = int64_t{1} << 46;  // 64 TiB: more than any test machine has free
  expect_error(c, "exceeds the");
  c = config(8);
  c.scheduler.max_model_len = 2048;  // exactly the model's: accepted
  Engine e(*file_, *tok_, c);
  EXPECT_EQ(e.max_model_len(), 2048);
  EXPECT_EQ(Engine(*file_, *tok_, config(8)).max_model_len(), 2048);  // 0: the model's
}

// Greedy tokens are the same alone and among others, with chunked prefill, prefix-cache hits
// and preemption all happening. A divergence is accepted only at a near-tie in the lone run.
TEST_F(EngineTest, BatchInvarianceUnderChunkingPrefixHitsAndPreemption) {
  std::mt19937 rng(6);
  std::vector<std::vector<int32_t>> prefixes = {random_prompt(rng, 48), random_prompt(rng, 80)};
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 24; ++i) {
    auto prompt = prefixes[i % 2];
    auto tail = random_prompt(rng, 5 + (i * 7) % 40);
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    requests.push_back(greedy(prompt, 16 + i % 9));
  }
  std::vector<std::vector<TokenOutput>> alone;
  {
    EngineConfig c = config(64);
    c.enable_prefix_caching = false;
    Engine e(*file_, *tok_, c);
    for (const auto& r : requests) {
      Collected out;
      e.add_request(r, collect(out));
      run_to_end(e);
      alone.push_back(out.tokens[0]);
    }
  }
  // Together: 40 blocks for 24 sequences of up to ~150 tokens forces preemption; a 64-token
  // budget forces chunking.
  Engine e(*file_, *tok_, config(40, 64, 64));
  std::vector<Collected> together(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) e.add_request(requests[i], collect(together[i]));
  run_to_end(e);
  const EngineStats s = e.stats();
  EXPECT_GT(s.n_preemptions, 0);
  EXPECT_GT(s.prefix_hits, 0);
  int near_ties = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    near_ties += diverged_at_tie(together[i].tokens[0], alone[i], i);
  }
  EXPECT_LE(near_ties, 2);
  EXPECT_EQ(e.kv_cache().n_free_blocks(), 40);
  e.kv_cache().check_invariants();
}

// --device cuda on a machine or build without a GPU: refused at start with the reason, before
// any request (on a machine with one, the CUDA conformance tests cover the runner).
TEST_F(EngineTest, CudaDeviceWithoutAGpuIsRefusedWithTheReason) {
  const cuda::Probe probe = cuda::probe();
  if (!probe.devices.empty()) GTEST_SKIP() << "this machine has a GPU: " << probe.devices[0].name;
  EngineConfig c = config(32);
  c.device = Device::kCuda;
  try {
    Engine e(*file_, *tok_, c);
    FAIL() << "an engine started on --device cuda without a GPU";
  } catch (const Error& err) {
    EXPECT_EQ(err.kind(), Error::Kind::kUnavailable);
    EXPECT_NE(std::string(err.what()).find("--device cuda: " + probe.why_none), std::string::npos)
        << err.what();
  }
}

}  // namespace
}  // namespace llms::engine
