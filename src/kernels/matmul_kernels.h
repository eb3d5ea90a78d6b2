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
//   kQ8K  - ActQ8K = quant::BlockQ8_K blocks of 256 (K-quants).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/ggml_type.h"
#include "kernels/act_quant.h"

namespace llms::kernels::detail {

enum class ActKind { kF32, kQ8, kQ8K };

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

struct Kernel {
  ActKind act;
  int gemv_rows;  // largest n_w the gemv function takes (it is called with n_a == 1)
  int gemm_rows;  // largest n_w and n_a the gemm function takes
  int gemm_cols;
  TileFn gemv;
  TileFn gemm;
};

// nullptr when that ISA has no kernel for the type (the driver falls back a level).
const Kernel* find_kernel_scalar(gguf::GgmlType type);
const Kernel* find_kernel_avx2(gguf::GgmlType type);
const Kernel* find_kernel_avx512(gguf::GgmlType type);

// Per-family tables behind find_kernel_avx2 / find_kernel_avx512.
const Kernel* find_legacy_avx2(gguf::GgmlType type);
const Kernel* find_kquant_avx2(gguf::GgmlType type);
const Kernel* find_float_avx2(gguf::GgmlType type);
const Kernel* find_legacy_avx512(gguf::GgmlType type);
const Kernel* find_kquant_avx512(gguf::GgmlType type);

// Activation quantizers behind kernels/act_quant.h; the AVX2 ones give the scalar ones' bytes.
void quantize_act_q8_scalar(const float* x, int64_t n, ActQ8* out);
void quantize_act_q8k_scalar(const float* x, int64_t n, ActQ8K* out);
void quantize_act_q8_avx2(const float* x, int64_t n, ActQ8* out);
void quantize_act_q8k_avx2(const float* x, int64_t n, ActQ8K* out);

}  // namespace llms::kernels::detail
