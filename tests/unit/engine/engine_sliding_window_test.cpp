// Engine tests of the hybrid KV cache (kv/kv_groups.h) on a tiny Gemma 3-like model of six
// layers (five sliding-window layers of window 16, one global): sliding layers give back the
// blocks that fall out of their window, and none of it changes a token. Greedy outputs are
// compared with the same engine keeping every layer's whole context (hybrid_kv_cache = false),
// request by request (the same batches: bit-identical) and all together with chunked prefill,
// prefix hits, preemption and speculation. The pool's invariants are checked after every step.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine_fixture.h"
#include "gguf/gguf_file.h"
#include "kv/kv_groups.h"
#include "model/kv_storage.h"
#include "model/model_config.h"
#include "model/tiny_model.h"
#include "temp_dir.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace llms::engine {
namespace {

using namespace testing_support;

constexpr uint32_t kWindow = 16;

class SlidingWindowEngineTest : public EngineTest {
 protected:
  static void SetUpTestSuite() {
    model::TinyModelSpec spec = base_spec();
    spec.architecture = "gemma3";
    spec.n_layers = 6;  // layers 0-4 sliding, 5 global
    spec.sliding_window = kWindow;
    load_model(spec, "tiny-gemma3.gguf");
    // A draft of the same shape and tokenizer but other weights: its token trees are accepted
    // off their first branch too, so kept branches move within every cache group.
    spec.seed = 2;
    spec.n_layers = 2;
    draft_path_ = new std::filesystem::path(dir_->path() / "tiny-gemma3-draft.gguf");
    model::write_tiny_model(spec, *draft_path_);
    draft_ = new gguf::GgufFile(gguf::GgufFile::open(*draft_path_));
  }
  static void TearDownTestSuite() {
    delete draft_;
    delete draft_path_;
    EngineTest::TearDownTestSuite();
  }

  static inline std::filesystem::path* draft_path_ = nullptr;
  static inline gguf::GgufFile* draft_ = nullptr;

  static std::vector<GenerationRequest> long_requests() {
    std::mt19937 rng(11);
    const std::vector<int32_t> shared = random_prompt(rng, 70);
    std::vector<GenerationRequest> requests;
    for (int i = 0; i < 10; ++i) {
      auto prompt = i % 2 == 0 ? shared : std::vector<int32_t>{};
      const auto tail = random_prompt(rng, 20 + (i * 13) % 50);
      prompt.insert(prompt.end(), tail.begin(), tail.end());
      requests.push_back(greedy(prompt, 40 + i * 3));  // well past the window
    }
    return requests;
  }

  // Each request alone, one after another, in one engine.
  static std::vector<std::vector<TokenOutput>> run_alone(const std::vector<GenerationRequest>& rs,
                                                         EngineConfig c) {
    Engine e(*file_, *tok_, c);
    std::vector<std::vector<TokenOutput>> out;
    for (const auto& r : rs) {
      Collected got;
      e.add_request(r, collect(got));
      run_to_end(e);
      out.push_back(got.tokens[0]);
    }
    EXPECT_EQ(e.kv_cache().n_free_blocks(), e.kv_cache().n_blocks());
    return out;
  }
};

TEST_F(SlidingWindowEngineTest, LayoutGroupsSlidingLayersApart) {
  const model::ModelConfig mc = model::ModelConfig::from_gguf(*file_);
  const kv::KvGroupLayout layout = mc.windowed_kv_layout();
  ASSERT_EQ(layout.members(), 1);
  ASSERT_EQ(layout.n_groups(), 6);
  EXPECT_EQ(layout.window(layout.group_of(5)), 0);
  for (int32_t l = 0; l < 5; ++l) EXPECT_EQ(layout.window(layout.group_of(l)), kWindow);
  Engine e(*file_, *tok_, config(64));
  EXPECT_EQ(e.kv_cache().n_groups(), 6);
  EXPECT_EQ(e.kv_pool().n_window_groups, 5);
}

// Request by request the batches are the same with and without the hybrid cache, so the tokens
// must be identical: only where the keys live differs.
TEST_F(SlidingWindowEngineTest, GivingBlocksBackChangesNoToken) {
  const auto requests = long_requests();
  EngineConfig full = config(400, 32);  // 32-token steps: prompts arrive in chunks
  full.hybrid_kv_cache = false;
  const auto expected = run_alone(requests, full);
  const auto got = run_alone(requests, config(400, 32));
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(ids_of(got[i]), ids_of(expected[i])) << "request " << i;
  }
}

// The same bytes hold sequences the whole-context layout cannot: 40 one-layer blocks of 16
// tokens are 6 2/3 blocks of all six layers (106 tokens), yet a 300-token sequence needs only
// its global layer's 19 blocks plus a window's worth in each sliding layer.
TEST_F(SlidingWindowEngineTest, SequenceLongerThanTheWholeContextPoolFits) {
  const model::ModelConfig mc = model::ModelConfig::from_gguf(*file_);
  const size_t page =
      model::KvStorage::bytes_per_block(mc, 16, kv::KvCacheType::kF16, mc.windowed_kv_layout());
  EngineConfig hybrid = config(0, 16);
  hybrid.kv_cache_memory = static_cast<int64_t>(page * 40);
  std::mt19937 rng(3);
  const GenerationRequest r = greedy(random_prompt(rng, 100), 200);

  EngineConfig full = hybrid;
  full.hybrid_kv_cache = false;
  Engine whole(*file_, *tok_, full);
  EXPECT_EQ(whole.kv_pool().n_blocks, 6);
  try {
    whole.add_request(r, [](const RequestOutput&) {});
    FAIL() << "a 300-token request fit 6 blocks of 16 tokens";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("KV cache holds"), std::string::npos) << e.what();
  }

  Engine e(*file_, *tok_, hybrid);
  ASSERT_EQ(e.kv_pool().n_blocks, 40);
  Collected c;
  e.add_request(r, collect(c));
  int max_used = 0;
  int guard = 0;
  while (e.has_unfinished()) {
    ASSERT_TRUE(e.step());
    ASSERT_LT(++guard, 10000);
    max_used = std::max(max_used, e.kv_cache().n_blocks() - e.kv_cache().n_free_blocks());
  }
  ASSERT_EQ(c.tokens[0].size(), 200u);
  EXPECT_EQ(c.finish[0], FinishReason::kLength);
  EXPECT_EQ(e.stats().n_preemptions, 0);
  // After each step (blocks given back): 19 global blocks for 300 tokens, and per sliding layer
  // the block its window of 16 reaches into plus the one being filled.
  EXPECT_LE(max_used, 19 + 5 * 2);
  EXPECT_EQ(e.kv_cache().n_free_blocks(), 40);
}

// All at once, in a pool tight enough to preempt, with 24-token steps and prefix hits: every
// request's tokens equal its lone whole-context run (a divergence only at a near-tie).
TEST_F(SlidingWindowEngineTest, ConcurrentRunWithPrefixHitsAndPreemptionMatches) {
  const auto requests = long_requests();
  EngineConfig full = config(400, 512);
  full.hybrid_kv_cache = false;
  full.enable_prefix_caching = false;
  const auto alone = run_alone(requests, full);
  for (const spec::Method method :
       {spec::Method::kNone, spec::Method::kNgram, spec::Method::kDraft}) {
    SCOPED_TRACE("speculation " + std::to_string(static_cast<int>(method)));
    EngineConfig c = config(48, 24);
    c.speculative.method = method;
    if (method == spec::Method::kNgram) {
      c.speculative.num_speculative_tokens = 3;
      c.speculative.prompt_lookup_min = 1;
      c.speculative.prompt_lookup_max = 3;
    } else if (method == spec::Method::kDraft) {
      c.speculative.num_speculative_tokens = 4;
      c.speculative.draft_tree_width = 2;
      c.speculative.fixed_length = true;
      c.draft_file = draft_;
    }
    Engine e(*file_, *tok_, c);
    std::vector<Collected> together(requests.size());
    // The first two share the prompt head: the second starts once the first has computed it.
    e.add_request(requests[0], collect(together[0]));
    for (int i = 0; i < 8; ++i) e.step();
    for (size_t i = 1; i < requests.size(); ++i) e.add_request(requests[i], collect(together[i]));
    run_to_end(e);
    const EngineStats s = e.stats();
    EXPECT_GT(s.prefix_hits, 0);
    EXPECT_GT(s.n_preemptions, 0);
    int near_ties = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      near_ties += diverged_at_tie(together[i].tokens[0], alone[i], i);
    }
    EXPECT_LE(near_ties, 1);
    EXPECT_EQ(e.kv_cache().n_free_blocks(), 48);
    e.kv_cache().check_invariants();
  }
}

}  // namespace
}  // namespace llms::engine
