// matmul_many: every target gets, bit for bit, what its own matmul call gives (same kernels, same
// quantized activations, same per-row arithmetic), whether the call is fused (one activation
// form) or falls back to one matmul per target (mixed forms), for GEMV and GEMM, odd row counts,
// strides and pool sizes; and the argument checks (n_cols mismatch names the target).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/matmul.h"
#include "quant/quant.h"
#include "util/error.h"

namespace llms::kernels {
namespace {

using gguf::GgmlType;
using testing::gaussian;
using testing::rng_for;

struct Matrix {
  std::vector<uint8_t> bytes;
  QuantMatrix w;
};

Matrix random_matrix(GgmlType type, int64_t n_rows, int64_t n_cols, std::mt19937_64& rng) {
  Matrix m;
  const size_t row_bytes = quant::quantized_row_bytes(type, n_cols);
  m.bytes.resize(row_bytes * static_cast<size_t>(n_rows));
  for (int64_t r = 0; r < n_rows; ++r) {
    const std::vector<float> row = gaussian(rng, static_cast<size_t>(n_cols));
    quant::quantize_row(type, row.data(), m.bytes.data() + r * row_bytes, n_cols);
  }
  m.w = QuantMatrix{type, m.bytes.data(), n_rows, n_cols, row_bytes};
  return m;
}

struct Case {
  std::vector<GgmlType> types;
  std::vector<int64_t> rows;
  int64_t n_cols;
};

void check_case(const Case& c, int64_t m, int threads, Isa isa) {
  SCOPED_TRACE("m " + std::to_string(m) + ", threads " + std::to_string(threads) + ", isa " +
               std::string(isa_name(isa)) + ", first type " +
               std::string(gguf::ggml_type_name(c.types[0])));
  auto rng = rng_for(static_cast<uint64_t>(m * 131 + threads * 7 + c.types.size()));
  std::vector<Matrix> matrices;
  for (size_t j = 0; j < c.types.size(); ++j) {
    matrices.push_back(random_matrix(c.types[j], c.rows[j], c.n_cols, rng));
  }
  const int64_t x_stride = c.n_cols + 3;
  const std::vector<float> x = gaussian(rng, static_cast<size_t>(m * x_stride));
  ThreadPool pool(threads);
  MatmulScratch scratch;

  std::vector<std::vector<float>> expected(matrices.size());
  std::vector<std::vector<float>> got(matrices.size());
  std::vector<MatmulTarget> targets;
  for (size_t j = 0; j < matrices.size(); ++j) {
    const int64_t y_stride = c.rows[j] + 5;
    // NaN everywhere, so an output row the call forgets (or a stray write) cannot match.
    expected[j].assign(static_cast<size_t>(m * y_stride), std::nanf(""));
    got[j] = expected[j];
    matmul(matrices[j].w, x.data(), m, x_stride, expected[j].data(), y_stride, pool, scratch, isa);
    targets.push_back(MatmulTarget{matrices[j].w, got[j].data(), y_stride});
  }
  matmul_many(targets, x.data(), m, x_stride, pool, scratch, isa);
  for (size_t j = 0; j < matrices.size(); ++j) {
    const int64_t y_stride = m == 1 ? c.rows[j] : c.rows[j] + 5;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t r = 0; r < c.rows[j]; ++r) {
        const size_t at = static_cast<size_t>(i * y_stride + r);
        ASSERT_EQ(std::memcmp(&got[j][at], &expected[j][at], sizeof(float)), 0)
            << "target " << j << " row " << i << " col " << r << ": " << got[j][at] << " vs "
            << expected[j][at];
      }
    }
    // Past the rows each target owns, nothing was written (NaN stays NaN) in GEMM layout.
    if (m > 1) {
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t r = c.rows[j]; r < c.rows[j] + 5; ++r) {
          EXPECT_TRUE(std::isnan(got[j][static_cast<size_t>(i * (c.rows[j] + 5) + r)]));
        }
      }
    }
  }
}

TEST(MatmulMany, EveryTargetMatchesItsOwnMatmulBitForBit) {
  const std::vector<Case> cases = {
      // q/k/v of one type (fused), with row counts that do not fill the last tile.
      {{GgmlType::kQ5_0, GgmlType::kQ5_0, GgmlType::kQ5_0}, {67, 17, 17}, 96},
      // Q5_0 and Q8_0 share the activation form: fused across types.
      {{GgmlType::kQ5_0, GgmlType::kQ8_0, GgmlType::kQ4_0}, {40, 9, 13}, 64},
      // gate/up of a K-quant.
      {{GgmlType::kQ4_K, GgmlType::kQ6_K}, {37, 29}, 256},
      // Mixed activation forms (Q8 blocks of 32 vs Q8_K): one matmul per target.
      {{GgmlType::kQ5_0, GgmlType::kQ4_K}, {21, 11}, 256},
      // Float weights (the caller's f32 activations).
      {{GgmlType::kF16, GgmlType::kF32, GgmlType::kBF16}, {19, 7, 3}, 40},
      // One target, and a matrix with a single row.
      {{GgmlType::kQ8_0}, {1}, 32},
  };
  for (Isa isa : testing::all_isas()) {
    if (!isa_supported(isa)) continue;
    for (const Case& c : cases) {
      for (int64_t m : {1, 2, 9, 33}) {
        for (int threads : {1, 2, 3}) check_case(c, m, threads, isa);
      }
    }
  }
}

TEST(MatmulMany, RefusesMismatchedColumnsNamingTheTarget) {
  auto rng = rng_for(91);
  const Matrix a = random_matrix(GgmlType::kQ8_0, 8, 64, rng);
  const Matrix b = random_matrix(GgmlType::kQ8_0, 8, 96, rng);
  std::vector<float> x(2 * 96, 1.0f);
  std::vector<float> ya(16, -1.0f);
  std::vector<float> yb(16, -1.0f);
  const MatmulTarget targets[] = {{a.w, ya.data(), 8}, {b.w, yb.data(), 8}};
  ThreadPool pool(2);
  MatmulScratch scratch;
  try {
    matmul_many(targets, x.data(), 2, 96, pool, scratch);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("target 1"), std::string::npos) << e.what();
  }
  // Nothing ran.
  for (float v : ya) EXPECT_EQ(v, -1.0f);
  for (float v : yb) EXPECT_EQ(v, -1.0f);
}

TEST(MatmulMany, NoTargetsIsANoOp) {
  ThreadPool pool(2);
  MatmulScratch scratch;
  float x = 1.0f;
  EXPECT_NO_THROW(matmul_many({}, &x, 1, 1, pool, scratch));
}

}  // namespace
}  // namespace llms::kernels
