// Key smoothing for int8 KV caches (model/key_smoothing.h): the factors follow the keys' pair
// magnitudes and are equal within every RoPE rotation pair; an int8 store refuses to be written
// before it is calibrated; and the smoothing leaves attention's result unchanged but for the
// rounding it exists to shrink.
#include "model/key_smoothing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "kv/step_batch.h"
#include "model/kv_storage.h"
#include "model/tiny_model.h"
#include "model/transformer.h"
#include "temp_dir.h"
#include "util/error.h"

namespace llms::model {
namespace {

ModelConfig one_head_config(uint64_t head_dim) {
  ModelConfig c;
  c.n_layers = 1;
  c.n_kv_heads = {1};
  c.head_dim_k = head_dim;
  c.head_dim_v = head_dim;
  return c;
}

TEST(KeySmoothing, FactorsAreTheSquareRootOfThePairMagnitudeAndEqualWithinPairs) {
  const ModelConfig c = one_head_config(8);
  KeyStatistics stats(c);
  // Dimension 1 is an outlier of magnitude 100; the others are 1 (or 0 for dimension 6).
  const std::vector<float> key = {1, 100, 1, 1, 1, 1, 0, 1};
  for (int i = 0; i < 3; ++i) stats.add(0, 0, key.data());
  EXPECT_DOUBLE_EQ(stats.mean_square(0, 0, 1), 10000.0);

  // Halves (NeoX): pairs (e, e + 4).
  const std::vector<float> neox = smoothing_factors(c, stats, kernels::RopeMode::kNeox);
  ASSERT_EQ(neox.size(), 8u);
  for (size_t e = 0; e < 4; ++e) EXPECT_EQ(neox[e], neox[e + 4]) << e;
  EXPECT_NEAR(neox[1], std::sqrt(std::sqrt((10000.0 + 1.0) / 2)), 1e-4);
  EXPECT_NEAR(neox[0], 1.0, 1e-6);
  EXPECT_NEAR(neox[2], std::sqrt(std::sqrt(0.5)), 1e-6);  // dims 2 and 6: (1 + 0) / 2

  // Adjacent pairs (llama): (2i, 2i + 1).
  const std::vector<float> normal = smoothing_factors(c, stats, kernels::RopeMode::kNormal);
  for (size_t e = 0; e < 8; e += 2) EXPECT_EQ(normal[e], normal[e + 1]) << e;
  EXPECT_NEAR(normal[0], std::sqrt(std::sqrt((1.0 + 10000.0) / 2)), 1e-4);
  EXPECT_NEAR(normal[6], std::sqrt(std::sqrt(0.5)), 1e-6);
}

TEST(KeySmoothing, SilentDimensionsAreFlooredAndUnseenHeadsGetOnes) {
  ModelConfig c = one_head_config(4);
  c.n_layers = 2;
  c.n_kv_heads = {1, 1};
  KeyStatistics stats(c);
  const std::vector<float> key = {1000, 0, 1000, 0};
  stats.add(0, 0, key.data());
  const std::vector<float> f = smoothing_factors(c, stats, kernels::RopeMode::kNormal);
  ASSERT_EQ(f.size(), 8u);
  for (float x : f) EXPECT_GT(x, 0.0f);
  EXPECT_NEAR(f[0], std::sqrt(1000 / std::sqrt(2.0)), 1e-3);
  for (size_t e = 4; e < 8; ++e) EXPECT_EQ(f[e], 1.0f);  // layer 1 saw no key
}

TEST(KeySmoothing, CalibrationTokensAreFixedAndInsideTheVocabulary) {
  const std::vector<int32_t> a = calibration_tokens(151936, 128);
  EXPECT_EQ(a, calibration_tokens(151936, 128));
  for (int32_t id : a) {
    EXPECT_GE(id, 1000);
    EXPECT_LT(id, 32000);
  }
  for (int32_t id : calibration_tokens(300, 64)) {
    EXPECT_GE(id, 75);
    EXPECT_LT(id, 300);
  }
}

TEST(KeySmoothing, StoreRefusesFactorsOfTheWrongShapeOrType) {
  const ModelConfig c = one_head_config(8);
  KvStorage i8(c, 16, 2, kv::KvCacheType::kInt8);
  EXPECT_TRUE(i8.needs_key_smoothing());
  EXPECT_EQ(i8.key_smoothing(0, 0), nullptr);
  EXPECT_THROW(i8.set_key_smoothing(std::vector<float>(7, 1.0f)), Error);
  std::vector<float> bad(8, 1.0f);
  bad[3] = 0.0f;
  EXPECT_THROW(i8.set_key_smoothing(bad), Error);
  i8.set_key_smoothing(std::vector<float>(8, 2.0f));
  EXPECT_FALSE(i8.needs_key_smoothing());
  ASSERT_NE(i8.key_smoothing(0, 0), nullptr);
  EXPECT_EQ(i8.key_smoothing(0, 0)[7], 2.0f);
  KvStorage f16(c, 16, 2, kv::KvCacheType::kF16);
  EXPECT_FALSE(f16.needs_key_smoothing());
  EXPECT_THROW(f16.set_key_smoothing(std::vector<float>(8, 1.0f)), Error);
  KvStorage fp8(c, 16, 2, kv::KvCacheType::kFp8);
  EXPECT_FALSE(fp8.needs_key_smoothing());  // E4M3's exponent already spans the range
}

class KeySmoothingModel : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    TinyModelSpec spec;
    spec.architecture = GetParam();
    if (spec.architecture == "gemma3") spec.tokenizer = TinyTokenizerKind::kSentencePieceLike;
    spec.weight_stddev = 0.3f;
    path_ = dir_.path() / "tiny.gguf";
    write_tiny_model(spec, path_);
    file_ = std::make_unique<gguf::GgufFile>(gguf::GgufFile::open(path_));
    model_ = std::make_unique<Transformer>(*file_, 1);
  }

  // Last-position logits of a 40-token prompt.
  std::vector<float> logits(KvStorage& kv) {
    std::vector<int32_t> ids(40);
    for (int32_t i = 0; i < 40; ++i) ids[static_cast<size_t>(i)] = 3 + (i * 7) % 90;
    const std::vector<kv::BlockId> table = {0, 1, 2};
    kv::StepBatch batch;
    batch.add_sequence(1, ids, 0, table, 1);
    std::vector<float> out(static_cast<size_t>(model_->n_vocab()));
    model_->forward(batch, kv, out.data());
    return out;
  }

  testing::TempDir dir_;
  std::filesystem::path path_;
  std::unique_ptr<gguf::GgufFile> file_;
  std::unique_ptr<Transformer> model_;
};

double relative_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0;
  double norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(err / norm);
}

TEST_P(KeySmoothingModel, UncalibratedInt8StoreIsRefusedAndCalibrationIsDeterministic) {
  KvStorage kv(model_->config(), 16, 3, kv::KvCacheType::kInt8);
  try {
    logits(kv);
    FAIL() << "an uncalibrated int8 store was written";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("calibrate_key_smoothing"), std::string::npos) << e.what();
  }
  model_->calibrate_key_smoothing(kv);
  KvStorage again(model_->config(), 16, 3, kv::KvCacheType::kInt8);
  model_->calibrate_key_smoothing(again);
  const size_t n = model_->config().head_dim_k;
  for (size_t layer = 0; layer < model_->config().n_layers; ++layer) {
    for (uint64_t h = 0; h < model_->config().n_kv_heads[layer]; ++h) {
      for (size_t e = 0; e < n; ++e) {
        ASSERT_EQ(kv.key_smoothing(layer, h)[e], again.key_smoothing(layer, h)[e]);
      }
    }
  }
}

// Smoothing is exact algebra (q.c . k/c = q . k), so what separates a calibrated int8 store
// from an f32 one is the 8-bit rounding alone: the logits stay close (a wrong factor on either
// side, e.g. the query multiplied but the key not divided, would move them by far more).
TEST_P(KeySmoothingModel, Int8LogitsStayCloseToF32) {
  KvStorage f32(model_->config(), 16, 3, kv::KvCacheType::kF32);
  KvStorage i8(model_->config(), 16, 3, kv::KvCacheType::kInt8);
  model_->calibrate_key_smoothing(i8);
  const std::vector<float> want = logits(f32);
  const std::vector<float> got = logits(i8);
  // Measured at most 0.031 on these random models (large weights make attention peaky).
  EXPECT_LT(relative_l2(got, want), 0.06) << GetParam();
}

// The calibration pass really records keys: the factors differ from one dimension to another
// (all ones would mean no smoothing at all, which every other check here would let through).
TEST_P(KeySmoothingModel, CalibratedFactorsFollowTheKeys) {
  KvStorage kv(model_->config(), 16, 3, kv::KvCacheType::kInt8);
  model_->calibrate_key_smoothing(kv);
  const size_t n = model_->config().head_dim_k;
  for (size_t layer = 0; layer < model_->config().n_layers; ++layer) {
    for (uint64_t h = 0; h < model_->config().n_kv_heads[layer]; ++h) {
      const float* c = kv.key_smoothing(layer, h);
      const auto [lo, hi] = std::minmax_element(c, c + n);
      EXPECT_GT(*hi / *lo, 1.05f) << "layer " << layer << " head " << h;
    }
  }
}

// 8-bit caches keep batch invariance: prompts computed together, in interleaved blocks of one
// pool, give what each gives alone.
TEST_P(KeySmoothingModel, RaggedBatchOf8BitCachesEqualsEachAlone) {
  const std::vector<std::vector<int32_t>> prompts = {
      {5, 9, 14, 20, 27, 35, 44, 54, 65, 77, 3, 8}, {40, 41, 42}, {7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
                                                                   7, 7, 7, 7, 7, 7, 7, 7, 7, 1}};
  for (kv::KvCacheType type : {kv::KvCacheType::kInt8, kv::KvCacheType::kFp8}) {
    SCOPED_TRACE(std::string(kv::kv_cache_type_name(type)));
    std::vector<std::vector<float>> alone;
    for (const auto& ids : prompts) {
      KvStorage kv(model_->config(), 8, 4, type);
      model_->calibrate_key_smoothing(kv);
      const std::vector<kv::BlockId> table = {0, 1, 2, 3};
      kv::StepBatch batch;
      batch.add_sequence(1, ids, 0, table, 1);
      alone.emplace_back(static_cast<size_t>(model_->n_vocab()));
      model_->forward(batch, kv, alone.back().data());
    }
    KvStorage kv(model_->config(), 8, 12, type);
    model_->calibrate_key_smoothing(kv);
    std::vector<std::vector<kv::BlockId>> tables(prompts.size());
    kv::StepBatch batch;
    for (size_t s = 0; s < prompts.size(); ++s) {
      for (int32_t b = 0; b < 4; ++b) {
        tables[s].push_back(static_cast<kv::BlockId>(b * 3 + static_cast<int32_t>(s)));
      }
      batch.add_sequence(static_cast<int64_t>(s), prompts[s], 0, tables[s], 1);
    }
    std::vector<float> together(prompts.size() * static_cast<size_t>(model_->n_vocab()));
    model_->forward(batch, kv, together.data());
    for (size_t s = 0; s < prompts.size(); ++s) {
      const std::vector<float> row(
          together.begin() + static_cast<int64_t>(s) * model_->n_vocab(),
          together.begin() + static_cast<int64_t>(s + 1) * model_->n_vocab());
      EXPECT_LE(relative_l2(row, alone[s]), 1e-4) << "sequence " << s;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, KeySmoothingModel,
                         ::testing::Values("llama", "qwen2", "qwen3", "gemma3"));

}  // namespace
}  // namespace llms::model
