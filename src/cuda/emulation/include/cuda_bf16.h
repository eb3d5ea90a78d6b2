// The bf16 type of the CUDA headers, for the CPU emulation of the device (docs/CUDA.md, "The CPU
// emulation"): the kernels keep bf16 values as their bits and hand them to the tensor-core
// fragments (mma.h) as __nv_bfloat16.
#pragma once

#include <cstdint>

#include "quant/float_convert.h"

struct __nv_bfloat16 {
  uint16_t bits = 0;
};

inline float __bfloat162float(__nv_bfloat16 h) { return llms::quant::bf16_to_fp32(h.bits); }
