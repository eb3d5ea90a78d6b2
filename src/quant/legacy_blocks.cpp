// quant/legacy_blocks: GGML's 32-element block formats (see legacy_blocks.h for the contract).
//
// Bit-exactness with GGML/gguf-py relies on each float operation being rounded separately; the
// default x86-64 target has no FMA, so the compiler cannot fuse them. The golden tests would
// catch a build that does.
#include "quant/legacy_blocks.h"

#include <cmath>

#include "block_io.h"
#include "quant/blocks.h"
#include "quant/float_convert.h"

namespace llms::quant {

using detail::load_block;
using detail::round_away_clamped;
using detail::store_block;
using detail::trunc_clamped;

namespace {

constexpr int kHalf = kQK / 2;

// The signed value of largest magnitude (the first one on ties), as GGML picks it.
float signed_absmax(const float* x, int n) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

float absmax(const float* x, int n) {
  float amax = 0.0f;
  for (int j = 0; j < n; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  return amax;
}

void min_max(const float* x, int n, float* min_out, float* max_out) {
  float min = x[0];
  float max = x[0];
  for (int j = 1; j < n; ++j) {
    min = std::fmin(min, x[j]);
    max = std::fmax(max, x[j]);
  }
  *min_out = min;
  *max_out = max;
}

uint32_t load_qh(const uint8_t qh[4]) {
  return static_cast<uint32_t>(qh[0]) | static_cast<uint32_t>(qh[1]) << 8 |
         static_cast<uint32_t>(qh[2]) << 16 | static_cast<uint32_t>(qh[3]) << 24;
}

void store_qh(uint32_t value, uint8_t qh[4]) {
  for (int k = 0; k < 4; ++k) qh[k] = static_cast<uint8_t>(value >> (8 * k));
}

// Packs 32 values of 4 (or, with qh, 5) bits: element j in the low nibble of qs[j], element
// j + 16 in the high nibble; the fifth bits go to bit j of qh.
void pack_nibbles(const int q[kQK], uint8_t qs[kHalf], uint32_t* qh) {
  uint32_t high = 0;
  for (int j = 0; j < kHalf; ++j) {
    const int q0 = q[j];
    const int q1 = q[j + kHalf];
    qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
    high |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
    high |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + kHalf);
  }
  if (qh != nullptr) *qh = high;
}

// Unpacks what pack_nibbles wrote; qh may be 0 for the 4-bit formats.
void unpack_nibbles(const uint8_t qs[kHalf], uint32_t qh, int q[kQK]) {
  for (int j = 0; j < kHalf; ++j) {
    q[j] = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
    q[j + kHalf] = (qs[j] >> 4) | static_cast<int>(((qh >> (j + kHalf)) & 1u) << 4);
  }
}

// Symmetric formats Q4_0/Q5_0: d = max / -levels/2 so the largest-magnitude value lands on the
// most negative level; q = trunc(x / d + levels/2 + 0.5).
float quantize_symmetric(const float* x, int n_levels, int q[kQK]) {
  const float max = signed_absmax(x, kQK);
  const float half = static_cast<float>(n_levels / 2);
  const float d = max / -half;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK; ++j) q[j] = trunc_clamped(x[j] * id + (half + 0.5f), 0, n_levels - 1);
  return d;
}

// Affine formats Q4_1/Q5_1: x = d * q + min over [min, max].
void quantize_affine(const float* x, int n_levels, int q[kQK], float* d_out, float* min_out) {
  float min;
  float max;
  min_max(x, kQK, &min, &max);
  const float d = (max - min) / static_cast<float>(n_levels - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK; ++j) q[j] = trunc_clamped((x[j] - min) * id + 0.5f, 0, n_levels - 1);
  *d_out = d;
  *min_out = min;
}

}  // namespace

void dequantize_q4_0(const void* src, float* dst, int64_t n_blocks) {
  int q[kQK];
  for (int64_t i = 0; i < n_blocks; ++i) {
    const auto block = load_block<BlockQ4_0>(src, i);
    const float d = fp16_to_fp32(block.d);
    unpack_nibbles(block.qs, 0, q);
    for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = d * static_cast<float>(q[j] - 8);
  }
}

void dequantize_q4_1(const void* src, float* dst, int64_t n_blocks) {
  int q[kQK];
  for (int64_t i = 0; i < n_blocks; ++i) {
    const auto block = load_block<BlockQ4_1>(src, i);
    const float d = fp16_to_fp32(block.d);
    const float m = fp16_to_fp32(block.m);
    unpack_nibbles(block.qs, 0, q);
    for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = d * static_cast<float>(q[j]) + m;
  }
}

void dequantize_q5_0(const void* src, float* dst, int64_t n_blocks) {
  int q[kQK];
  for (int64_t i = 0; i < n_blocks; ++i) {
    const auto block = load_block<BlockQ5_0>(src, i);
    const float d = fp16_to_fp32(block.d);
    unpack_nibbles(block.qs, load_qh(block.qh), q);
    for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = d * static_cast<float>(q[j] - 16);
  }
}

void dequantize_q5_1(const void* src, float* dst, int64_t n_blocks) {
  int q[kQK];
  for (int64_t i = 0; i < n_blocks; ++i) {
    const auto block = load_block<BlockQ5_1>(src, i);
    const float d = fp16_to_fp32(block.d);
    const float m = fp16_to_fp32(block.m);
    unpack_nibbles(block.qs, load_qh(block.qh), q);
    for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = d * static_cast<float>(q[j]) + m;
  }
}

void dequantize_q8_0(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    const auto block = load_block<BlockQ8_0>(src, i);
    const float d = fp16_to_fp32(block.d);
    for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = d * static_cast<float>(block.qs[j]);
  }
}

void dequantize_q8_1(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    const auto block = load_block<BlockQ8_1>(src, i);
    const float d = fp16_to_fp32(block.d);
    for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = d * static_cast<float>(block.qs[j]);
  }
}

void quantize_q4_0(const float* src, void* dst, int64_t n_blocks) {
  int q[kQK];
  for (int64_t i = 0; i < n_blocks; ++i) {
    BlockQ4_0 block{};
    block.d = fp32_to_fp16(quantize_symmetric(src + i * kQK, 16, q));
    pack_nibbles(q, block.qs, nullptr);
    store_block(dst, i, block);
  }
}

void quantize_q4_1(const float* src, void* dst, int64_t n_blocks) {
  int q[kQK];
  for (int64_t i = 0; i < n_blocks; ++i) {
    float d;
    float min;
    quantize_affine(src + i * kQK, 16, q, &d, &min);
    BlockQ4_1 block{};
    block.d = fp32_to_fp16(d);
    block.m = fp32_to_fp16(min);
    pack_nibbles(q, block.qs, nullptr);
    store_block(dst, i, block);
  }
}

void quantize_q5_0(const float* src, void* dst, int64_t n_blocks) {
  int q[kQK];
  for (int64_t i = 0; i < n_blocks; ++i) {
    BlockQ5_0 block{};
    block.d = fp32_to_fp16(quantize_symmetric(src + i * kQK, 32, q));
    uint32_t qh;
    pack_nibbles(q, block.qs, &qh);
    store_qh(qh, block.qh);
    store_block(dst, i, block);
  }
}

void quantize_q5_1(const float* src, void* dst, int64_t n_blocks) {
  int q[kQK];
  for (int64_t i = 0; i < n_blocks; ++i) {
    float d;
    float min;
    quantize_affine(src + i * kQK, 32, q, &d, &min);
    BlockQ5_1 block{};
    block.d = fp32_to_fp16(d);
    block.m = fp32_to_fp16(min);
    uint32_t qh;
    pack_nibbles(q, block.qs, &qh);
    store_qh(qh, block.qh);
    store_block(dst, i, block);
  }
}

void quantize_q8_0(const float* src, void* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    const float* x = src + i * kQK;
    const float d = absmax(x, kQK) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8_0 block{};
    block.d = fp32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) {
      block.qs[j] = static_cast<int8_t>(round_away_clamped(x[j] * id, -127, 127));
    }
    store_block(dst, i, block);
  }
}

void quantize_q8_1(const float* src, void* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    const float* x = src + i * kQK;
    const float d = absmax(x, kQK) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8_1 block{};
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      const int q = round_away_clamped(x[j] * id, -127, 127);
      block.qs[j] = static_cast<int8_t>(q);
      sum += q;
    }
    block.d = fp32_to_fp16(d);
    block.s = fp32_to_fp16(static_cast<float>(sum) * d);
    store_block(dst, i, block);
  }
}

}  // namespace llms::quant
