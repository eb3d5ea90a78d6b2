// quant/k_blocks: dequantizers of the K-quant super-blocks (contract in k_blocks.h).
//
// Each output is the same float expression, in the same order, as GGML's reference dequantizer:
// the sub-block factor (d * scale, dmin * min) is rounded to f32 first, then multiplied by q.
// Bit-exactness relies on no fused multiply-add (true for the default x86-64 target).
#include "quant/k_blocks.h"

#include "block_io.h"
#include "k_layout.h"
#include "quant/blocks.h"
#include "quant/float_convert.h"

namespace llms::quant {

using detail::load_block;

void k_pack_scale_min(const uint8_t scale[8], const uint8_t min[8], uint8_t* scales) {
  for (int j = 0; j < 4; ++j) {
    scales[j] = static_cast<uint8_t>((scale[j] & 63) | ((scale[j + 4] >> 4) << 6));
    scales[j + 4] = static_cast<uint8_t>((min[j] & 63) | ((min[j + 4] >> 4) << 6));
    scales[j + 8] = static_cast<uint8_t>((scale[j + 4] & 0x0f) | ((min[j + 4] & 0x0f) << 4));
  }
}

void dequantize_q2_K(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    const auto block = load_block<BlockQ2_K>(src, i);
    const float d = fp16_to_fp32(block.d);
    const float dmin = fp16_to_fp32(block.dmin);
    float* y = dst + i * kQK_K;
    for (int sub = 0; sub < kQK_K / 16; ++sub) {
      const float dl = d * static_cast<float>(block.scales[sub] & 0x0f);
      const float ml = dmin * static_cast<float>(block.scales[sub] >> 4);
      for (int e = 16 * sub; e < 16 * sub + 16; ++e) {
        y[e] = dl * static_cast<float>(detail::get_crumb(block.qs, e)) - ml;
      }
    }
  }
}

void dequantize_q3_K(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    const auto block = load_block<BlockQ3_K>(src, i);
    const float d = fp16_to_fp32(block.d);
    float* y = dst + i * kQK_K;
    for (int sub = 0; sub < kQK_K / 16; ++sub) {
      const float dl = d * static_cast<float>(detail::get_q3_scale(block.scales, sub));
      for (int e = 16 * sub; e < 16 * sub + 16; ++e) {
        // A clear high bit means "subtract 4": q spans [-4, 3].
        const int q = detail::get_crumb(block.qs, e) - (detail::get_bit(block.hmask, e) ? 0 : 4);
        y[e] = dl * static_cast<float>(q);
      }
    }
  }
}

void dequantize_q4_K(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    const auto block = load_block<BlockQ4_K>(src, i);
    const float d = fp16_to_fp32(block.d);
    const float dmin = fp16_to_fp32(block.dmin);
    float* y = dst + i * kQK_K;
    for (int sub = 0; sub < 8; ++sub) {
      uint8_t scale;
      uint8_t min;
      k_scale_min(sub, block.scales, &scale, &min);
      const float dl = d * static_cast<float>(scale);
      const float ml = dmin * static_cast<float>(min);
      for (int e = 32 * sub; e < 32 * sub + 32; ++e) {
        y[e] = dl * static_cast<float>(detail::get_k4(block.qs, e)) - ml;
      }
    }
  }
}

void dequantize_q5_K(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    const auto block = load_block<BlockQ5_K>(src, i);
    const float d = fp16_to_fp32(block.d);
    const float dmin = fp16_to_fp32(block.dmin);
    float* y = dst + i * kQK_K;
    for (int sub = 0; sub < 8; ++sub) {
      uint8_t scale;
      uint8_t min;
      k_scale_min(sub, block.scales, &scale, &min);
      const float dl = d * static_cast<float>(scale);
      const float ml = dmin * static_cast<float>(min);
      for (int e = 32 * sub; e < 32 * sub + 32; ++e) {
        const int q = detail::get_k4(block.qs, e) | (detail::get_bit(block.qh, e) << 4);
        y[e] = dl * static_cast<float>(q) - ml;
      }
    }
  }
}

void dequantize_q6_K(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    const auto block = load_block<BlockQ6_K>(src, i);
    const float d = fp16_to_fp32(block.d);
    float* y = dst + i * kQK_K;
    for (int sub = 0; sub < kQK_K / 16; ++sub) {
      const float dl = d * static_cast<float>(block.scales[sub]);
      for (int e = 16 * sub; e < 16 * sub + 16; ++e) {
        const int q = detail::get_k6_low(block.ql, e) | (detail::get_crumb(block.qh, e) << 4);
        y[e] = dl * static_cast<float>(q - 32);
      }
    }
  }
}

void dequantize_q8_K(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    const auto block = load_block<BlockQ8_K>(src, i);
    for (int e = 0; e < kQK_K; ++e) dst[i * kQK_K + e] = block.d * static_cast<float>(block.qs[e]);
  }
}

}  // namespace llms::quant
