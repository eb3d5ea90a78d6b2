// Activation quantization: Q8_K bytes equal quant::quantize_row(Q8_K) exactly; ActQ8 equals
// GGML's Q8_0 rounding up to ties (and keeps d in f32); every ISA gives the scalar bytes.
#include "kernels/act_quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "quant/float_convert.h"
#include "quant/quant.h"
#include "util/error.h"

namespace llms::kernels {
namespace {

using testing::gaussian;
using testing::rng_for;

// Rows with the awkward cases: a zero block, a single spike, negative extremes, ties in |x|.
std::vector<float> awkward_row(std::mt19937_64& rng, int64_t n) {
  std::vector<float> x = gaussian(rng, static_cast<size_t>(n), 2.0f);
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(j)] = 0.0f;  // an all-zero Q8 block
  x[40] = -50.0f;                                                 // negative maximum
  x[300] = 7.0f;
  x[301] = -7.0f;  // equal magnitudes, first one wins the sign
  for (int j = 512; j < 544; ++j) x[static_cast<size_t>(j)] = 1e-30f;  // tiny but nonzero
  return x;
}

TEST(ActQuant, Q8KIsQuantizeRowQ8K) {
  const int64_t n = 1024;
  for (Isa isa : testing::all_isas()) {
    if (!isa_supported(isa)) continue;
    for (int trial = 0; trial < 4; ++trial) {
      auto rng = rng_for(static_cast<uint64_t>(trial));
      const std::vector<float> x =
          trial == 0 ? awkward_row(rng, n) : gaussian(rng, static_cast<size_t>(n), 0.1f + trial);
      std::vector<ActQ8K> ours(static_cast<size_t>(n / 256));
      quantize_act_q8k(x.data(), n, ours.data(), isa);
      std::vector<uint8_t> reference(quant::quantized_row_bytes(gguf::GgmlType::kQ8_K, n));
      quant::quantize_row(gguf::GgmlType::kQ8_K, x.data(), reference.data(), n);
      ASSERT_EQ(reference.size(), ours.size() * sizeof(ActQ8K));
      EXPECT_EQ(std::memcmp(reference.data(), ours.data(), reference.size()), 0)
          << isa_name(isa) << " trial " << trial;
    }
  }
}

TEST(ActQuant, Q8MatchesQ8_0RoundingAndIsaAgree) {
  const int64_t n = 1024;
  for (int trial = 0; trial < 4; ++trial) {
    auto rng = rng_for(10 + static_cast<uint64_t>(trial));
    const std::vector<float> x =
        trial == 0 ? awkward_row(rng, n) : gaussian(rng, static_cast<size_t>(n), 0.1f + trial);
    std::vector<ActQ8> scalar(static_cast<size_t>(n / 32));
    quantize_act_q8(x.data(), n, scalar.data(), Isa::kScalar);
    std::vector<quant::BlockQ8_0> ggml(scalar.size());
    quant::quantize_row(gguf::GgmlType::kQ8_0, x.data(), ggml.data(), n);
    int ties = 0;
    for (size_t b = 0; b < scalar.size(); ++b) {
      // Same scale up to GGML's f16 rounding of it.
      EXPECT_EQ(quant::fp32_to_fp16(scalar[b].d), ggml[b].d) << "block " << b;
      int sum = 0;
      for (int j = 0; j < 32; ++j) {
        const int diff = scalar[b].qs[j] - ggml[b].qs[j];
        EXPECT_LE(std::abs(diff), 1);
        ties += diff != 0;  // round-half-even vs GGML's half-away on exact ties
        sum += scalar[b].qs[j];
      }
      EXPECT_EQ(scalar[b].sum, sum);
      EXPECT_GE(scalar[b].d, 0.0f);
    }
    EXPECT_LE(ties, 2);
    EXPECT_EQ(scalar[0].d, trial == 0 ? 0.0f : scalar[0].d);
    for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
      if (!isa_supported(isa)) continue;
      std::vector<ActQ8> simd(scalar.size());
      quantize_act_q8(x.data(), n, simd.data(), isa);
      EXPECT_EQ(std::memcmp(simd.data(), scalar.data(), simd.size() * sizeof(ActQ8)), 0)
          << isa_name(isa) << " trial " << trial;
    }
  }
}

TEST(ActQuant, NonFiniteInputIsNotUndefined) {
  std::vector<float> x(256, 1.0f);
  x[3] = std::nanf("");
  x[9] = INFINITY;
  for (Isa isa : testing::all_isas()) {
    if (!isa_supported(isa)) continue;
    std::vector<ActQ8K> k(1);
    quantize_act_q8k(x.data(), 256, k.data(), isa);  // UBSan checks the conversions
    std::vector<ActQ8> q(8);
    quantize_act_q8(x.data(), 256, q.data(), isa);
  }
}

TEST(ActQuant, RefusesUnsupportedIsa) {
  std::vector<float> x(32, 1.0f);
  ActQ8 block;
  for (Isa isa : testing::all_isas()) {
    if (!isa_supported(isa)) {
      EXPECT_THROW(quantize_act_q8(x.data(), 32, &block, isa), Error);
    }
  }
}

}  // namespace
}  // namespace llms::kernels
