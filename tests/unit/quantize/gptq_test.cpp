// GPTQ on synthetic layers: with correlated activations (and a few loud channels, as in LLMs) it
// leaves a clearly smaller output error trace((W - Q) H (W - Q)^T) than round-to-nearest and than
// the importance-weighted quantizer it starts from; with independent activations of equal
// variance it has nothing to push and matches the weighted quantizer; dead columns, shapes and
// bad Hessians are handled as documented.
#include "quantize/gptq.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "quant/quant.h"
#include "quantize/weighted_quantizers.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace llms::quantize {
namespace {

using gguf::GgmlType;

constexpr int64_t kCols = 256;
constexpr int64_t kRows = 96;
constexpr int kTokens = 1536;

struct Layer {
  std::vector<float> w;  // kRows x kCols
  std::vector<float> h;  // kCols x kCols
};

// Activations x = z M with M = I + mixing (correlated channels); `loud` channels 8x louder.
Layer make_layer(bool correlated, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> mix(kCols * kCols, 0.0);
  for (int64_t i = 0; i < kCols; ++i) {
    for (int64_t j = 0; j < kCols; ++j) {
      mix[i * kCols + j] = (i == j ? 1.0 : 0.0) + (correlated ? 0.15 * normal(rng) : 0.0);
    }
  }
  std::vector<double> h(kCols * kCols, 0.0);
  std::vector<double> z(kCols);
  std::vector<double> x(kCols);
  for (int t = 0; t < kTokens; ++t) {
    for (double& v : z) v = normal(rng);
    for (int64_t j = 0; j < kCols; ++j) {
      double s = 0.0;
      for (int64_t i = 0; i < kCols; ++i) s += z[i] * mix[i * kCols + j];
      x[j] = correlated && j % 37 == 5 ? 8.0 * s : s;
    }
    for (int64_t i = 0; i < kCols; ++i) {
      for (int64_t j = 0; j < kCols; ++j) h[i * kCols + j] += x[i] * x[j];
    }
  }
  Layer layer;
  layer.h.assign(h.begin(), h.end());
  layer.w.resize(kRows * kCols);
  std::normal_distribution<float> wn(0.0f, 0.02f);
  for (float& v : layer.w) v = wn(rng);
  for (int i = 0; i < 40; ++i) layer.w[rng() % layer.w.size()] *= 5.0f;
  return layer;
}

// trace((W - Q) H (W - Q)^T): the summed squared output error over the calibration rows.
double output_error(const Layer& layer, GgmlType type, const std::vector<uint8_t>& q) {
  const uint64_t row_bytes = quant::quantized_row_bytes(type, kCols);
  std::vector<float> decoded(kCols);
  std::vector<double> d(kCols);
  double total = 0.0;
  for (int64_t r = 0; r < kRows; ++r) {
    quant::dequantize_row(type, q.data() + r * row_bytes, decoded.data(), kCols);
    for (int64_t j = 0; j < kCols; ++j) d[j] = layer.w[r * kCols + j] - decoded[j];
    for (int64_t i = 0; i < kCols; ++i) {
      double s = 0.0;
      for (int64_t j = 0; j < kCols; ++j) s += layer.h[i * kCols + j] * d[j];
      total += d[i] * s;
    }
  }
  return total;
}

struct Errors {
  double rtn, weighted, gptq;
};

Errors compare(GgmlType type, const Layer& layer) {
  const uint64_t row_bytes = quant::quantized_row_bytes(type, kCols);
  std::vector<uint8_t> rtn(row_bytes * kRows);
  std::vector<uint8_t> weighted(row_bytes * kRows);
  std::vector<float> importance(kCols);
  for (int64_t j = 0; j < kCols; ++j) importance[j] = layer.h[j * kCols + j];
  for (int64_t r = 0; r < kRows; ++r) {
    quant::quantize_row(type, &layer.w[r * kCols], rtn.data() + r * row_bytes, kCols);
    quantize_row_with_importance(type, &layer.w[r * kCols], importance.data(),
                                 weighted.data() + r * row_bytes, kCols);
  }
  std::vector<uint8_t> gptq(row_bytes * kRows);
  gptq_quantize(type, layer.w.data(), kRows, kCols, layer.h.data(), gptq.data());
  return {output_error(layer, type, rtn), output_error(layer, type, weighted),
          output_error(layer, type, gptq)};
}

class Gptq : public testing::TestWithParam<GgmlType> {};

TEST_P(Gptq, CorrelatedActivationsLeaveClearlyLessOutputError) {
  const GgmlType type = GetParam();
  const Layer layer = make_layer(/*correlated=*/true, 11);
  const Errors e = compare(type, layer);
  std::printf("%s correlated: rtn %.4g weighted %.4g gptq %.4g (gptq/rtn %.3f)\n",
              std::string(gguf::ggml_type_name(type)).c_str(), e.rtn, e.weighted, e.gptq,
              e.gptq / e.rtn);
  EXPECT_LT(e.gptq, 0.8 * e.weighted);
  EXPECT_LT(e.gptq, 0.8 * e.rtn);
}

TEST_P(Gptq, IndependentEqualActivationsMatchTheWeightedQuantizer) {
  const GgmlType type = GetParam();
  const Layer layer = make_layer(/*correlated=*/false, 12);
  const Errors e = compare(type, layer);
  std::printf("%s independent: rtn %.4g weighted %.4g gptq %.4g\n",
              std::string(gguf::ggml_type_name(type)).c_str(), e.rtn, e.weighted, e.gptq);
  // The sample covariance is not exactly diagonal, so a little is pushed; never much worse.
  EXPECT_LT(e.gptq, 1.05 * e.weighted);
}

INSTANTIATE_TEST_SUITE_P(Types, Gptq,
                         testing::Values(GgmlType::kQ4_0, GgmlType::kQ5_0, GgmlType::kQ8_0,
                                         GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K),
                         [](const testing::TestParamInfo<GgmlType>& param_info) {
                           return std::string(gguf::ggml_type_name(param_info.param));
                         });

// Tiles of rows on a pool give the bytes the calling thread alone gives, whatever the pool's size
// (96 rows: two tiles of 64 and 32).
TEST(GptqThreads, PoolOfAnySizeGivesTheSameBytes) {
  const Layer layer = make_layer(true, 21);
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ4_0}) {
    const uint64_t row_bytes = quant::quantized_row_bytes(type, kCols);
    std::vector<uint8_t> alone(row_bytes * kRows);
    gptq_quantize(type, layer.w.data(), kRows, kCols, layer.h.data(), alone.data());
    for (int n_threads : {2, 3}) {
      ThreadPool pool(n_threads);
      std::vector<uint8_t> pooled(row_bytes * kRows, 0xAB);
      gptq_quantize(type, layer.w.data(), kRows, kCols, layer.h.data(), pooled.data(),
                    GptqOptions{0.01, n_threads, &pool});
      EXPECT_EQ(pooled, alone) << gguf::ggml_type_name(type) << " with " << n_threads << " threads";
    }
  }
}

TEST(GptqEdges, DeadColumnsAndSingularHessians) {
  Layer layer = make_layer(true, 13);
  // Column 3 never activated: its row and column of H are zero; its weights are dropped.
  for (int64_t i = 0; i < kCols; ++i) layer.h[3 * kCols + i] = layer.h[i * kCols + 3] = 0.0f;
  const GgmlType type = GgmlType::kQ4_K;
  const uint64_t row_bytes = quant::quantized_row_bytes(type, kCols);
  std::vector<uint8_t> q(row_bytes * kRows);
  gptq_quantize(type, layer.w.data(), kRows, kCols, layer.h.data(), q.data());
  std::vector<float> decoded(kCols);
  for (int64_t r = 0; r < kRows; ++r) {
    quant::dequantize_row(type, q.data() + r * row_bytes, decoded.data(), kCols);
    for (float v : decoded) ASSERT_TRUE(std::isfinite(v));
  }
  // A rank-one Hessian (every activation row the same) is singular: dampening makes it usable.
  std::vector<float> rank_one(kCols * kCols);
  for (int64_t i = 0; i < kCols; ++i) {
    for (int64_t j = 0; j < kCols; ++j) rank_one[i * kCols + j] = 1.0f;
  }
  EXPECT_NO_THROW(gptq_quantize(type, layer.w.data(), kRows, kCols, rank_one.data(), q.data()));
}

TEST(GptqEdges, Refusals) {
  std::vector<float> w(64 * 48, 0.1f);
  std::vector<float> h(48 * 48, 0.0f);
  std::vector<uint8_t> out(1 << 16);
  try {
    gptq_quantize(GgmlType::kQ4_0, w.data(), 64, 48, h.data(), out.data());
    FAIL() << "48 columns are not whole Q4_0 blocks";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument);
  }
  try {
    gptq_quantize(GgmlType::kQ4_1, w.data(), 1, 32, h.data(), out.data());
    FAIL() << "Q4_1 has no GPTQ quantizer";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kUnsupported);
  }
  std::vector<float> nan_h(32 * 32, 1.0f);
  nan_h[5] = NAN;
  try {
    gptq_quantize(GgmlType::kQ8_0, w.data(), 1, 32, nan_h.data(), out.data());
    FAIL() << "a NaN Hessian";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument);
  }
}

}  // namespace
}  // namespace llms::quantize
