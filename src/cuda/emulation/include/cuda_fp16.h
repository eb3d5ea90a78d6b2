// The f16 type and the conversions the module's kernels use, for the CPU emulation of the device
// (docs/CUDA.md, "The CPU emulation"): IEEE binary16, round to nearest even
// (quant/float_convert.h).
#pragma once

#include <cstdint>

#include "quant/float_convert.h"

struct __half {
  uint16_t bits = 0;
};

inline __half __ushort_as_half(unsigned short bits) { return __half{bits}; }
inline unsigned short __half_as_ushort(__half h) { return h.bits; }
inline float __half2float(__half h) { return llms::quant::fp16_to_fp32(h.bits); }
inline __half __float2half_rn(float f) { return __half{llms::quant::fp32_to_fp16(f)}; }
