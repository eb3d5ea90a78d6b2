// cuda/block_decode: the GGUF weight decoders of the CUDA kernels, shared with host tests.
//
// Contract:
//   - A "sub-block" is 32 consecutive values of a row: sub-block `sub` is values 32 * sub ..
//     32 * sub + 31. Every supported type decodes one sub-block on its own (K-quant super-blocks
//     hold 8), so a thread or lane can take any sub-block of any row. `row` is the first byte of
//     the row in its GGUF layout (cuda/device_kernels.h: DeviceMatrix); `out` gets 32 floats.
//   - Supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K (decodable()).
//   - Values equal quant::dequantize_row's bit for bit, on the host and on the device: the same
//     f32 expression with the same operation order, e.g. Q4_K is (d * scale) * q - (dmin * min).
//     On the device every product goes through __fmul_rn, which nvcc never contracts into a
//     fused multiply-add (its default, --fmad=true, would otherwise fuse d * q + m and change
//     the last bit); on the host the project builds without FMA contraction (ISO C++, no -march).
//     Device code must be built without flush-to-zero (no -ftz=true or --use_fast_math): f16
//     scales may be subnormal. One exception: where the result is NaN (random bytes can make a
//     scale NaN or infinite) any NaN may come out, as the GPU returns its canonical NaN.
//   - Memory is read byte-wise or as 16-bit words at even offsets only: rows and blocks are not
//     4-byte aligned on the device (a Q4_0 block is 18 bytes), but every type's block size and
//     every field offset inside a block is even, so `row` must be 2-byte aligned (any row of a
//     matrix whose data is).
//   - f32_to_bf16_bits is quant::fp32_to_bf16: round to nearest even, NaN keeps its top 16 bits
//     with the quiet bit forced on (never infinity). f16/bf16 -> f32 are exact for every pattern.
//
// Plain C++ as well as CUDA: outside nvcc the LLMS_HOST_DEVICE functions are ordinary inline
// functions and no CUDA header is needed, so the host tests compile it with the C++ compiler.
// Kernels instantiate decode_sub<type> so that the type is resolved at compile time; the
// runtime-dispatched decode_sub(type, ...) serves host code and tests.
#pragma once

#include <cstdint>
#include <cstring>

#include "gguf/ggml_type.h"
#include "host_device.h"

// Unrolled on the device so that out[] and the quants stay in registers. Only in nvcc's device
// pass: its host pass hands _Pragma("unroll") to the host compiler, which warns about it.
#if defined(__CUDA_ARCH__)
#define LLMS_UNROLL _Pragma("unroll")
#else
#define LLMS_UNROLL
#endif

namespace llms::cuda {

inline constexpr int kSubBlockValues = 32;

namespace detail {

LLMS_HOST_DEVICE LLMS_FORCE_INLINE float bits_to_f32(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

LLMS_HOST_DEVICE LLMS_FORCE_INLINE uint32_t f32_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
#endif
}

// A little-endian 16-bit word at an even address (the device faults on a misaligned one).
LLMS_HOST_DEVICE LLMS_FORCE_INLINE uint32_t load_u16(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint16_t*>(p);
#else
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
#endif
}

// a * b rounded on its own: never fused with a following add (see the contract).
LLMS_HOST_DEVICE LLMS_FORCE_INLINE float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// q as f32, exactly, for |q| < 2^22: the float 1.5 * 2^23 + q carries q in its low mantissa
// bits, and subtracting 1.5 * 2^23 is exact. Two full-rate instructions on the device, where the
// conversion instruction (I2F) issues at 16 a clock per SM on sm_80 and sm_90, a quarter to an
// eighth of the rate of the FP32 arithmetic around it: every quantized value goes through here.
LLMS_HOST_DEVICE LLMS_FORCE_INLINE float small_int_to_f32(int q) {
  return bits_to_f32(0x4B400000u + static_cast<uint32_t>(q)) - 12582912.0f;
}

LLMS_HOST_DEVICE LLMS_FORCE_INLINE int8_t as_int8(uint32_t byte) {
  return static_cast<int8_t>(static_cast<uint8_t>(byte));
}

}  // namespace detail

// --- 16-bit floats (quant/float_convert.h semantics) ---------------------------------------------

LLMS_HOST_DEVICE LLMS_FORCE_INLINE float f16_bits_to_f32(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return detail::bits_to_f32(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    // Subnormal or zero: mantissa * 2^-24 is exact in f32 (at most 10 significant bits).
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
    return sign ? -magnitude : magnitude;
  }
  // Rebias the exponent from 15 to 127.
  return detail::bits_to_f32(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

LLMS_HOST_DEVICE LLMS_FORCE_INLINE float bf16_bits_to_f32(uint32_t h) {
  return detail::bits_to_f32((h & 0xffffu) << 16);
}

LLMS_HOST_DEVICE LLMS_FORCE_INLINE uint16_t f32_to_bf16_bits(float f) {
  const uint32_t bits = detail::f32_to_bits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: truncating could yield inf, so force quiet.
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  }
  // Round to nearest even on the 16 discarded bits; cannot overflow 32 bits for non-NaN input.
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// --- Per-type sub-block decoders -----------------------------------------------------------------
// Each reads only the sub-block's own bytes (plus its super-block's header for the K-quants).

LLMS_HOST_DEVICE LLMS_FORCE_INLINE void decode_f32(const uint8_t* row, int64_t sub, float* out) {
  const uint8_t* p = row + sub * (kSubBlockValues * 4);
  LLMS_UNROLL
  for (int j = 0; j < kSubBlockValues; ++j) {
    // Two 16-bit halves: an F32 row is only known to be 2-byte aligned.
    out[j] =
        detail::bits_to_f32(detail::load_u16(p + 4 * j) | (detail::load_u16(p + 4 * j + 2) << 16));
  }
}

LLMS_HOST_DEVICE LLMS_FORCE_INLINE void decode_f16(const uint8_t* row, int64_t sub, float* out) {
  const uint8_t* p = row + sub * (kSubBlockValues * 2);
  LLMS_UNROLL
  for (int j = 0; j < kSubBlockValues; ++j) {
    out[j] = f16_bits_to_f32(detail::load_u16(p + 2 * j));
  }
}

LLMS_HOST_DEVICE LLMS_FORCE_INLINE void decode_bf16(const uint8_t* row, int64_t sub, float* out) {
  const uint8_t* p = row + sub * (kSubBlockValues * 2);
  LLMS_UNROLL
  for (int j = 0; j < kSubBlockValues; ++j) {
    out[j] = bf16_bits_to_f32(detail::load_u16(p + 2 * j));
  }
}

namespace detail {

// The 4-bit quants of a legacy block: byte j of qs holds element j (low nibble) and j + 16
// (high). Reads qs as 8 words; word k carries bytes 2k (low half) and 2k + 1 (high half). The
// fifth bits (Q5_0/Q5_1) are bit j of qh; 0 for the 4-bit formats.
LLMS_HOST_DEVICE LLMS_FORCE_INLINE void unpack_legacy(const uint8_t* qs, uint32_t qh, int* q) {
  LLMS_UNROLL
  for (int k = 0; k < 8; ++k) {
    const uint32_t w = load_u16(qs + 2 * k);
    const int j = 2 * k;
    q[j] = static_cast<int>((w & 0xfu) | (((qh >> j) & 1u) << 4));
    q[j + 1] = static_cast<int>(((w >> 8) & 0xfu) | (((qh >> (j + 1)) & 1u) << 4));
    q[j + 16] = static_cast<int>(((w >> 4) & 0xfu) | (((qh >> (j + 16)) & 1u) << 4));
    q[j + 17] = static_cast<int>(((w >> 12) & 0xfu) | (((qh >> (j + 17)) & 1u) << 4));
  }
}

LLMS_HOST_DEVICE LLMS_FORCE_INLINE uint32_t load_qh(const uint8_t* p) {
  return load_u16(p) | (load_u16(p + 2) << 16);
}

// Scale and min of sub-block j (0..7) of a Q4_K/Q5_K super-block from its 12 packed bytes (as
// quant::k_scale_min).
LLMS_HOST_DEVICE LLMS_FORCE_INLINE void k_scale_min(int j, const uint8_t* scales, int* scale,
                                                    int* min) {
  if (j < 4) {
    *scale = scales[j] & 63;
    *min = scales[j + 4] & 63;
  } else {
    *scale = (scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4);
    *min = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

}  // namespace detail

// Q4_0 (18 bytes: d, qs[16]): d * (q - 8).
LLMS_HOST_DEVICE LLMS_FORCE_INLINE void decode_q4_0(const uint8_t* row, int64_t sub, float* out) {
  const uint8_t* b = row + sub * 18;
  const float d = f16_bits_to_f32(detail::load_u16(b));
  int q[kSubBlockValues];
  detail::unpack_legacy(b + 2, 0, q);
  LLMS_UNROLL
  for (int j = 0; j < kSubBlockValues; ++j) {
    out[j] = detail::mul_rn(d, detail::small_int_to_f32(q[j] - 8));
  }
}

// Q4_1 (20 bytes: d, m, qs[16]): d * q + m.
LLMS_HOST_DEVICE LLMS_FORCE_INLINE void decode_q4_1(const uint8_t* row, int64_t sub, float* out) {
  const uint8_t* b = row + sub * 20;
  const float d = f16_bits_to_f32(detail::load_u16(b));
  const float m = f16_bits_to_f32(detail::load_u16(b + 2));
  int q[kSubBlockValues];
  detail::unpack_legacy(b + 4, 0, q);
  LLMS_UNROLL
  for (int j = 0; j < kSubBlockValues; ++j) {
    out[j] = detail::mul_rn(d, detail::small_int_to_f32(q[j])) + m;
  }
}

// Q5_0 (22 bytes: d, qh[4], qs[16]): d * (q - 16).
LLMS_HOST_DEVICE LLMS_FORCE_INLINE void decode_q5_0(const uint8_t* row, int64_t sub, float* out) {
  const uint8_t* b = row + sub * 22;
  const float d = f16_bits_to_f32(detail::load_u16(b));
  int q[kSubBlockValues];
  detail::unpack_legacy(b + 6, detail::load_qh(b + 2), q);
  LLMS_UNROLL
  for (int j = 0; j < kSubBlockValues; ++j) {
    out[j] = detail::mul_rn(d, detail::small_int_to_f32(q[j] - 16));
  }
}

// Q5_1 (24 bytes: d, m, qh[4], qs[16]): d * q + m.
LLMS_HOST_DEVICE LLMS_FORCE_INLINE void decode_q5_1(const uint8_t* row, int64_t sub, float* out) {
  const uint8_t* b = row + sub * 24;
  const float d = f16_bits_to_f32(detail::load_u16(b));
  const float m = f16_bits_to_f32(detail::load_u16(b + 2));
  int q[kSubBlockValues];
  detail::unpack_legacy(b + 8, detail::load_qh(b + 4), q);
  LLMS_UNROLL
  for (int j = 0; j < kSubBlockValues; ++j) {
    out[j] = detail::mul_rn(d, detail::small_int_to_f32(q[j])) + m;
  }
}

// Q8_0 (34 bytes: d, qs[32] int8): d * q.
LLMS_HOST_DEVICE LLMS_FORCE_INLINE void decode_q8_0(const uint8_t* row, int64_t sub, float* out) {
  const uint8_t* b = row + sub * 34;
  const float d = f16_bits_to_f32(detail::load_u16(b));
  LLMS_UNROLL
  for (int k = 0; k < kSubBlockValues / 2; ++k) {
    const uint32_t w = detail::load_u16(b + 2 + 2 * k);
    out[2 * k] = detail::mul_rn(d, detail::small_int_to_f32(detail::as_int8(w)));
    out[2 * k + 1] = detail::mul_rn(d, detail::small_int_to_f32(detail::as_int8(w >> 8)));
  }
}

// Q4_K (144 bytes per 256 values: d, dmin, scales[12], qs[128]): (d * scale) * q - (dmin * min).
// Sub-block j of a super-block is qs[32 * (j / 2) + l], low nibble for even j, high for odd.
LLMS_HOST_DEVICE LLMS_FORCE_INLINE void decode_q4_K(const uint8_t* row, int64_t sub, float* out) {
  const uint8_t* b = row + (sub / 8) * 144;
  const int j = static_cast<int>(sub % 8);
  const float d = f16_bits_to_f32(detail::load_u16(b));
  const float dmin = f16_bits_to_f32(detail::load_u16(b + 2));
  int scale;
  int min;
  detail::k_scale_min(j, b + 4, &scale, &min);
  const float dl = detail::mul_rn(d, detail::small_int_to_f32(scale));
  const float ml = detail::mul_rn(dmin, detail::small_int_to_f32(min));
  const uint8_t* qs = b + 16 + 32 * (j / 2);
  const int shift = 4 * (j % 2);
  LLMS_UNROLL
  for (int k = 0; k < kSubBlockValues / 2; ++k) {
    const uint32_t w = detail::load_u16(qs + 2 * k) >> shift;
    out[2 * k] = detail::mul_rn(dl, detail::small_int_to_f32(w & 0xfu)) - ml;
    out[2 * k + 1] = detail::mul_rn(dl, detail::small_int_to_f32((w >> 8) & 0xfu)) - ml;
  }
}

// Q5_K (176 bytes per 256 values: d, dmin, scales[12], qh[32], qs[128]): as Q4_K with q in
// [0, 31]; the fifth bit of value l of sub-block j is bit j of qh[l].
LLMS_HOST_DEVICE LLMS_FORCE_INLINE void decode_q5_K(const uint8_t* row, int64_t sub, float* out) {
  const uint8_t* b = row + (sub / 8) * 176;
  const int j = static_cast<int>(sub % 8);
  const float d = f16_bits_to_f32(detail::load_u16(b));
  const float dmin = f16_bits_to_f32(detail::load_u16(b + 2));
  int scale;
  int min;
  detail::k_scale_min(j, b + 4, &scale, &min);
  const float dl = detail::mul_rn(d, detail::small_int_to_f32(scale));
  const float ml = detail::mul_rn(dmin, detail::small_int_to_f32(min));
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48 + 32 * (j / 2);
  const int shift = 4 * (j % 2);
  LLMS_UNROLL
  for (int k = 0; k < kSubBlockValues / 2; ++k) {
    const uint32_t w = detail::load_u16(qs + 2 * k) >> shift;
    const uint32_t h = detail::load_u16(qh + 2 * k) >> j;
    const uint32_t q0 = (w & 0xfu) | ((h & 1u) << 4);
    const uint32_t q1 = ((w >> 8) & 0xfu) | (((h >> 8) & 1u) << 4);
    out[2 * k] = detail::mul_rn(dl, detail::small_int_to_f32(q0)) - ml;
    out[2 * k + 1] = detail::mul_rn(dl, detail::small_int_to_f32(q1)) - ml;
  }
}

// Q6_K (210 bytes per 256 values: ql[128], qh[64], scales[16] int8, d): (d * scale) * (q - 32),
// one scale per 16 values. Value l of sub-block j (element e = 32 j + l) has its low 4 bits in
// nibble (j / 2) % 2 of ql[64 * (j / 4) + 32 * (j % 2) + l] and its high 2 bits at bit 2 * (j % 4)
// of qh[32 * (j / 4) + l].
LLMS_HOST_DEVICE LLMS_FORCE_INLINE void decode_q6_K(const uint8_t* row, int64_t sub, float* out) {
  const uint8_t* b = row + (sub / 8) * 210;
  const int j = static_cast<int>(sub % 8);
  const float d = f16_bits_to_f32(detail::load_u16(b + 208));
  const uint32_t scales = detail::load_u16(b + 192 + 2 * j);  // this sub-block's two scales
  const float dl0 = detail::mul_rn(d, detail::small_int_to_f32(detail::as_int8(scales)));
  const float dl1 = detail::mul_rn(d, detail::small_int_to_f32(detail::as_int8(scales >> 8)));
  const uint8_t* ql = b + 64 * (j / 4) + 32 * (j % 2);
  const uint8_t* qh = b + 128 + 32 * (j / 4);
  const int low_shift = 4 * ((j / 2) % 2);
  const int high_shift = 2 * (j % 4);
  LLMS_UNROLL
  for (int k = 0; k < kSubBlockValues / 2; ++k) {
    const uint32_t lo = detail::load_u16(ql + 2 * k) >> low_shift;
    const uint32_t hi = detail::load_u16(qh + 2 * k) >> high_shift;
    const int q0 = static_cast<int>((lo & 0xfu) | ((hi & 3u) << 4));
    const int q1 = static_cast<int>(((lo >> 8) & 0xfu) | (((hi >> 8) & 3u) << 4));
    const float dl = k < 8 ? dl0 : dl1;  // values 0..15 and 16..31 of the sub-block
    out[2 * k] = detail::mul_rn(dl, detail::small_int_to_f32(q0 - 32));
    out[2 * k + 1] = detail::mul_rn(dl, detail::small_int_to_f32(q1 - 32));
  }
}

// --- Dispatch ------------------------------------------------------------------------------------

LLMS_HOST_DEVICE constexpr bool decodable(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kF32:
    case gguf::GgmlType::kF16:
    case gguf::GgmlType::kBF16:
    case gguf::GgmlType::kQ4_0:
    case gguf::GgmlType::kQ4_1:
    case gguf::GgmlType::kQ5_0:
    case gguf::GgmlType::kQ5_1:
    case gguf::GgmlType::kQ8_0:
    case gguf::GgmlType::kQ4_K:
    case gguf::GgmlType::kQ5_K:
    case gguf::GgmlType::kQ6_K:
      return true;
    default:
      return false;
  }
}

// The decoder of type T, resolved at compile time (the kernels' per-type template parameter).
template <gguf::GgmlType T>
LLMS_HOST_DEVICE LLMS_FORCE_INLINE void decode_sub(const uint8_t* row, int64_t sub, float* out) {
  using gguf::GgmlType;
  if constexpr (T == GgmlType::kF32) {
    decode_f32(row, sub, out);
  } else if constexpr (T == GgmlType::kF16) {
    decode_f16(row, sub, out);
  } else if constexpr (T == GgmlType::kBF16) {
    decode_bf16(row, sub, out);
  } else if constexpr (T == GgmlType::kQ4_0) {
    decode_q4_0(row, sub, out);
  } else if constexpr (T == GgmlType::kQ4_1) {
    decode_q4_1(row, sub, out);
  } else if constexpr (T == GgmlType::kQ5_0) {
    decode_q5_0(row, sub, out);
  } else if constexpr (T == GgmlType::kQ5_1) {
    decode_q5_1(row, sub, out);
  } else if constexpr (T == GgmlType::kQ8_0) {
    decode_q8_0(row, sub, out);
  } else if constexpr (T == GgmlType::kQ4_K) {
    decode_q4_K(row, sub, out);
  } else if constexpr (T == GgmlType::kQ5_K) {
    decode_q5_K(row, sub, out);
  } else if constexpr (T == GgmlType::kQ6_K) {
    decode_q6_K(row, sub, out);
  } else {
    static_assert(decodable(T), "decode_sub: no decoder for this type");
  }
}

// Runtime dispatch, for host code and tests (kernels use decode_sub<T>). Returns false, writing
// nothing, for a type that is not decodable().
LLMS_HOST_DEVICE inline bool decode_sub(gguf::GgmlType type, const uint8_t* row, int64_t sub,
                                        float* out) {
  using gguf::GgmlType;
  switch (type) {
    case GgmlType::kF32:
      decode_sub<GgmlType::kF32>(row, sub, out);
      return true;
    case GgmlType::kF16:
      decode_sub<GgmlType::kF16>(row, sub, out);
      return true;
    case GgmlType::kBF16:
      decode_sub<GgmlType::kBF16>(row, sub, out);
      return true;
    case GgmlType::kQ4_0:
      decode_sub<GgmlType::kQ4_0>(row, sub, out);
      return true;
    case GgmlType::kQ4_1:
      decode_sub<GgmlType::kQ4_1>(row, sub, out);
      return true;
    case GgmlType::kQ5_0:
      decode_sub<GgmlType::kQ5_0>(row, sub, out);
      return true;
    case GgmlType::kQ5_1:
      decode_sub<GgmlType::kQ5_1>(row, sub, out);
      return true;
    case GgmlType::kQ8_0:
      decode_sub<GgmlType::kQ8_0>(row, sub, out);
      return true;
    case GgmlType::kQ4_K:
      decode_sub<GgmlType::kQ4_K>(row, sub, out);
      return true;
    case GgmlType::kQ5_K:
      decode_sub<GgmlType::kQ5_K>(row, sub, out);
      return true;
    case GgmlType::kQ6_K:
      decode_sub<GgmlType::kQ6_K>(row, sub, out);
      return true;
    default:
      return false;
  }
}

}  // namespace llms::cuda
