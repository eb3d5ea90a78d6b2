// quantize/weighted_quantizers: quantization that spends its rounding error where the activations
// make it matter, for Q4_0, Q5_0, Q8_0, Q4_K, Q5_K and Q6_K.
//
// Round-to-nearest (quant::quantize_row) fits each block's scale to the block alone. Given a
// weight per element, these quantizers search instead for the block scale (and, in Q4_K and
// Q5_K, the min) that minimises sum_j weight_j * (x_j - decoded_j)^2, as llama.cpp's
// make_qx_quants / make_qkx3_quants do (the method is theirs; the code is ours):
//   - symmetric blocks (Q4_0, Q5_0, Q8_0 and each 16-value sub-block of Q6_K): a grid of inverse
//     scales around q_max / max|x|; each candidate's integer codes get the weighted least-squares
//     scale, the codes are re-rounded against that scale as stored (f16 for the legacy types),
//     and the best is refined by refitting until it stops improving;
//   - affine sub-blocks (Q4_K, Q5_K, 32 values): a grid around n_max / (max - min), each
//     candidate's codes giving the weighted least-squares scale and min (the min kept <= 0);
//   - K super-blocks: the sub-block scales (and mins) are quantized against the f16 super-block
//     scales, each sub-block then tries its 6- or 8-bit fields one step either side with codes
//     re-rounded, keeping the lowest weighted error.
// Finally each block is compared with the round-to-nearest block of the same values, and the
// better of the two under the weights is kept: so the weighted error is never above RTN's, and
// with all weights equal the plain squared error is never above it either.
//
// Importance (the imatrix's mean squared activation per column) becomes element weights as
// llama.cpp scales it: w_j = importance_j * sqrt(sigma2 + x_j^2), sigma2 the mean of x^2 over the
// block (32 values for the legacy types, the 256-value super-block for the K types), so a large
// weight inside a quiet column still counts. A block whose weights are all zero (columns no
// calibration token reached) is treated as evenly weighted.
//
// Output bytes are valid blocks of the type (quant::dequantize_row reads them). n must be a
// whole number of the type's blocks (llms::Error kInvalidArgument otherwise); a type without a
// weighted quantizer throws kUnsupported (ask has_weighted_quantizer). Deterministic, no
// allocation, safe to call from many threads at once.
#pragma once

#include <cstdint>

#include "gguf/ggml_type.h"

namespace llms::quantize {

bool has_weighted_quantizer(gguf::GgmlType type);

// Element weights of a row from per-column importance (see above): weights[j] for j < n.
void importance_weights(gguf::GgmlType type, const float* row, const float* importance,
                        float* weights, int64_t n);

// Quantizes n values of `row` into `out` (quant::quantized_row_bytes(type, n) bytes) minimising
// the weighted squared error block by block.
void quantize_row_weighted(gguf::GgmlType type, const float* row, const float* weights, void* out,
                           int64_t n);

// importance_weights then quantize_row_weighted, one block at a time.
void quantize_row_with_importance(gguf::GgmlType type, const float* row, const float* importance,
                                  void* out, int64_t n);

// Sub-blocks of the K types: Q4_K and Q5_K have 8 of 32 values, Q6_K 16 of 16; 0 for the others.
int sub_block_values(gguf::GgmlType type);

// Refits one sub-block's fields (Q4_K/Q5_K: 6-bit scale and min; Q6_K: 8-bit scale) of the
// K super-block `block` to new values, keeping the block's f16 d (and dmin) as stored: GPTQ fixes a
// super-block's d when it reaches the block's first column, and the later sub-blocks' values move
// as errors are pushed onto them before their own turn. `values` and `importance` are the whole
// super-block's (the element weights are importance_weights', over the current values); `sub` is
// the sub-block's index. The fields become those of least weighted error among the present ones
// and the rounding of the sub-block's own weighted fit one step either side; the element codes
// are left as they are (the caller rounds them next). kInvalidArgument for a type without
// sub-blocks or an index out of range.
void refit_sub_block(gguf::GgmlType type, const float* values, const float* importance, void* block,
                     int sub);

}  // namespace llms::quantize
