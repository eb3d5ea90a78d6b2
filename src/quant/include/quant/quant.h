// quant/quant: the type-dispatched entry points of the quant module.
//
// Contract:
//   - dequantize_row turns n values stored as `type` into f32; quantize_row does the reverse
//     with the module's scalar reference quantizers. Both are plain scalar references, meant
//     for loading, tools and tests; kernels/ owns the fast paths and tests them against these.
//   - n must be >= 0 and a multiple of the type's block size (32 or 256 for quantized types),
//     else llms::Error(kInvalidArgument) naming the type, n and the block size. n == 0 is a
//     no-op; otherwise src and dst must be non-null.
//   - A type this module cannot handle throws llms::Error(kUnsupported) naming it; ask
//     can_dequantize / can_quantize first to avoid that.
//   - The quantized side needs no alignment; the float side is a normal float array.
#pragma once

#include <cstdint>

#include "gguf/ggml_type.h"

namespace llms::quant {

using gguf::GgmlType;

bool can_dequantize(GgmlType type);
bool can_quantize(GgmlType type);

// Bytes that n values of `type` occupy; throws as described above for a bad n or an unknown
// type id, or on overflow.
uint64_t quantized_row_bytes(GgmlType type, int64_t n);

void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);
void quantize_row(GgmlType type, const float* src, void* dst, int64_t n);

}  // namespace llms::quant
