// Attention sinks plus a recent window (StreamingLLM) in the engine, on tiny random-weight
// models the project writes itself: a stream goes on past the model's context length in a pool
// far smaller than the stream, and what it computes is StreamingLLM's attention: with one layer
// (keys and values depend on their token alone) the logits at position p equal those of a
// fresh run over the sinks followed by the last `window` tokens, positions taken in the cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine_fixture.h"
#include "gguf/gguf_file.h"
#include "model/tiny_model.h"
#include "temp_dir.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace llms::engine {
namespace {

using namespace testing_support;

constexpr int32_t kWindow = 24;
constexpr int32_t kSinks = 4;
constexpr uint32_t kContext = 128;

class StreamingEngineTest : public EngineTest {
 protected:
  static void SetUpTestSuite() {
    model::TinyModelSpec spec = base_spec();
    spec.n_layers = 1;
    spec.n_ctx = kContext;
    load_model(spec, "tiny-1-layer.gguf");
  }

  static EngineConfig streaming(int32_t n_blocks, int32_t budget = 32) {
    EngineConfig c = config(n_blocks, budget);
    c.streaming_window = kWindow;
    c.attention_sinks = kSinks;
    c.scheduler.max_model_len = 4 * kContext;
    return c;
  }
};

TEST_F(StreamingEngineTest, StreamGoesPastTheContextInASmallPoolAndMatchesStreamingLlm) {
  std::mt19937 rng(5);
  const GenerationRequest r = greedy(random_prompt(rng, 40), 4 * kContext - 40);
  // One sink block, a window's worth and one 32-token step: 6 blocks of 16 hold the stream of
  // 512 tokens (4x the model's context).
  Engine e(*file_, *tok_, streaming(6));
  Collected got;
  std::string error;
  e.add_request(r, [&](const RequestOutput& o) {
    if (!o.error.empty()) error = o.error;
    collect(got)(o);
  });
  run_to_end(e);
  ASSERT_EQ(got.tokens[0].size(), static_cast<size_t>(4 * kContext - 40)) << error;
  EXPECT_EQ(got.finish[0], FinishReason::kLength);
  EXPECT_EQ(e.stats().n_preemptions, 0);
  EXPECT_EQ(e.kv_cache().n_free_blocks(), 6);

  // The reference: the sinks and the last kWindow tokens as a fresh prompt (cache positions),
  // whose next-token distribution must be the stream's at that point.
  std::vector<int32_t> all = r.prompt;
  for (const auto& t : got.tokens[0]) all.push_back(t.id);
  Engine plain(*file_, *tok_, config(16));
  // The same up to rounding (8-bit activations in the matmuls amplify a last-bit difference now
  // and then); scoring the sinks at their stream positions instead moves these by 0.1-1.2.
  std::vector<float> diffs;
  // Position p's logits choose generated token p + 1 - prompt size.
  for (size_t p = r.prompt.size() + 3; p + 1 < all.size(); p += 29) {
    std::vector<int32_t> cache(all.begin(), all.begin() + kSinks);
    cache.insert(cache.end(), all.begin() + static_cast<std::ptrdiff_t>(p + 1 - kWindow),
                 all.begin() + static_cast<std::ptrdiff_t>(p + 1));
    Collected ref;
    GenerationRequest rr = greedy(cache, 1);
    plain.add_request(rr, collect(ref));
    run_to_end(plain);
    ASSERT_EQ(ref.tokens[0].size(), 1u) << "position " << p;
    const TokenOutput& want = ref.tokens[0][0];
    const TokenOutput& have = got.tokens[0][p + 1 - r.prompt.size()];
    ASSERT_EQ(have.top_logprobs.size(), 2u) << "position " << p;
    ASSERT_EQ(want.top_logprobs.size(), 2u) << "position " << p;
    diffs.push_back(std::abs(have.top_logprobs[0].logprob - want.top_logprobs[0].logprob));
    EXPECT_LT(diffs.back(), 0.05f) << "position " << p;
    const float margin = want.top_logprobs[0].logprob - want.top_logprobs[1].logprob;
    if (margin > 1e-2f) {
      EXPECT_EQ(have.id, want.id) << "position " << p;
    }
  }
  ASSERT_GE(diffs.size(), 14u);
  std::sort(diffs.begin(), diffs.end());
  EXPECT_LT(diffs[diffs.size() / 2], 3e-3f);
}

// Sinks matter: without them (a plain sliding window) the stream computes something else.
TEST_F(StreamingEngineTest, WithoutSinksTheStreamDiffers) {
  std::mt19937 rng(6);
  const GenerationRequest r = greedy(random_prompt(rng, 8), 200);
  Collected with_sinks;
  {
    Engine e(*file_, *tok_, streaming(8));
    e.add_request(r, collect(with_sinks));
    run_to_end(e);
  }
  EngineConfig c = streaming(8);
  c.attention_sinks = 0;
  Collected without;
  Engine e(*file_, *tok_, c);
  e.add_request(r, collect(without));
  run_to_end(e);
  ASSERT_EQ(with_sinks.tokens[0].size(), without.tokens[0].size());
  // Identical while the window still reaches the first token (token t is chosen at position
  // 7 + t, which sees position 0 while 7 + t < kWindow), different later.
  for (size_t t = 0; 7 + t < static_cast<size_t>(kWindow); ++t) {
    EXPECT_EQ(with_sinks.tokens[0][t].id, without.tokens[0][t].id) << "token " << t;
  }
  int differ = 0;
  for (size_t t = 0; t < with_sinks.tokens[0].size(); ++t) {
    const float a = with_sinks.tokens[0][t].top_logprobs[0].logprob;
    const float b = without.tokens[0][t].top_logprobs[0].logprob;
    if (std::abs(a - b) > 1e-3f) ++differ;
  }
  EXPECT_GT(differ, 50);
}

TEST_F(StreamingEngineTest, RefusesWindowsAndSinksOutOfRangeNamingTheFlag) {
  EngineConfig c = streaming(8);
  c.streaming_window = kContext;  // + 4 sinks > the model's 128
  expect_refused(c, "streaming_window");
  c = streaming(8);
  c.streaming_window = -1;
  expect_refused(c, "streaming_window");
  c = streaming(8);
  c.streaming_window = 0;  // sinks without a window
  expect_refused(c, "attention_sinks");
  c = streaming(8);
  c.attention_sinks = -2;
  expect_refused(c, "attention_sinks");
  c = config(8);
  c.scheduler.max_model_len = 4 * kContext;  // past the context without streaming
  expect_refused(c, "max_model_len");
  c = streaming(8);
  c.speculative.method = spec::Method::kDraft;
  c.speculative.num_speculative_tokens = 2;
  c.draft_file = file_;
  expect_refused(c, "streaming_window");
}

}  // namespace
}  // namespace llms::engine
