// kernels/matmul_kernels (private): the interface between the matmul driver (matmul.cpp) and
// the per-ISA tile kernels (matmul_*_scalar.cpp, *_avx2.cpp, *_avx512.cpp).
//
// A tile kernel computes y[i * y_stride + r] = dot(weight row r, activation row i) for
// r < n_w and i < n_a, where n_w and n_a are at most the kernel's tile size (the driver
// passes smaller tiles at the edges). It reads whole rows of n_cols values; the driver has
// validated shapes, so kernels do no checks. Weight rows are raw GGUF blocks at any alignment.
//
// Activations come in one of three forms, fixed per weight type (every ISA of a type uses the
// same one, so switching ISA never changes what the activations are rounded to):
//   kF32  - the caller's f32 rows (F32/F16/BF16 weights);
//   kQ8   - ActQ8 blocks of 32 (legacy formats), see kernels/act_quant.h;
//   kQ8K  - ActQ8K = quant::BlockQ8_K blocks of 256 (K-quants);
//   kQ8x8 - ActQ8 rows for the GEMV, and for the GEMM the same bytes interleaved by groups of 8
//           rows (ActQ8x8 below): Tile::a is then the group of activation row 0 (a multiple of
//           8), Tile::a_stride = n_blocks * sizeof(ActQ8), so group g starts 8 * g * a_stride
//           bytes on; rows past the matrix's m are zero (d = 0) and their outputs are not written.
//   kQ8Kx8 - the same for ActQ8K: ActQ8K rows for the GEMV and the small-call tiles
//           (Kernel::small), ActQ8Kx8 groups for the GEMM (a_stride = n_blocks * sizeof(ActQ8K)).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gguf/ggml_type.h"
#include "kernels/act_quant.h"
#include "kernels/matmul.h"

namespace llms::kernels::detail {

enum class ActKind { kF32, kQ8, kQ8K, kQ8x8, kQ8Kx8 };

// One block of 32 columns of 8 activation rows: qs[j][4 * i + t] = row i's q[4 * j + t], d and
// sum as in ActQ8. Same bytes per row as ActQ8, 64-byte aligned in the scratch.
struct alignas(32) ActQ8x8 {
  int8_t qs[8][32];
  float d[8];
  int32_t sum[8];
};
static_assert(sizeof(ActQ8x8) == 8 * sizeof(ActQ8));

// One super-block (256 columns) of 8 ActQ8K rows: qs[j][4 * i + t] = row i's q[4 * j + t];
// bsums[p][2 * i + h] = row i's bsums[2 * p + h], so one vpmaddwd of bsums[p] against a
// broadcast pair of sub-block scales gives the 8 rows' scaled sums of sub-blocks 2p and 2p+1.
// Same bytes per row as ActQ8K; 32-byte aligned when the first one is.
struct ActQ8Kx8 {
  int8_t qs[quant::kQK_K / 4][32];
  float d[8];
  int16_t bsums[quant::kQK_K / 32][16];
};
static_assert(sizeof(ActQ8Kx8) == 8 * sizeof(ActQ8K));
static_assert(sizeof(ActQ8Kx8) % 32 == 0);

struct Tile {
  const uint8_t* w;  // weight row 0 of the tile
  size_t w_stride;   // bytes between weight rows
  int n_w;
  const uint8_t* a;  // activation row 0 of the tile (floats or blocks per ActKind)
  size_t a_stride;   // bytes between activation rows
  int n_a;
  int64_t n_cols;  // values per row (a whole number of blocks)
  float* y;        // output (row 0, column 0 of the tile)
  int64_t y_stride;
};

using TileFn = void (*)(const Tile& tile);

// Calls run(std::integral_constant<int, R>{}, std::integral_constant<int, C>{}) with the smallest
// tile shape that covers t: R <= kRows weight rows (t.n_w) and C <= kCols units of kUnit
// activation rows (t.n_a; kUnit 8 for tiles over interleaved groups of 8 rows). Each edge shape
// is then its own fully unrolled instantiation of the tile kernel.
template <int kRows, int kCols, int kUnit = 1, class Run>
inline void dispatch_tile(const Tile& t, Run&& run) {
  if constexpr (kRows > 1) {
    if (t.n_w < kRows) return dispatch_tile<kRows - 1, kCols, kUnit>(t, run);
  }
  if constexpr (kCols > 1) {
    if (t.n_a <= kUnit * (kCols - 1)) return dispatch_tile<kRows, kCols - 1, kUnit>(t, run);
  }
  run(std::integral_constant<int, kRows>{}, std::integral_constant<int, kCols>{});
}

// GEMV rows of at most this many columns are best read one row after another. From DRAM, a
// multi-row GEMV tile over short rows reads several interleaved streams within a page or two,
// which streams worse than the same bytes in address order (measured on Zen 3, 2 threads,
// weights cycled through 512 MiB; docs/PERF.md): Q8_0 151936 x 896 12.4 -> 15.3 GB/s, Q4_K
// 8960 x 1536 13.0-14.5 -> 15.3-16.1, Q6_K 8960 x 1536 13.6-14.1 -> 18.5-18.7. Long rows keep
// the multi-row tile, which shares per-block work between rows (Q6_K 1536 x 8960: 20.6-22.8 vs
// 18.3-19.2 row by row). On AVX2, short K-quant matrices are repacked into row pairs
// (kernels/row_pairs.h), which give the 2-row tile one stream in address order.
constexpr int64_t kGemvRowByRowMaxCols = 1536;

// The GEMV of tile t through a 1-row tile, row after row (each row's arithmetic is the same in
// every tile height, so the results do not change).
template <class OneRow>
inline void gemv_row_by_row(const Tile& t, OneRow&& one_row) {
  Tile row = t;
  row.n_w = 1;
  for (int r = 0; r < t.n_w; ++r) {
    row.w = t.w + r * t.w_stride;
    row.y = t.y + r;
    one_row(row);
  }
}

// The bytes of w's n_cols values with no row padding (what the repacked layouts take as
// row_bytes); 0 for a negative n_cols or one that is not whole blocks.
inline size_t exact_row_bytes(const QuantMatrix& w) {
  const auto row = gguf::ggml_row_bytes(w.type, static_cast<uint64_t>(w.n_cols < 0 ? 0 : w.n_cols));
  return row ? static_cast<size_t>(*row) : 0;
}

struct Kernel {
  ActKind act;
  int gemv_rows;  // largest n_w the gemv function takes (it is called with n_a == 1)
  int gemm_rows;  // largest n_w and n_a the gemm function takes
  int gemm_cols;
  TileFn gemv;
  TileFn gemm;
  // Calls of 2..small_max_m activation rows run `small` instead of the GEMM: tiles of up to
  // small_rows weight rows x small_cols activation rows over the GEMV's activation form (rows,
  // not interleaved), each weight block read from memory once and unpacked once for them all.
  // Where the GEMM pads its activation rows to a group of 8 and is compute-bound, as the AVX2
  // K-quant tiles, 2 rows cost about what 8 do (1.5B Q4_K_M on an AVX2 EPYC: a 2-token step
  // 145 ms vs 36 ms for one). A small tile's results equal the GEMV's bit for bit.
  int small_max_m = 1;
  int small_rows = 0;
  int small_cols = 0;
  TileFn small = nullptr;
};

// kernel with a tile for calls of 2..max_m activation rows (Kernel::small).
constexpr Kernel with_small_calls(Kernel kernel, int max_m, int rows, int cols, TileFn small) {
  kernel.small_max_m = max_m;
  kernel.small_rows = rows;
  kernel.small_cols = cols;
  kernel.small = small;
  return kernel;
}

// kernel with another GEMM tile function of gemm_rows x gemm_cols (the AVX-512 table's VNNI
// GEMMs over the AVX2 kernels' activation layouts and GEMVs).
constexpr Kernel with_gemm(Kernel kernel, int gemm_rows, int gemm_cols, TileFn gemm) {
  kernel.gemm_rows = gemm_rows;
  kernel.gemm_cols = gemm_cols;
  kernel.gemm = gemm;
  kernel.small_max_m = 1;  // a new GEMM has its own cost at small m
  return kernel;
}

// nullptr when that ISA has no kernel for the type (the driver falls back a level).
const Kernel* find_kernel_scalar(gguf::GgmlType type);
const Kernel* find_kernel_avx2(gguf::GgmlType type);
const Kernel* find_kernel_avx512(gguf::GgmlType type);

// Kernels for matrices in 16-row groups (WeightLayout::kRowGroups16, row_groups_layout.h):
// tiles of kGroupRows weight rows starting at a group, activation rows (ActKind::kQ8, kQ8K for
// Q4_K) for the GEMV and the GEMM alike. The scalar table has every grouped type; nullptr
// otherwise.
const Kernel* find_grouped_scalar(gguf::GgmlType type);
const Kernel* find_grouped_avx2(gguf::GgmlType type);
const Kernel* find_grouped_avx512(gguf::GgmlType type);

// Kernels for matrices in row pairs (WeightLayout::kRowPairs, kernels/row_pairs.h): tiles of an
// even number of rows starting at a pair (the driver starts tiles at multiples of their height,
// and every height here is even). Q4_K, Q5_K and Q6_K; nullptr otherwise.
const Kernel* find_pairs_scalar(gguf::GgmlType type);
const Kernel* find_pairs_avx2(gguf::GgmlType type);

// Per-family tables behind find_kernel_avx2 / find_kernel_avx512.
const Kernel* find_q8x8_avx2(gguf::GgmlType type);
const Kernel* find_legacy_avx2(gguf::GgmlType type);
const Kernel* find_kquant_avx2(gguf::GgmlType type);
const Kernel* find_float_avx2(gguf::GgmlType type);
const Kernel* find_q8x8_avx512(gguf::GgmlType type);
const Kernel* find_kquant_avx512(gguf::GgmlType type);

// Activation quantizers behind kernels/act_quant.h; the AVX2 ones give the scalar ones' bytes.
void quantize_act_q8_scalar(const float* x, int64_t n, ActQ8* out);
void quantize_act_q8k_scalar(const float* x, int64_t n, ActQ8K* out);
void quantize_act_q8_avx2(const float* x, int64_t n, ActQ8* out);
void quantize_act_q8k_avx2(const float* x, int64_t n, ActQ8K* out);

}  // namespace llms::kernels::detail
