// Perplexity as llama.cpp's llama-perplexity computes it: windows, the scored half, BOS, the
// batch split, and the arithmetic (a model whose logits are all equal has perplexity n_vocab).
#include "eval/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <numeric>
#include <vector>

#include "eval/log_probs.h"
#include "gguf/gguf_file.h"
#include "kv/step_batch.h"
#include "model/cpu_runner.h"
#include "model/tiny_model.h"
#include "temp_dir.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace llms::eval {
namespace {

class Perplexity : public ::testing::Test {
 protected:
  std::unique_ptr<model::CpuRunner> runner(float weight_stddev) {
    model::TinyModelSpec spec;
    spec.weight_stddev = weight_stddev;
    spec.seed = 7;
    const auto path = dir_.path() / ("tiny-" + std::to_string(files_.size()) + ".gguf");
    model::write_tiny_model(spec, path);
    files_.push_back(std::make_unique<gguf::GgufFile>(gguf::GgufFile::open(path)));
    return std::make_unique<model::CpuRunner>(*files_.back(), std::make_shared<ThreadPool>(2));
  }

  static std::vector<int32_t> text_tokens(int32_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = 3 + (i * 37 + i / 5) % 250;
    return t;
  }

  testing::TempDir dir_;
  std::vector<std::unique_ptr<gguf::GgufFile>> files_;
};

TEST_F(Perplexity, EqualLogitsGiveTheVocabularySize) {
  auto r = runner(0.0f);  // every weight zero: every logits row is all zeros
  PerplexityOptions o;
  o.ctx = 32;
  o.batch = 32;
  const PerplexityResult res = perplexity(*r, text_tokens(100), o);
  EXPECT_EQ(res.n_windows, 3);      // 100 / 32, the rest dropped
  EXPECT_EQ(res.n_scored, 3 * 15);  // positions 16..30 of each window
  EXPECT_NEAR(res.ppl, r->n_vocab(), 1e-6 * r->n_vocab());
  EXPECT_NEAR(res.ppl_stderr, 0.0, 1e-9);
  ASSERT_EQ(res.ppl_after_window.size(), 3u);
}

// The reference: each window alone, in one pass with logits for every position, scored at
// ctx/2 .. ctx-2 against the next token, BOS in front.
double reference_ppl(model::ModelRunner& r, const std::vector<int32_t>& tokens, int32_t ctx,
                     int32_t bos) {
  r.allocate_kv(16, (ctx + 15) / 16, kv::KvCacheType::kF16, r.config().single_kv_layout());
  std::vector<kv::BlockId> table((static_cast<size_t>(ctx) + 15) / 16);
  std::iota(table.begin(), table.end(), 0);
  double nll = 0.0;
  int64_t n = 0;
  for (size_t w = 0; w + static_cast<size_t>(ctx) <= tokens.size(); w += static_cast<size_t>(ctx)) {
    std::vector<int32_t> window(tokens.begin() + static_cast<std::ptrdiff_t>(w),
                                tokens.begin() + static_cast<std::ptrdiff_t>(w) + ctx);
    window[0] = bos;
    kv::StepBatch b;
    b.add_sequence(1, window, 0, table, ctx);
    const model::LogitsView logits = r.execute(b);
    for (int32_t p = ctx / 2; p + 1 < ctx; ++p) {
      nll += negative_log_likelihood(logits.row(p), window[static_cast<size_t>(p) + 1]);
      ++n;
    }
  }
  return std::exp(nll / static_cast<double>(n));
}

TEST_F(Perplexity, AnyBatchSplitScoresTheSameTokens) {
  const std::vector<int32_t> tokens = text_tokens(200);
  const int32_t bos = 1;
  auto ref_runner = runner(0.2f);
  const double expected = reference_ppl(*ref_runner, tokens, 48, bos);
  ASSERT_GT(expected, 1.0);
  // One window per pass, a window in passes of 20 and 7 tokens (some with no scored row), and
  // three windows per pass.
  for (const int32_t batch : {48, 20, 7, 144}) {
    auto r = runner(0.2f);
    PerplexityOptions o;
    o.ctx = 48;
    o.batch = batch;
    o.bos_id = bos;
    const PerplexityResult res = perplexity(*r, tokens, o);
    EXPECT_EQ(res.n_windows, 4);
    EXPECT_EQ(res.n_scored, 4 * 23);
    EXPECT_NEAR(res.ppl, expected, 1e-3 * expected) << "batch " << batch;
    EXPECT_NEAR(res.ppl_after_window.back(), res.ppl, 1e-9 * res.ppl);
    EXPECT_GT(res.ppl_stderr, 0.0);
  }
}

TEST_F(Perplexity, RefusesWhatItCannotScore) {
  PerplexityOptions o;
  o.ctx = 64;
  try {
    count_windows(100, o);
    FAIL() << "a text shorter than two windows must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("100 tokens"), std::string::npos) << e.what();
  }
  EXPECT_EQ(count_windows(128, o), 2);
  o.ctx = 63;
  EXPECT_THROW(count_windows(1000, o), Error);  // odd
  o.ctx = 2;
  EXPECT_THROW(count_windows(1000, o), Error);
  o.ctx = 64;
  o.batch = 0;
  EXPECT_THROW(count_windows(1000, o), Error);
  o.batch = 96;  // above ctx but not a multiple
  EXPECT_THROW(count_windows(1000, o), Error);
}

TEST(NegativeLogLikelihood, IsMinusLogSoftmax) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f, 1000.0f};
  EXPECT_NEAR(negative_log_likelihood(logits, 3), 0.0, 1e-12);
  const std::vector<float> small = {0.0f, std::log(3.0f)};
  EXPECT_NEAR(negative_log_likelihood(small, 0), std::log(4.0), 1e-6);
  EXPECT_NEAR(negative_log_likelihood(small, 1), std::log(4.0 / 3.0), 1e-6);
}

}  // namespace
}  // namespace llms::eval
