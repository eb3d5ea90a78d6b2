// quant/float_convert: exact scalar conversions between f32 and the 16-bit float formats that
// GGML stores (IEEE binary16 "F16" and bfloat16 "BF16"), and the 8-bit float of quantized KV
// caches (FP8 E4M3: bias 7, no infinities, 0x7F/0xFF are NaN, largest finite 448).
//
// Contract:
//   - f16/bf16 -> f32 is exact for every bit pattern (subnormals included; NaN keeps its sign and
//     payload, widened).
//   - f32 -> f16 and f32 -> bf16 round to nearest, ties to even, as IEEE and GGML do. Values past
//     the largest finite half round to +-inf; values below half the smallest subnormal go to +-0.
//   - NaN -> f16: a quiet NaN with the same sign and the top 9 payload bits kept (what F16C does).
//     NaN -> bf16: the top 16 bits with the quiet bit forced on (what GGML does), never infinity.
//   - e4m3 -> f32 is exact for every pattern. f32 -> e4m3 rounds to nearest, ties to even, and
//     saturates: magnitudes from 448 up (infinity included) give +-448, NaN gives NaN (0x7F).
// Header-only so that kernels can inline them; row helpers live in float_convert.cpp.
#pragma once

#include <bit>
#include <cstdint>

namespace llms::quant {

constexpr float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    // Subnormal or zero: mantissa * 2^-24 is exact in f32 (at most 10 significant bits).
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
    return sign ? -magnitude : magnitude;
  }
  // Rebias the exponent from 15 to 127.
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

constexpr uint16_t fp32_to_fp16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {  // NaN: stay NaN (quiet bit set) whatever the payload.
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  }
  // 65520 = 0x477ff000 is halfway between 65504 (largest half, odd mantissa) and 65536: the tie
  // goes to the even neighbour, which is infinity. Infinity itself lands here too.
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  uint32_t shift;
  uint32_t significand;
  if (magnitude >= 0x38800000u) {  // >= 2^-14: a normal half.
    // Rebias the exponent (127 -> 15) in place; the 13 low mantissa bits are rounded off.
    significand = magnitude - 0x38000000u;
    shift = 13;
  } else {
    const uint32_t exponent = magnitude >> 23;
    if (exponent < 102) return sign;  // below 2^-25: rounds to zero (2^-25 itself is a tie to 0).
    // Subnormal half: value = significand * 2^(exponent - 150), count in units of 2^-24.
    significand = (magnitude & 0x7fffffu) | 0x800000u;
    shift = 126 - exponent;  // in [14, 24]
  }
  uint32_t result = significand >> shift;
  const uint32_t remainder = significand & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  // A carry out of the mantissa correctly bumps the exponent (or subnormal -> smallest normal).
  if (remainder > half || (remainder == half && (result & 1u))) ++result;
  return static_cast<uint16_t>(sign | result);
}

constexpr float bf16_to_fp32(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

constexpr uint16_t fp32_to_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: truncating could yield inf, so force quiet.
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  }
  // Round to nearest even on the 16 discarded bits; cannot overflow 32 bits for non-NaN input.
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

constexpr float fp8_e4m3_to_fp32(uint8_t b) {
  const bool negative = (b & 0x80u) != 0;
  const uint32_t exponent = (b >> 3) & 0xfu;
  const uint32_t mantissa = b & 0x7u;
  float magnitude;
  if (exponent == 0xf && mantissa == 0x7) {
    magnitude = std::bit_cast<float>(0x7fc00000u);
  } else if (exponent == 0) {
    magnitude = static_cast<float>(mantissa) * 0.001953125f;  // mantissa * 2^-9
  } else {
    // Rebias the exponent from 7 to 127.
    magnitude = std::bit_cast<float>(((exponent + 120u) << 23) | (mantissa << 20));
  }
  return negative ? -magnitude : magnitude;
}

constexpr uint8_t fp32_to_fp8_e4m3(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);  // NaN
  if (magnitude >= 0x43e00000u) return static_cast<uint8_t>(sign | 0x7eu);  // >= 448: saturate
  if (magnitude < 0x3c800000u) {  // below 2^-6: a subnormal in units of 2^-9 (or zero)
    const uint32_t exponent = magnitude >> 23;
    if (exponent < 117) return sign;  // below 2^-10: rounds to zero (2^-10 is a tie to 0)
    const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    // value = significand * 2^(exponent - 150), counted in units of 2^-9.
    const uint32_t shift = 141 - exponent;  // in [21, 24]
    uint32_t result = significand >> shift;
    const uint32_t remainder = significand & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (remainder > half || (remainder == half && (result & 1u))) ++result;  // 8: smallest normal
    return static_cast<uint8_t>(sign | result);
  }
  // Normal: drop 20 mantissa bits with ties to even (a carry bumps the exponent), then rebias
  // 127 -> 7. Below 448 the result stays at or under 0x7e.
  const uint32_t rounded = (magnitude + 0x7ffffu + ((magnitude >> 20) & 1u)) >> 20;
  return static_cast<uint8_t>(sign | (rounded - (120u << 3)));
}

// Row conversions. `src`/`dst` of the 16-bit side need no alignment (they may point into a
// mapped file at any offset). n_elements >= 0.
void fp16_to_fp32_row(const void* src, float* dst, int64_t n_elements);
void fp32_to_fp16_row(const float* src, void* dst, int64_t n_elements);
void bf16_to_fp32_row(const void* src, float* dst, int64_t n_elements);
void fp32_to_bf16_row(const float* src, void* dst, int64_t n_elements);

}  // namespace llms::quant
