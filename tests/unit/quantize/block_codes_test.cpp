// Per-element code access: every element decodes as step * code + offset (the block's own
// dequantizer agrees), and writing one element's code changes that element alone.
#include "quantize/block_codes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "quant/quant.h"
#include "util/error.h"

namespace llms::quantize {
namespace {

using gguf::GgmlType;

constexpr GgmlType kTypes[] = {GgmlType::kQ4_0, GgmlType::kQ5_0, GgmlType::kQ8_0,
                               GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};

class BlockCodes : public testing::TestWithParam<GgmlType> {};

TEST_P(BlockCodes, GridDecodesAsTheDequantizerAndCodesWriteInPlace) {
  const GgmlType type = GetParam();
  const int n = static_cast<int>(gguf::ggml_type_info(type).block_size);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int trial = 0; trial < 8; ++trial) {
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng) + (trial % 2 ? 0.7f : 0.0f);
    std::vector<uint8_t> block(quant::quantized_row_bytes(type, n));
    quant::quantize_row(type, x.data(), block.data(), n);
    std::vector<float> decoded(n);
    quant::dequantize_row(type, block.data(), decoded.data(), n);
    for (int j = 0; j < n; ++j) {
      const CodeGrid g = code_grid(type, block.data(), j);
      const int code = get_code(type, block.data(), j);
      ASSERT_GE(code, g.code_min);
      ASSERT_LE(code, g.code_max);
      EXPECT_NEAR(g.decode(code), decoded[j], 1e-5f * (1.0f + std::fabs(decoded[j])))
          << "element " << j;
    }
    // Rewrite every element with another code, one at a time: only that element moves.
    for (int j = 0; j < n; ++j) {
      const CodeGrid g = code_grid(type, block.data(), j);
      const int code = g.code_min + static_cast<int>(rng() % (g.code_max - g.code_min + 1));
      set_code(type, block.data(), j, code);
      ASSERT_EQ(get_code(type, block.data(), j), code);
      std::vector<float> after(n);
      quant::dequantize_row(type, block.data(), after.data(), n);
      EXPECT_NEAR(after[j], g.decode(code), 1e-5f * (1.0f + std::fabs(after[j])));
      for (int k = 0; k < n; ++k) {
        if (k == j) continue;
        ASSERT_EQ(after[k], decoded[k]) << "set_code(" << j << ") moved " << k;
      }
      decoded = after;
    }
  }
}

TEST_P(BlockCodes, NearestIsTheClosestGridPoint) {
  const GgmlType type = GetParam();
  const int n = static_cast<int>(gguf::ggml_type_info(type).block_size);
  std::vector<float> x(n);
  for (int j = 0; j < n; ++j) x[j] = std::sin(0.37f * static_cast<float>(j));
  std::vector<uint8_t> block(quant::quantized_row_bytes(type, n));
  quant::quantize_row(type, x.data(), block.data(), n);
  for (int j = 0; j < n; ++j) {
    const CodeGrid g = code_grid(type, block.data(), j);
    for (float v : {x[j], 3.0f * x[j], -5.0f, 5.0f, NAN}) {
      const int q = g.nearest(v);
      ASSERT_GE(q, g.code_min);
      ASSERT_LE(q, g.code_max);
      if (std::isnan(v)) continue;
      for (int other = g.code_min; other <= g.code_max; ++other) {
        EXPECT_LE(std::fabs(g.decode(q) - v), std::fabs(g.decode(other) - v) + 1e-6f);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, BlockCodes, testing::ValuesIn(kTypes),
                         [](const testing::TestParamInfo<GgmlType>& param_info) {
                           return std::string(gguf::ggml_type_name(param_info.param));
                         });

TEST(BlockCodesRefusals, TypesWithoutAccess) {
  EXPECT_FALSE(has_code_access(GgmlType::kQ4_1));
  EXPECT_FALSE(has_code_access(GgmlType::kF16));
  uint8_t block[64] = {};
  EXPECT_THROW(code_grid(GgmlType::kQ2_K, block, 0), Error);
  EXPECT_THROW(set_code(GgmlType::kF32, block, 0, 1), Error);
}

}  // namespace
}  // namespace llms::quantize
