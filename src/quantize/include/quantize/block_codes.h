// quantize/block_codes: one element of a quantized block at a time: the grid it decodes on and
// its integer code, read and written in place (Q4_0, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K).
//
// GPTQ (quantize/gptq.h) fixes a block's scales first and then rounds its elements one by one,
// each after the rounding errors of the ones before it have been pushed onto it; this is the
// per-element access that needs, over the bit layouts of quant/blocks.h.
//
// Every element of these types decodes as step * code + offset with an integer code in
// [code_min, code_max]: Q4_0 d * (q - 8), Q5_0 d * (q - 16), Q8_0 d * q, Q4_K/Q5_K
// (d * scale_j) * q - dmin * min_j, Q6_K (d * scale_j) * (q - 32). (The decoders evaluate their
// own float expression, which may differ from step * code + offset in the last bit.)
#pragma once

#include <cstdint>

#include "gguf/ggml_type.h"

namespace llms::quantize {

struct CodeGrid {
  float step = 0.0f;
  float offset = 0.0f;
  int code_min = 0;
  int code_max = 0;

  float decode(int code) const { return step * static_cast<float>(code) + offset; }
  // The code whose decoded value is nearest v (NaN gives code_min).
  int nearest(float v) const;
};

bool has_code_access(gguf::GgmlType type);

// Element j (0 <= j < the type's block size) of one block. Throws llms::Error(kUnsupported) for
// a type without code access.
CodeGrid code_grid(gguf::GgmlType type, const void* block, int j);
int get_code(gguf::GgmlType type, const void* block, int j);
// code must lie in the element's [code_min, code_max] (clamped otherwise).
void set_code(gguf::GgmlType type, void* block, int j, int code);

}  // namespace llms::quantize
