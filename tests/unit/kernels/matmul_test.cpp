// matmul conformance: every ISA path of every weight type against
//   (a) the exact f32 product of the dequantized weights (quant::dequantize_row, double sums):
//       the gap is the cost of quantizing the activations, bounded per type below;
//   (b) the scalar kernel: the SIMD paths compute the same integer sums and may differ only by
//       f32 summation order (bound kSimdBound);
// on fresh random data (seed printed) with odd shapes, strides and thread counts; plus the
// argument checks. ISAs the CPU lacks are skipped, never run.
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/row_groups.h"
#include "kernels/row_pairs.h"
#include "quant/float_convert.h"
#include "quant/quant.h"
#include "util/error.h"

namespace llms::kernels {
namespace {

using gguf::GgmlType;
using testing::gaussian;
using testing::normalized_error;
using testing::rng_for;

// SIMD vs scalar kernel: same integers, different f32 summation order (and fused multiply-adds
// where the compiler contracts the per-block scaling).
constexpr double kSimdBound = 2e-6;

struct TypeCase {
  GgmlType type;
  // Bound on ||y - y_exact|| / ||y_exact|| pooled over the shapes below, for N(0, 1) weights
  // and activations, where y_exact uses the dequantized weights and unrounded activations.
  // Measured: 0.0050-0.0057 with the Q8 activations (blocks of 32, f32 scale), 0.0066-0.0072
  // with Q8_K (blocks of 256: coarser steps), i.e. about 0.7 of the bounds; docs/KERNELS.md.
  double act_bound;
};

const TypeCase kTypes[] = {
    {GgmlType::kQ5_0, 8e-3}, {GgmlType::kQ8_0, 8e-3}, {GgmlType::kQ4_K, 1e-2},
    {GgmlType::kQ6_K, 1e-2}, {GgmlType::kQ4_0, 8e-3}, {GgmlType::kF16, 1e-6},
    {GgmlType::kF32, 1e-6},  {GgmlType::kBF16, 1e-6}, {GgmlType::kQ4_1, 8e-3},
    {GgmlType::kQ5_1, 8e-3}, {GgmlType::kQ5_K, 1e-2},
};

// A weight matrix quantized from N(0, 1) values, rows padded by `pad` bytes.
struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<float> dequantized;  // n_rows x n_cols
  QuantMatrix matrix;
};

Weights make_weights(GgmlType type, int64_t n_rows, int64_t n_cols, size_t pad,
                     std::mt19937_64& rng) {
  Weights w;
  const size_t row_bytes = quant::quantized_row_bytes(type, n_cols) + pad;
  w.bytes.assign(row_bytes * static_cast<size_t>(n_rows) + 1, 0xEE);  // +1: odd alignment
  w.dequantized.resize(static_cast<size_t>(n_rows * n_cols));
  uint8_t* base = w.bytes.data() + 1;
  for (int64_t r = 0; r < n_rows; ++r) {
    const std::vector<float> row = gaussian(rng, static_cast<size_t>(n_cols));
    quant::quantize_row(type, row.data(), base + r * row_bytes, n_cols);
    quant::dequantize_row(type, base + r * row_bytes, w.dequantized.data() + r * n_cols, n_cols);
  }
  w.matrix = QuantMatrix{type, base, n_rows, n_cols, row_bytes};
  return w;
}

// y_exact[i * n_rows + r] = sum_c Wdq[r][c] * x[i * x_stride + c], in double.
std::vector<float> exact_product(const Weights& w, const std::vector<float>& x, int64_t m,
                                 int64_t x_stride) {
  const int64_t n_rows = w.matrix.n_rows;
  const int64_t n_cols = w.matrix.n_cols;
  std::vector<float> y(static_cast<size_t>(m * n_rows));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t r = 0; r < n_rows; ++r) {
      double sum = 0;
      for (int64_t c = 0; c < n_cols; ++c) {
        sum += static_cast<double>(w.dequantized[r * n_cols + c]) * x[i * x_stride + c];
      }
      y[i * n_rows + r] = static_cast<float>(sum);
    }
  }
  return y;
}

// Runs matmul with padded strides and checks the padding is untouched; returns y packed as
// m x n_rows.
std::vector<float> run_matmul(const QuantMatrix& w, const std::vector<float>& x, int64_t m,
                              int64_t x_stride, Isa isa, int n_threads) {
  const int64_t y_stride = w.n_rows + 3;
  const float sentinel = -12345.0f;
  std::vector<float> y(static_cast<size_t>(m * y_stride), sentinel);
  ThreadPool pool(n_threads);
  MatmulScratch scratch;
  matmul(w, x.data(), m, x_stride, y.data(), y_stride, pool, scratch, isa);
  std::vector<float> packed(static_cast<size_t>(m * w.n_rows));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t r = 0; r < y_stride; ++r) {
      const float v = y[i * y_stride + r];
      if (r < w.n_rows) {
        packed[i * w.n_rows + r] = v;
      } else {
        EXPECT_EQ(v, sentinel) << "matmul wrote outside y at row " << i << ", column " << r;
      }
    }
  }
  return packed;
}

class MatmulConformance : public ::testing::TestWithParam<std::tuple<TypeCase, Isa>> {};

// Squared error and squared reference norm, accumulated over many cases: a single short dot
// product can land near zero by chance, so the bound is applied to the pooled ratio (and, with
// slack, to each case that has enough outputs to be stable).
struct ErrorPool {
  double err = 0;
  double ref = 0;
  void add(const std::vector<float>& y, const std::vector<float>& y_ref) {
    for (size_t i = 0; i < y.size(); ++i) {
      err += (static_cast<double>(y[i]) - y_ref[i]) * (static_cast<double>(y[i]) - y_ref[i]);
      ref += static_cast<double>(y_ref[i]) * y_ref[i];
    }
  }
  double ratio() const { return ref > 0 ? std::sqrt(err / ref) : (err > 0 ? INFINITY : 0.0); }
};

TEST_P(MatmulConformance, MatchesReferenceOnOddShapes) {
  const auto [tc, isa] = GetParam();
  LLMS_SKIP_UNLESS_ISA(isa);
  const uint32_t block_size = gguf::ggml_type_info(tc.type).block_size;
  // Float weights take any n_cols: 301 exercises the SIMD column tail.
  const int64_t n_cols = block_size == 256 ? 512 : (block_size == 1 ? 301 : 320);
  ErrorPool act_pool;
  ErrorPool simd_act_pool;
  ErrorPool simd_pool;
  for (int64_t n_rows : {1, 7, 33}) {
    auto rng = rng_for(static_cast<uint64_t>(tc.type) * 1000 + static_cast<uint64_t>(n_rows));
    const Weights w = make_weights(tc.type, n_rows, n_cols, n_rows == 7 ? 5 : 0, rng);
    for (int64_t m : {1, 2, 3, 5, 8, 17, 40}) {
      SCOPED_TRACE("n_rows " + std::to_string(n_rows) + ", m " + std::to_string(m));
      const int64_t x_stride = n_cols + (m % 2 == 1 ? 7 : 0);
      const std::vector<float> x = gaussian(rng, static_cast<size_t>(m * x_stride));
      const std::vector<float> exact = exact_product(w, x, m, x_stride);
      const std::vector<float> scalar = run_matmul(w.matrix, x, m, x_stride, Isa::kScalar, 1);
      act_pool.add(scalar, exact);
      if (n_rows * m >= 64) {
        EXPECT_LE(normalized_error(scalar, exact), 2 * tc.act_bound);
      }
      if (isa != Isa::kScalar) {
        const std::vector<float> simd = run_matmul(w.matrix, x, m, x_stride, isa, 2);
        simd_pool.add(simd, scalar);
        simd_act_pool.add(simd, exact);
      }
    }
  }
  EXPECT_LE(act_pool.ratio(), tc.act_bound);
  if (isa != Isa::kScalar) {
    EXPECT_LE(simd_act_pool.ratio(), tc.act_bound);
    EXPECT_LE(simd_pool.ratio(), kSimdBound);
  }
  std::printf("[measure] %s %s: activation-rounding error %.3g (bound %.3g), vs scalar %.3g\n",
              std::string(gguf::ggml_type_name(tc.type)).c_str(),
              std::string(isa_name(isa)).c_str(), act_pool.ratio(), tc.act_bound,
              simd_pool.ratio());
}

// Raw random bytes reach every corner of a format (Q8_0's -128, Q6_K's scale -128, the full
// 6-bit scales and mins) that quantizers rarely produce; only the half-float scales are tamed
// so the sums stay finite. SIMD vs scalar only.
void randomize_blocks(GgmlType type, uint8_t* row, int64_t n_cols, std::mt19937_64& rng) {
  const auto& info = gguf::ggml_type_info(type);
  const size_t n_blocks = static_cast<size_t>(n_cols) / info.block_size;
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (size_t i = 0; i < n_blocks * info.type_size; ++i) row[i] = static_cast<uint8_t>(byte(rng));
  auto put_half = [&](uint8_t* p) {
    const uint16_t h = type == GgmlType::kBF16 ? quant::fp32_to_bf16(scale(rng) * 20)
                                               : quant::fp32_to_fp16(scale(rng) * 20);
    std::memcpy(p, &h, 2);
  };
  for (size_t b = 0; b < n_blocks; ++b) {
    uint8_t* block = row + b * info.type_size;
    switch (type) {
      case GgmlType::kF32: {
        const float v = scale(rng) * 20;
        std::memcpy(block, &v, 4);
        break;
      }
      case GgmlType::kF16:
      case GgmlType::kBF16:
        put_half(block);
        break;
      case GgmlType::kQ4_1:
      case GgmlType::kQ5_1:
      case GgmlType::kQ4_K:
      case GgmlType::kQ5_K:
        put_half(block);
        put_half(block + 2);
        break;
      case GgmlType::kQ6_K:
        put_half(block + 208);
        break;
      default:  // Q4_0, Q5_0, Q8_0: d first
        put_half(block);
        break;
    }
  }
}

TEST_P(MatmulConformance, SimdMatchesScalarOnRandomBlocks) {
  const auto [tc, isa] = GetParam();
  LLMS_SKIP_UNLESS_ISA(isa);
  if (isa == Isa::kScalar) GTEST_SKIP() << "scalar is the reference here";
  const int64_t n_cols = 768;
  const int64_t n_rows = 13;
  auto rng = rng_for(static_cast<uint64_t>(tc.type) + 77);
  const size_t row_bytes = quant::quantized_row_bytes(tc.type, n_cols);
  std::vector<uint8_t> bytes(row_bytes * n_rows);
  for (int64_t r = 0; r < n_rows; ++r) {
    randomize_blocks(tc.type, bytes.data() + r * row_bytes, n_cols, rng);
  }
  const QuantMatrix w{tc.type, bytes.data(), n_rows, n_cols, row_bytes};
  for (int64_t m : {1, 6}) {
    // Large activations so that the integer sums run near their limits.
    std::vector<float> x = gaussian(rng, static_cast<size_t>(m * n_cols), 30.0f);
    const std::vector<float> scalar = run_matmul(w, x, m, n_cols, Isa::kScalar, 1);
    const std::vector<float> simd = run_matmul(w, x, m, n_cols, isa, 1);
    EXPECT_LE(normalized_error(simd, scalar), kSimdBound) << "m " << m;
  }
}

// The work split must not change any result bit: each output is computed by one tile call
// whatever the thread count, and the GEMM tiles compute each pair as the GEMV ones do.
TEST_P(MatmulConformance, ThreadCountDoesNotChangeResults) {
  const auto [tc, isa] = GetParam();
  LLMS_SKIP_UNLESS_ISA(isa);
  const int64_t n_cols = 256;
  const int64_t n_rows = 37;
  auto rng = rng_for(static_cast<uint64_t>(tc.type) + 991);
  const Weights w = make_weights(tc.type, n_rows, n_cols, 0, rng);
  const int64_t m = 21;  // AVX2 Q4_0/Q5_0 GEMM tile of 32 rows: 2 full groups and a partial one
  const std::vector<float> x = gaussian(rng, static_cast<size_t>(m * n_cols));
  const std::vector<float> one = run_matmul(w.matrix, x, m, n_cols, isa, 1);
  for (int n_threads : {2, 3, 8}) {
    EXPECT_EQ(run_matmul(w.matrix, x, m, n_cols, isa, n_threads), one) << n_threads;
  }
  // Row i of a GEMM equals the GEMV of row i alone.
  for (int64_t i : {0, 4, 8, 15, 16, 20}) {
    const std::vector<float> xi(x.begin() + i * n_cols, x.begin() + (i + 1) * n_cols);
    const std::vector<float> gemv = run_matmul(w.matrix, xi, 1, n_cols, isa, 2);
    const std::vector<float> row(one.begin() + i * n_rows, one.begin() + (i + 1) * n_rows);
    EXPECT_EQ(gemv, row) << "activation row " << i;
  }
}

// Raw random blocks (full weight and scale ranges, large activations) through the GEMM tiles at odd
// shapes: every row of the GEMM equals that activation row's GEMV bit for bit, and the GEMM matches
// the scalar kernel. m = 2, 4, 5, 6, 7, 8 run the small-call tiles where a kernel has them (the
// AVX2 K-quants: up to 8 rows in one tile, 5-8 in two xmm quads of lanes). m = 45 spans a full
// 32-row tile (the AVX2 GEMMs of Q4_0, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K) plus partial groups, m = 77
// two full tiles and a group of 5 rows (and for F32/F16/BF16 one full 48-row tile and a partial
// one); n_rows = 13 leaves partial weight tiles (the 4-row GEMV tiles, the 8-row K-quant GEMM
// tiles); 768 columns = 3 K-quant super-blocks, 24 blocks of 32. The float GEMM's own edges are
// covered by MatmulFloatGemm below.
TEST_P(MatmulConformance, GemmRowsEqualGemvOnRandomBlocks) {
  const auto [tc, isa] = GetParam();
  LLMS_SKIP_UNLESS_ISA(isa);
  const int64_t n_cols = 768;
  const int64_t n_rows = 13;
  auto rng = rng_for(static_cast<uint64_t>(tc.type) + 4242);
  const size_t row_bytes = quant::quantized_row_bytes(tc.type, n_cols);
  std::vector<uint8_t> bytes(row_bytes * n_rows);
  for (int64_t r = 0; r < n_rows; ++r) {
    randomize_blocks(tc.type, bytes.data() + r * row_bytes, n_cols, rng);
  }
  const QuantMatrix w{tc.type, bytes.data(), n_rows, n_cols, row_bytes};
  for (int64_t m : {2, 4, 5, 6, 7, 8, 45, 77}) {
    SCOPED_TRACE("m " + std::to_string(m));
    const std::vector<float> x = gaussian(rng, static_cast<size_t>(m * n_cols), 30.0f);
    const std::vector<float> gemm = run_matmul(w, x, m, n_cols, isa, 2);
    if (isa != Isa::kScalar) {
      const std::vector<float> scalar = run_matmul(w, x, m, n_cols, Isa::kScalar, 1);
      EXPECT_LE(normalized_error(gemm, scalar), kSimdBound);
    }
    for (int64_t i = 0; i < m; ++i) {
      const std::vector<float> xi(x.begin() + i * n_cols, x.begin() + (i + 1) * n_cols);
      const std::vector<float> gemv = run_matmul(w, xi, 1, n_cols, isa, 1);
      const std::vector<float> row(gemm.begin() + i * n_rows, gemm.begin() + (i + 1) * n_rows);
      ASSERT_EQ(gemv, row) << "activation row " << i;
    }
  }
}

// Row lengths the shapes above miss, through the GEMV paths that depend on them: a short row
// whose block count is not a multiple of 4 (the AVX-512 Q8_0 row-by-row GEMV takes 4 blocks per
// pass, then a tail) and a long row of more than 64 super-blocks (the AVX-512 K-quant GEMVs make
// the activation group sums 64 super-blocks at a time) or, for the 32-value formats, past the
// row-by-row limit. n_rows = 11 crosses the 8-row GEMV call. Every GEMV equals its GEMM row bit
// for bit, and the GEMM matches the scalar kernel.
TEST_P(MatmulConformance, ShortAndLongRowsEqualGemmAndScalar) {
  const auto [tc, isa] = GetParam();
  LLMS_SKIP_UNLESS_ISA(isa);
  const int64_t block_size = gguf::ggml_type_info(tc.type).block_size;
  const int64_t n_rows = 11;
  const int64_t short_blocks = block_size == 256 ? 5 : 43;
  const int64_t long_blocks = block_size == 256 ? 67 : 539;
  for (int64_t n_blocks : {short_blocks, long_blocks}) {
    const int64_t n_cols = n_blocks * (block_size == 1 ? 32 : block_size) + (block_size == 1);
    SCOPED_TRACE("n_cols " + std::to_string(n_cols));
    auto rng = rng_for(static_cast<uint64_t>(tc.type) * 31 + static_cast<uint64_t>(n_cols));
    const Weights w = make_weights(tc.type, n_rows, n_cols, 0, rng);
    const int64_t m = 3;
    const std::vector<float> x = gaussian(rng, static_cast<size_t>(m * n_cols));
    const std::vector<float> gemm = run_matmul(w.matrix, x, m, n_cols, isa, 2);
    if (isa != Isa::kScalar) {
      // f32 summation error grows like the square root of the blocks summed: the bound of the
      // other tests (rows of ~10-30 blocks) scaled to these rows (Q4_1/Q5_1 rows of 539 blocks
      // measured up to 2.2e-6 against 2e-6).
      const double bound =
          kSimdBound * std::max(1.0, std::sqrt(static_cast<double>(n_blocks) / 32));
      const std::vector<float> scalar = run_matmul(w.matrix, x, m, n_cols, Isa::kScalar, 1);
      EXPECT_LE(normalized_error(gemm, scalar), bound);
    }
    for (int64_t i = 0; i < m; ++i) {
      const std::vector<float> xi(x.begin() + i * n_cols, x.begin() + (i + 1) * n_cols);
      const std::vector<float> gemv = run_matmul(w.matrix, xi, 1, n_cols, isa, 2);
      const std::vector<float> row(gemm.begin() + i * n_rows, gemm.begin() + (i + 1) * n_rows);
      ASSERT_EQ(gemv, row) << "activation row " << i;
    }
  }
}

// F32/F16/BF16 weights through the edges of the AVX2 float GEMM: tiles of 16 weight rows (panels
// of 4) x 48 activation rows (micro-tiles of 3; 3q + 1 rows end in 2 + 2), k-chunks of at most
// 1024 columns with the partial sums kept between chunks, BF16 panels widened once when a tile
// has more than 9 activation rows, and the scalar column tail. Shapes: n_cols 5 (no vector
// part), 8, 301 (tail 5), 1027 (two chunks, tail 3) and 2053 (three chunks, tail 5); n_rows 1,
// 13, 35, 50 (partial panels and tiles; 13 also sends 2 threads down the activation-row split);
// m from 1 to 97 (one, two and three tiles of 48 rows, partial micro-tiles). Padded, oddly
// aligned weight rows, odd activation strides, 1 to 3 threads. Every result must match the
// scalar kernel, and sampled GEMM rows (the first, last and tile-boundary ones) must equal
// that activation row's GEMV bit for bit.
class MatmulFloatGemm : public ::testing::TestWithParam<std::tuple<GgmlType, Isa>> {};

TEST_P(MatmulFloatGemm, EdgeShapesMatchScalarAndGemv) {
  const auto [type, isa] = GetParam();
  LLMS_SKIP_UNLESS_ISA(isa);
  if (isa == Isa::kScalar) GTEST_SKIP() << "scalar is the reference here";
  ErrorPool pool;
  int n_cases = 0;
  for (int64_t n_cols : {5, 8, 301, 1027, 2053}) {
    for (int64_t n_rows : {1, 13, 35, 50}) {
      auto rng = rng_for(static_cast<uint64_t>(type) * 7919 + static_cast<uint64_t>(n_cols) * 101 +
                         static_cast<uint64_t>(n_rows));
      const Weights w = make_weights(type, n_rows, n_cols, n_rows % 2 == 1 ? 6 : 0, rng);
      for (int64_t m : {1, 2, 4, 5, 7, 33, 50, 97}) {
        SCOPED_TRACE("n_cols " + std::to_string(n_cols) + ", n_rows " + std::to_string(n_rows) +
                     ", m " + std::to_string(m));
        const int64_t x_stride = n_cols + (m % 2 == 1 ? 3 : 0);
        const std::vector<float> x = gaussian(rng, static_cast<size_t>(m * x_stride));
        const std::vector<float> scalar = run_matmul(w.matrix, x, m, x_stride, Isa::kScalar, 1);
        const int n_threads = 1 + static_cast<int>(m % 3);
        const std::vector<float> simd = run_matmul(w.matrix, x, m, x_stride, isa, n_threads);
        pool.add(simd, scalar);
        if (n_rows * m >= 64) {
          EXPECT_LE(normalized_error(simd, scalar), kSimdBound);
        }
        ++n_cases;
        if (m == 1) continue;
        for (int64_t i : {int64_t{0}, int64_t{2}, int64_t{3}, int64_t{47}, int64_t{48}, m - 1}) {
          if (i >= m) continue;
          const std::vector<float> xi(x.begin() + i * x_stride, x.begin() + i * x_stride + n_cols);
          const std::vector<float> gemv = run_matmul(w.matrix, xi, 1, n_cols, isa, 1);
          const std::vector<float> row(simd.begin() + i * n_rows, simd.begin() + (i + 1) * n_rows);
          ASSERT_EQ(gemv, row) << "activation row " << i;
        }
      }
    }
  }
  EXPECT_EQ(n_cases, 5 * 4 * 8);
  EXPECT_LE(pool.ratio(), kSimdBound);
  std::printf("[measure] %s %s float GEMM edges: vs scalar %.3g over %d shapes\n",
              std::string(gguf::ggml_type_name(type)).c_str(), std::string(isa_name(isa)).c_str(),
              pool.ratio(), n_cases);
}

std::string type_isa_case_name(const ::testing::TestParamInfo<std::tuple<GgmlType, Isa>>& info) {
  return std::string(gguf::ggml_type_name(std::get<0>(info.param))) + "_" +
         std::string(isa_name(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(FloatTypes, MatmulFloatGemm,
                         ::testing::Combine(::testing::Values(GgmlType::kF32, GgmlType::kF16,
                                                              GgmlType::kBF16),
                                            ::testing::Values(Isa::kAvx2, Isa::kAvx512)),
                         type_isa_case_name);

std::string case_name(const ::testing::TestParamInfo<std::tuple<TypeCase, Isa>>& info) {
  return std::string(gguf::ggml_type_name(std::get<0>(info.param).type)) + "_" +
         std::string(isa_name(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatmulConformance,
                         ::testing::Combine(::testing::ValuesIn(kTypes),
                                            ::testing::Values(Isa::kScalar, Isa::kAvx2,
                                                              Isa::kAvx512)),
                         case_name);

TEST(Matmul, SupportsTheRegisteredTypesOnly) {
  for (const TypeCase& tc : kTypes) EXPECT_TRUE(matmul_supports(tc.type));
  EXPECT_FALSE(matmul_supports(GgmlType::kQ2_K));
  EXPECT_FALSE(matmul_supports(GgmlType::kIQ4_NL));
  EXPECT_FALSE(matmul_supports(GgmlType::kI32));
}

Error::Kind error_kind(const QuantMatrix& w, const float* x, int64_t m, int64_t x_stride, float* y,
                       int64_t y_stride, Isa isa = Isa::kScalar) {
  ThreadPool pool(1);
  MatmulScratch scratch;
  try {
    matmul(w, x, m, x_stride, y, y_stride, pool, scratch, isa);
  } catch (const Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << "matmul accepted a bad call";
  return Error::Kind::kIo;
}

TEST(Matmul, RefusesBadCalls) {
  std::vector<uint8_t> bytes(4096);
  std::vector<float> x(1024);
  std::vector<float> y(1024);
  const QuantMatrix good{GgmlType::kQ8_0, bytes.data(), 4, 64, 68};
  QuantMatrix w = good;
  w.type = GgmlType::kQ2_K;
  EXPECT_EQ(error_kind(w, x.data(), 1, 64, y.data(), 4), Error::Kind::kUnsupported);
  w = good;
  w.n_cols = 48;  // not whole blocks
  EXPECT_EQ(error_kind(w, x.data(), 1, 64, y.data(), 4), Error::Kind::kInvalidArgument);
  w = good;
  w.row_bytes = 67;
  EXPECT_EQ(error_kind(w, x.data(), 1, 64, y.data(), 4), Error::Kind::kInvalidArgument);
  EXPECT_EQ(error_kind(good, x.data(), 2, 63, y.data(), 4), Error::Kind::kInvalidArgument);
  EXPECT_EQ(error_kind(good, x.data(), 2, 64, y.data(), 3), Error::Kind::kInvalidArgument);
  EXPECT_EQ(error_kind(good, x.data(), -1, 64, y.data(), 4), Error::Kind::kInvalidArgument);
  EXPECT_EQ(error_kind(good, nullptr, 1, 64, y.data(), 4), Error::Kind::kInvalidArgument);
  for (Isa isa : testing::all_isas()) {
    if (!isa_supported(isa)) {
      EXPECT_EQ(error_kind(good, x.data(), 1, 64, y.data(), 4, isa), Error::Kind::kInvalidArgument)
          << "an unsupported ISA must be refused, not run: " << isa_name(isa);
    }
  }
}

TEST(Matmul, EmptyShapesAreNoOps) {
  ThreadPool pool(2);
  MatmulScratch scratch;
  std::vector<float> y(8, 7.0f);
  const QuantMatrix w{GgmlType::kQ8_0, nullptr, 0, 64, 68};
  matmul(w, nullptr, 3, 64, y.data(), 4, pool, scratch);
  EXPECT_EQ(y, std::vector<float>(8, 7.0f));
  const QuantMatrix no_cols{GgmlType::kQ4_K, nullptr, 2, 0, 0};
  const float x = 0;
  matmul(no_cols, &x, 1, 0, y.data(), 2, pool, scratch);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], 7.0f);
}

TEST(Matmul, ReservedScratchDoesNotGrow) {
  auto rng = rng_for(5);
  ThreadPool pool(2);
  MatmulScratch scratch;
  scratch.reserve(16, 1024);
  const size_t reserved = scratch.capacity_bytes();
  EXPECT_GT(reserved, 0u);
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ5_0, GgmlType::kQ6_K}) {
    for (int64_t n_cols : {256, 1024}) {
      const Weights w = make_weights(type, 5, n_cols, 0, rng);
      const std::vector<float> x = gaussian(rng, static_cast<size_t>(16 * n_cols));
      std::vector<float> y(16 * 5);
      matmul(w.matrix, x.data(), 16, n_cols, y.data(), 5, pool, scratch);
      EXPECT_EQ(scratch.capacity_bytes(), reserved);
    }
  }
}

// Matrices in 16-row groups (kernels/row_groups.h). On an ISA with grouped kernels (AVX2 for the
// legacy types, AVX-512) a grouped matrix must give bit for bit what the row layout gives on
// that ISA, GEMV and GEMM, at every activation-row count of the GEMM tiles (1..16: the AVX2
// tiles take 16, the AVX-512 ones 8 or 16) and past it; elsewhere (the scalar fallback) it must
// match the scalar kernel. Row counts cover a partial group (1, 15, 17, 45), whole groups (16,
// 48) and, with 2 threads (odd m), a split over activation rows (few row tiles; 17 and 33 split
// at a 16-row grain); the source rows are padded and oddly aligned, and nothing outside y's
// n_rows columns is written.
class MatmulRowGroups : public ::testing::TestWithParam<std::tuple<GgmlType, Isa>> {};

TEST_P(MatmulRowGroups, EqualTheRowLayout) {
  const auto [type, isa] = GetParam();
  LLMS_SKIP_UNLESS_ISA(isa);
  const bool has_kernels = group_rows_pays(type, isa);
  ErrorPool scalar_pool;
  int n_cases = 0;
  const int64_t block = gguf::ggml_type_info(type).block_size;
  for (int64_t n_cols : {block, 3 * block, 28 * block}) {
    for (int64_t n_rows : {1, 15, 16, 17, 45, 48}) {
      auto rng = rng_for(static_cast<uint64_t>(type) * 131 + static_cast<uint64_t>(n_cols) * 7 +
                         static_cast<uint64_t>(n_rows));
      const Weights w = make_weights(type, n_rows, n_cols, n_rows % 2 == 1 ? 5 : 0, rng);
      std::vector<uint8_t> store(grouped_bytes(w.matrix) + 1);
      const QuantMatrix grouped = group_rows(w.matrix, store.data() + 1);
      ASSERT_EQ(grouped.layout, WeightLayout::kRowGroups16);
      for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 20, 33}) {
        SCOPED_TRACE("n_cols " + std::to_string(n_cols) + ", n_rows " + std::to_string(n_rows) +
                     ", m " + std::to_string(m));
        const int64_t x_stride = n_cols + (m % 2 == 1 ? 3 : 0);
        const std::vector<float> x = gaussian(rng, static_cast<size_t>(m * x_stride));
        const int n_threads = 1 + static_cast<int>(m % 2);
        const std::vector<float> got = run_matmul(grouped, x, m, x_stride, isa, n_threads);
        if (has_kernels) {
          ASSERT_EQ(got, run_matmul(w.matrix, x, m, x_stride, isa, n_threads));
        }
        scalar_pool.add(got, run_matmul(w.matrix, x, m, x_stride, Isa::kScalar, 1));
        ++n_cases;
      }
    }
  }
  // Pooled: one short dot can land near zero by chance (as in MatchesReferenceOnOddShapes).
  EXPECT_LE(scalar_pool.ratio(), kSimdBound);
  EXPECT_EQ(n_cases, 3 * 6 * 19);
}

// matmul_many over `matrices` (a layer's q/k/v-like targets, of any layouts) gives each target
// what matmul gives it, GEMV and GEMM (m = 1, 5).
void expect_fused_equal_single_calls(const std::vector<QuantMatrix>& matrices, int64_t n_cols,
                                     Isa isa, std::mt19937_64& rng) {
  ThreadPool pool(2);
  MatmulScratch scratch;
  const size_t n = matrices.size();
  for (int64_t m : {1, 5}) {
    const std::vector<float> x = gaussian(rng, static_cast<size_t>(m * n_cols));
    std::vector<std::vector<float>> fused(n), single(n);
    std::vector<MatmulTarget> targets;
    for (size_t j = 0; j < n; ++j) {
      fused[j].assign(static_cast<size_t>(m * matrices[j].n_rows), 0.0f);
      single[j] = fused[j];
      targets.push_back({matrices[j], fused[j].data(), matrices[j].n_rows});
    }
    matmul_many(targets, x.data(), m, n_cols, pool, scratch, isa);
    for (size_t j = 0; j < n; ++j) {
      matmul(matrices[j], x.data(), m, n_cols, single[j].data(), matrices[j].n_rows, pool, scratch,
             isa);
      EXPECT_EQ(fused[j], single[j]) << "target " << j << ", m " << m;
    }
  }
}

// matmul_many over grouped q/k/v-like targets, plus one in the row layout (whose GEMM may read
// interleaved activation groups where the grouped kernels read rows), gives each target what
// matmul gives it.
TEST_P(MatmulRowGroups, FusedTargetsEqualSingleCalls) {
  const auto [type, isa] = GetParam();
  LLMS_SKIP_UNLESS_ISA(isa);
  auto rng = rng_for(static_cast<uint64_t>(type) * 977);
  const int64_t n_cols = 4 * gguf::ggml_type_info(type).block_size;
  std::vector<Weights> weights;
  std::vector<std::vector<uint8_t>> stores;
  std::vector<QuantMatrix> grouped;
  for (int64_t n_rows : {64, 32, 33}) {
    weights.push_back(make_weights(type, n_rows, n_cols, 0, rng));
    stores.emplace_back(grouped_bytes(weights.back().matrix));
    grouped.push_back(group_rows(weights.back().matrix, stores.back().data()));
  }
  grouped.push_back(weights[0].matrix);
  expect_fused_equal_single_calls(grouped, n_cols, isa, rng);
}

INSTANTIATE_TEST_SUITE_P(GroupedTypes, MatmulRowGroups,
                         ::testing::Combine(::testing::Values(GgmlType::kQ4_0, GgmlType::kQ5_0,
                                                              GgmlType::kQ8_0, GgmlType::kQ4_K,
                                                              GgmlType::kQ6_K),
                                            ::testing::ValuesIn(testing::all_isas())),
                         type_isa_case_name);

TEST(MatmulRowGroups, RefusesWhatHasNoLayout) {
  auto rng = rng_for(11);
  const Weights k = make_weights(GgmlType::kQ5_K, 16, 256, 0, rng);
  std::vector<uint8_t> store(16 * 256 * 4);
  EXPECT_FALSE(group_rows_supported(GgmlType::kQ5_K));
  EXPECT_FALSE(group_rows_pays(GgmlType::kQ5_K, Isa::kAvx512));
  EXPECT_FALSE(group_rows_pays(GgmlType::kQ6_K, Isa::kAvx2));
  EXPECT_EQ(group_rows_pays(GgmlType::kQ6_K, Isa::kAvx512), isa_supported(Isa::kAvx512));
  EXPECT_EQ(group_rows_pays(GgmlType::kQ5_0, Isa::kAvx2), isa_supported(Isa::kAvx2));
  EXPECT_FALSE(group_rows_pays(GgmlType::kQ4_K, Isa::kAvx2));
  EXPECT_EQ(group_rows_pays(GgmlType::kQ5_0, Isa::kAvx512), isa_supported(Isa::kAvx512));
  EXPECT_THROW(group_rows(k.matrix, store.data()), Error);
  const Weights q = make_weights(GgmlType::kQ8_0, 16, 64, 0, rng);
  const QuantMatrix grouped = group_rows(q.matrix, store.data());
  EXPECT_THROW(group_rows(grouped, store.data()), Error);  // already grouped
  // A grouped matrix must have exact row bytes, and a type with the layout.
  ThreadPool pool(1);
  MatmulScratch scratch;
  std::vector<float> x(64, 1.0f), y(16);
  QuantMatrix padded = grouped;
  padded.row_bytes += 2;
  EXPECT_THROW(matmul(padded, x.data(), 1, 64, y.data(), 16, pool, scratch), Error);
  QuantMatrix k_grouped = k.matrix;
  k_grouped.layout = WeightLayout::kRowGroups16;
  EXPECT_THROW(matmul(k_grouped, x.data(), 1, 256, y.data(), 16, pool, scratch), Error);
}

// Row pairs (kernels/row_pairs.h): a paired matrix gives bit for bit what the row layout gives
// with the AVX2 kernels (on AVX2 and AVX-512 CPUs) or the scalar ones, GEMV and GEMM at every
// tile height (m = 1..17, 20, 33: the 8-row activation groups, partial and whole, and a split
// over threads), with 2 to 34 rows (whole and partial 8-row GEMM tiles); the source rows are
// padded for some shapes, and nothing outside y's n_rows columns is written.
class MatmulRowPairs : public ::testing::TestWithParam<std::tuple<GgmlType, Isa>> {};

TEST_P(MatmulRowPairs, EqualTheRowLayout) {
  const auto [type, isa] = GetParam();
  LLMS_SKIP_UNLESS_ISA(isa);
  const Isa row_isa = isa == Isa::kScalar ? Isa::kScalar : Isa::kAvx2;
  int n_cases = 0;
  for (int64_t n_cols : {256, 768, 1536}) {
    for (int64_t n_rows : {2, 6, 16, 18, 34}) {
      auto rng = rng_for(static_cast<uint64_t>(type) * 151 + static_cast<uint64_t>(n_cols) * 5 +
                         static_cast<uint64_t>(n_rows));
      const Weights w = make_weights(type, n_rows, n_cols, n_rows % 4 == 2 ? 7 : 0, rng);
      std::vector<uint8_t> store(paired_bytes(w.matrix) + 1);
      const QuantMatrix paired = pair_rows(w.matrix, store.data() + 1);
      ASSERT_EQ(paired.layout, WeightLayout::kRowPairs);
      for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 20, 33}) {
        SCOPED_TRACE("n_cols " + std::to_string(n_cols) + ", n_rows " + std::to_string(n_rows) +
                     ", m " + std::to_string(m));
        const int64_t x_stride = n_cols + (m % 2 == 1 ? 3 : 0);
        const std::vector<float> x = gaussian(rng, static_cast<size_t>(m * x_stride));
        const int n_threads = 1 + static_cast<int>(m % 2);
        const std::vector<float> got = run_matmul(paired, x, m, x_stride, isa, n_threads);
        ASSERT_EQ(got, run_matmul(w.matrix, x, m, x_stride, row_isa, n_threads));
        ++n_cases;
      }
    }
  }
  EXPECT_EQ(n_cases, 3 * 5 * 19);
}

// matmul_many over paired q/k/v-like targets and one in the row layout gives each target what
// matmul gives it (the fused pass starts every matrix's tiles at a pair).
TEST_P(MatmulRowPairs, FusedTargetsEqualSingleCalls) {
  const auto [type, isa] = GetParam();
  LLMS_SKIP_UNLESS_ISA(isa);
  auto rng = rng_for(static_cast<uint64_t>(type) * 983);
  const int64_t n_cols = 1536;
  std::vector<Weights> weights;
  std::vector<std::vector<uint8_t>> stores;
  std::vector<QuantMatrix> matrices;
  for (int64_t n_rows : {64, 2, 30}) {
    weights.push_back(make_weights(type, n_rows, n_cols, 0, rng));
    stores.emplace_back(paired_bytes(weights.back().matrix));
    matrices.push_back(pair_rows(weights.back().matrix, stores.back().data()));
  }
  matrices.push_back(weights[0].matrix);
  expect_fused_equal_single_calls(matrices, n_cols, isa, rng);
}

INSTANTIATE_TEST_SUITE_P(PairedTypes, MatmulRowPairs,
                         ::testing::Combine(::testing::Values(GgmlType::kQ4_K, GgmlType::kQ5_K,
                                                              GgmlType::kQ6_K),
                                            ::testing::ValuesIn(testing::all_isas())),
                         type_isa_case_name);

TEST(MatmulRowPairs, PaysForShortKQuantRowsOnAvx2Only) {
  auto rng = rng_for(13);
  const bool avx2 = isa_supported(Isa::kAvx2);
  const Weights q4k = make_weights(GgmlType::kQ4_K, 4, 1536, 0, rng);
  EXPECT_EQ(pair_rows_pays(q4k.matrix, Isa::kAvx2), avx2);
  EXPECT_FALSE(pair_rows_pays(q4k.matrix, Isa::kScalar));
  EXPECT_FALSE(pair_rows_pays(q4k.matrix, Isa::kAvx512));
  EXPECT_EQ(pair_rows_pays(make_weights(GgmlType::kQ5_K, 2, 256, 0, rng).matrix, Isa::kAvx2), avx2);
  // Long rows, an odd number of rows and other types keep the row layout.
  EXPECT_FALSE(pair_rows_pays(make_weights(GgmlType::kQ4_K, 2, 1792, 0, rng).matrix, Isa::kAvx2));
  EXPECT_FALSE(pair_rows_pays(make_weights(GgmlType::kQ4_K, 3, 256, 0, rng).matrix, Isa::kAvx2));
  EXPECT_EQ(pair_rows_pays(make_weights(GgmlType::kQ6_K, 2, 1536, 0, rng).matrix, Isa::kAvx2),
            avx2);
  EXPECT_FALSE(pair_rows_pays(make_weights(GgmlType::kQ6_K, 2, 8960, 0, rng).matrix, Isa::kAvx2));
  EXPECT_FALSE(pair_rows_pays(make_weights(GgmlType::kQ5_0, 2, 256, 0, rng).matrix, Isa::kAvx2));
  EXPECT_FALSE(pair_rows_pays(make_weights(GgmlType::kQ8_0, 2, 256, 0, rng).matrix, Isa::kAvx2));
}

TEST(MatmulRowPairs, RefusesWhatHasNoLayout) {
  auto rng = rng_for(17);
  std::vector<uint8_t> store(8 * 1536);
  const Weights q8 = make_weights(GgmlType::kQ8_0, 2, 256, 0, rng);
  EXPECT_THROW(pair_rows(q8.matrix, store.data()), Error);
  const Weights odd = make_weights(GgmlType::kQ4_K, 3, 256, 0, rng);
  EXPECT_THROW(pair_rows(odd.matrix, store.data()), Error);
  const Weights q4k = make_weights(GgmlType::kQ4_K, 4, 256, 0, rng);
  const QuantMatrix paired = pair_rows(q4k.matrix, store.data());
  EXPECT_THROW(pair_rows(paired, store.data()), Error);  // already paired
  EXPECT_THROW(group_rows(paired, store.data()), Error);
  // A paired matrix must have exact row bytes, an even number of rows and a type with the
  // layout.
  ThreadPool pool(1);
  MatmulScratch scratch;
  std::vector<float> x(256, 1.0f), y(4);
  QuantMatrix padded = paired;
  padded.row_bytes += 2;
  EXPECT_THROW(matmul(padded, x.data(), 1, 256, y.data(), 4, pool, scratch), Error);
  QuantMatrix three = paired;
  three.n_rows = 3;
  EXPECT_THROW(matmul(three, x.data(), 1, 256, y.data(), 4, pool, scratch), Error);
  QuantMatrix q8_paired = q8.matrix;
  q8_paired.layout = WeightLayout::kRowPairs;
  EXPECT_THROW(matmul(q8_paired, x.data(), 1, 256, y.data(), 2, pool, scratch), Error);
  EXPECT_NO_THROW(matmul(paired, x.data(), 1, 256, y.data(), 4, pool, scratch));
}

}  // namespace
}  // namespace llms::kernels
