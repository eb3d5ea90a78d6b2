// quantize/gptq: GPTQ-style quantization of one weight matrix: columns are rounded in order and
// each column's rounding error is pushed onto the columns not yet rounded, through the inverse
// Hessian of the calibration activations, so the layer's outputs (not its weights) stay close.
//
// The method is Frantar et al., "GPTQ: Accurate Post-Training Quantization for Generative
// Pre-trained Transformers" (2022), fitted to GGML's block formats:
//   - H = sum over calibration rows of x x^T (cols x cols). Columns no calibration row reached
//     (H_jj = 0) get H_jj = 1 and weight 0, as in the paper; then H += dampening * mean(diag H) I
//     (retried with 10x the dampening, up to 4 times, if H is still not positive definite).
//   - U: the upper Cholesky factor of H^-1 (H^-1 = U^T U), from one Cholesky factorization of H
//     with its index order reversed and one triangular inverse (LAPACK dpotrf, dtrtri).
//   - Rows are independent. For each quantization block of a row (32 or 256 columns), its scales
//     are fitted when its first column comes up, by quantize_row_with_importance (the importance
//     being diag H), to the values as the earlier columns' errors have left them. Then each column
//     c in order: code = the grid point nearest the current value (quantize/block_codes.h), e =
//     (w_c - decoded) / U_cc, and w_k -= e * U_ck for every later column k.
//   - Rows are rounded in tiles of 64, spread over a thread pool when one is given.
//   - The updates are batched as in the paper: inside a span of columns (one K super-block, or
//     four legacy blocks) they go column by column; onto the columns after the span, as one matrix
//     product per tile of rows (BLAS sgemm).
// Memory besides the inputs: cols^2 doubles (the factorization, in place) and cols^2 floats (U),
// then 64 rows of f32 per thread. Output: rows * quant::quantized_row_bytes(type, cols) bytes of
// valid blocks. Throws
// llms::Error kInvalidArgument for a shape that is not whole blocks or a Hessian that is not
// finite, kUnsupported for a type without code access, kInternal when H stays singular.
#pragma once

#include <cstdint>

#include "gguf/ggml_type.h"

namespace llms {
class ThreadPool;
}

namespace llms::quantize {

struct GptqOptions {
  double dampening = 0.01;  // fraction of the mean of diag H added to the diagonal
  int n_threads = 1;        // BLAS threads for the factorization
  // Tiles of 64 rows are spread over the pool's threads (each tile's sgemm single-threaded, so the
  // output does not depend on the thread count); without a pool they run on the calling thread.
  ThreadPool* pool = nullptr;
};

bool has_gptq_quantizer(gguf::GgmlType type);

// weights: rows x cols, row-major (row r = output r's weights over the inputs); hessian: cols x
// cols, row-major, symmetric.
void gptq_quantize(gguf::GgmlType type, const float* weights, int64_t rows, int64_t cols,
                   const float* hessian, void* out, const GptqOptions& options = {});

}  // namespace llms::quantize
