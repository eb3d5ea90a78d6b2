// Weighted quantizers, for each type they cover: the bytes are valid blocks (quant's dequantizer
// reads them back near the input), even weights never lose to round-to-nearest in plain squared
// error, skewed weights beat it in weighted error, and importance becomes weights as documented.
#include "quantize/weighted_quantizers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quant/quant.h"
#include "quantize/block_codes.h"
#include "util/error.h"

namespace llms::quantize {
namespace {

using gguf::GgmlType;

constexpr GgmlType kTypes[] = {GgmlType::kQ4_0, GgmlType::kQ5_0, GgmlType::kQ8_0,
                               GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};
constexpr int64_t kRow = 512;  // two K super-blocks, sixteen legacy blocks
constexpr int kRows = 24;

// Weight-like rows: mostly Gaussian with a few outliers, some rows shifted off zero.
std::vector<float> random_row(std::mt19937& rng, int index) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> row(kRow);
  const float shift = index % 3 == 0 ? 0.4f : 0.0f;
  for (float& v : row) v = 0.02f * normal(rng) + 0.02f * shift;
  for (int i = 0; i < 4; ++i) row[rng() % kRow] *= 6.0f;
  return row;
}

std::vector<float> decode(GgmlType type, const std::vector<uint8_t>& bytes) {
  std::vector<float> out(kRow);
  quant::dequantize_row(type, bytes.data(), out.data(), kRow);
  return out;
}

double weighted_error(const std::vector<float>& x, const std::vector<float>& w,
                      const std::vector<float>& y) {
  double e = 0;
  for (size_t j = 0; j < x.size(); ++j) {
    const double d = static_cast<double>(y[j]) - x[j];
    e += w[j] * d * d;
  }
  return e;
}

std::vector<uint8_t> nearest(GgmlType type, const std::vector<float>& row) {
  std::vector<uint8_t> bytes(quant::quantized_row_bytes(type, kRow));
  quant::quantize_row(type, row.data(), bytes.data(), kRow);
  return bytes;
}

std::vector<uint8_t> weighted(GgmlType type, const std::vector<float>& row,
                              const std::vector<float>& w) {
  std::vector<uint8_t> bytes(quant::quantized_row_bytes(type, kRow));
  quantize_row_weighted(type, row.data(), w.data(), bytes.data(), kRow);
  return bytes;
}

class WeightedQuantizer : public ::testing::TestWithParam<GgmlType> {};

TEST_P(WeightedQuantizer, EvenWeightsNeverLoseToRoundToNearest) {
  const GgmlType type = GetParam();
  std::mt19937 rng(7);
  const std::vector<float> even(kRow, 1.0f);
  double total_weighted = 0;
  double total_nearest = 0;
  for (int r = 0; r < kRows; ++r) {
    const std::vector<float> row = random_row(rng, r);
    const double mine = weighted_error(row, even, decode(type, weighted(type, row, even)));
    const double rtn = weighted_error(row, even, decode(type, nearest(type, row)));
    EXPECT_LE(mine, rtn) << "row " << r;
    total_weighted += mine;
    total_nearest += rtn;
  }
  // Not only never worse: the search finds better scales than round-to-nearest's on the whole.
  EXPECT_LT(total_weighted, total_nearest);
}

TEST_P(WeightedQuantizer, SkewedWeightsBeatRoundToNearestInWeightedError) {
  const GgmlType type = GetParam();
  std::mt19937 rng(11);
  std::lognormal_distribution<float> skew(0.0f, 1.5f);
  double total_weighted = 0;
  double total_nearest = 0;
  for (int r = 0; r < kRows; ++r) {
    const std::vector<float> row = random_row(rng, r);
    std::vector<float> importance(kRow);
    for (float& v : importance) v = skew(rng);
    std::vector<float> w(kRow);
    importance_weights(type, row.data(), importance.data(), w.data(), kRow);
    const double mine = weighted_error(row, w, decode(type, weighted(type, row, w)));
    const double rtn = weighted_error(row, w, decode(type, nearest(type, row)));
    EXPECT_LE(mine, rtn) << "row " << r;
    total_weighted += mine;
    total_nearest += rtn;
  }
  EXPECT_LT(total_weighted, 0.95 * total_nearest);
}

TEST_P(WeightedQuantizer, EqualImportanceIsNoWorseThanRoundToNearestOnTheWhole) {
  // Equal importance still weighs large values more (sqrt(sigma2 + x^2)), so a row may lose a
  // little plain error; over many rows the better scales win.
  const GgmlType type = GetParam();
  std::mt19937 rng(13);
  const std::vector<float> even(kRow, 1.0f);
  double total_equal = 0;
  double total_nearest = 0;
  for (int r = 0; r < kRows; ++r) {
    const std::vector<float> row = random_row(rng, r);
    std::vector<uint8_t> bytes(quant::quantized_row_bytes(type, kRow));
    quantize_row_with_importance(type, row.data(), even.data(), bytes.data(), kRow);
    total_equal += weighted_error(row, even, decode(type, bytes));
    total_nearest += weighted_error(row, even, decode(type, nearest(type, row)));
  }
  EXPECT_LE(total_equal, total_nearest);
}

TEST_P(WeightedQuantizer, BytesAreValidBlocksCloseToTheInput) {
  const GgmlType type = GetParam();
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(0.0f, 4.0f);
  for (int r = 0; r < 4; ++r) {
    const std::vector<float> row = random_row(rng, r);
    std::vector<float> importance(kRow);
    for (float& v : importance) v = uniform(rng);
    std::vector<uint8_t> bytes(quant::quantized_row_bytes(type, kRow));
    quantize_row_with_importance(type, row.data(), importance.data(), bytes.data(), kRow);
    const std::vector<float> back = decode(type, bytes);
    float max_abs = 0;
    for (float v : row) max_abs = std::max(max_abs, std::fabs(v));
    for (int64_t j = 0; j < kRow; ++j) {
      ASSERT_TRUE(std::isfinite(back[j]));
      // Loose: a 4-bit code of the row's range, whatever the weights favour.
      EXPECT_NEAR(back[j], row[j], 0.25 * max_abs) << j;
    }
  }
}

TEST_P(WeightedQuantizer, ZeroRowsAndZeroImportanceAreHandled) {
  const GgmlType type = GetParam();
  const std::vector<float> zeros(kRow, 0.0f);
  const std::vector<float> ones(kRow, 1.0f);
  std::vector<uint8_t> bytes(quant::quantized_row_bytes(type, kRow));
  quantize_row_with_importance(type, zeros.data(), ones.data(), bytes.data(), kRow);
  for (float v : decode(type, bytes)) EXPECT_EQ(v, 0.0f);
  // Columns no token reached weigh nothing: the row is then quantized as if evenly weighted.
  std::mt19937 rng(5);
  const std::vector<float> row = random_row(rng, 1);
  quantize_row_with_importance(type, row.data(), zeros.data(), bytes.data(), kRow);
  EXPECT_EQ(bytes, weighted(type, row, ones));
}

INSTANTIATE_TEST_SUITE_P(Types, WeightedQuantizer, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<GgmlType>& param_info) {
                           return std::string(gguf::ggml_type_name(param_info.param));
                         });

TEST(WeightedQuantizers, ImportanceBecomesLlamaCppsBlockScaledWeights) {
  // w_j = importance_j * sqrt(sigma2 + x_j^2), sigma2 = the block's mean of x^2.
  std::vector<float> row(32);
  std::vector<float> importance(32);
  double sum_xx = 0;
  for (int j = 0; j < 32; ++j) {
    row[j] = 0.1f * static_cast<float>(j - 10);
    importance[j] = 0.5f + static_cast<float>(j % 4);
    sum_xx += static_cast<double>(row[j]) * row[j];
  }
  std::vector<float> w(32);
  importance_weights(GgmlType::kQ4_0, row.data(), importance.data(), w.data(), 32);
  for (int j = 0; j < 32; ++j) {
    EXPECT_FLOAT_EQ(
        w[j], static_cast<float>(importance[j] *
                                 std::sqrt(sum_xx / 32 + static_cast<double>(row[j]) * row[j])))
        << j;
  }
}

TEST(WeightedQuantizers, CoverTheirTypesAndRefuseTheRest) {
  for (GgmlType type : kTypes) EXPECT_TRUE(has_weighted_quantizer(type));
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kQ4_1, GgmlType::kQ2_K}) {
    EXPECT_FALSE(has_weighted_quantizer(type));
  }
  std::vector<float> row(256, 1.0f);
  std::vector<uint8_t> out(2048);
  try {
    quantize_row_weighted(GgmlType::kF16, row.data(), row.data(), out.data(), 256);
    ADD_FAILURE() << "F16 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kUnsupported);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("F16"));
  }
  try {
    quantize_row_weighted(GgmlType::kQ4_K, row.data(), row.data(), out.data(), 32);
    ADD_FAILURE() << "a partial super-block accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("256-value blocks"));
  }
}

// A K sub-block whose values moved after its super-block was quantized (as GPTQ's pushed errors
// move them) gets fields that fit the new values better, with every element rounded on its grid;
// d, dmin, the other sub-blocks and the codes are untouched.
TEST(WeightedQuantizers, SubBlockRefitFollowsMovedValuesAndTouchesNothingElse) {
  std::mt19937 rng(7);
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    const int sub_values = sub_block_values(type);
    const int subs = 256 / sub_values;
    const size_t bytes = gguf::ggml_type_info(type).type_size;
    double before = 0.0;
    double after = 0.0;
    for (int sub = 0; sub < subs; sub += 3) {
      std::vector<float> row = random_row(rng, sub);
      row.resize(256);
      std::vector<float> importance(256);
      for (int j = 0; j < 256; ++j) importance[j] = 0.5f + static_cast<float>(j % 5);
      std::vector<uint8_t> block(bytes);
      quantize_row_with_importance(type, row.data(), importance.data(), block.data(), 256);
      // Move the sub-block: a wider spread and an offset.
      for (int j = sub * sub_values; j < (sub + 1) * sub_values; ++j)
        row[j] = 1.7f * row[j] - 0.01f;
      std::vector<float> w(256);
      importance_weights(type, row.data(), importance.data(), w.data(), 256);
      auto sub_error = [&](const std::vector<uint8_t>& b) {
        double e = 0;
        for (int j = sub * sub_values; j < (sub + 1) * sub_values; ++j) {
          const CodeGrid grid = code_grid(type, b.data(), j);
          const double diff = static_cast<double>(grid.decode(grid.nearest(row[j]))) - row[j];
          e += w[j] * diff * diff;
        }
        return e;
      };
      std::vector<uint8_t> refitted = block;
      refit_sub_block(type, row.data(), importance.data(), refitted.data(), sub);
      const std::string what =
          std::string(gguf::ggml_type_name(type)) + " sub-block " + std::to_string(sub);
      // Never worse (the present fields are candidates), and better over the moved sub-blocks
      // together (one whose scale already took the largest field cannot grow much further).
      EXPECT_LE(sub_error(refitted), sub_error(block)) << what;
      before += sub_error(block);
      after += sub_error(refitted);
      for (int j = 0; j < 256; ++j) {
        const bool inside = j / sub_values == sub;
        EXPECT_EQ(get_code(type, refitted.data(), j), get_code(type, block.data(), j)) << what;
        if (!inside) {
          const CodeGrid a = code_grid(type, block.data(), j);
          const CodeGrid b = code_grid(type, refitted.data(), j);
          EXPECT_EQ(a.step, b.step) << what << " element " << j;
          EXPECT_EQ(a.offset, b.offset) << what << " element " << j;
        }
      }
      EXPECT_EQ(std::memcmp(refitted.data(), block.data(), 4), 0) << what << ": d or dmin moved";
    }
    std::printf("%s: moved sub-blocks' weighted error %.4g -> %.4g refitted\n",
                std::string(gguf::ggml_type_name(type)).c_str(), before, after);
    EXPECT_LT(after, 0.8 * before) << gguf::ggml_type_name(type);
  }
  std::vector<float> row(256, 0.1f);
  std::vector<uint8_t> block(256);
  EXPECT_THROW(refit_sub_block(GgmlType::kQ4_0, row.data(), row.data(), block.data(), 0), Error);
  EXPECT_THROW(refit_sub_block(GgmlType::kQ4_K, row.data(), row.data(), block.data(), 8), Error);
  EXPECT_THROW(refit_sub_block(GgmlType::kQ6_K, row.data(), row.data(), block.data(), -1), Error);
}

}  // namespace
}  // namespace llms::quantize
