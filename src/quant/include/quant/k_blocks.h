// quant/k_blocks: scalar reference dequantize and quantize for GGML's 256-element "K-quant"
// super-block formats Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and Q8_K (layouts in blocks.h).
//
// Contract:
//   - Functions work on whole super-blocks: src/dst hold n_blocks blocks (n_blocks * 256
//     floats). Callers validate sizes (quant.h does); n_blocks <= 0 is a no-op. Block pointers
//     need no alignment.
//   - Dequantization evaluates exactly the float expression of the format, e.g. for Q4_K
//     (d * scale) * q - (dmin * min), each operation rounded to f32, so it matches GGML's
//     reference dequantizers and gguf-py bit for bit when multiply-adds are not fused.
//   - Quantization is a simple, deterministic reference: per sub-block a small grid search over
//     the scale followed by a least-squares refit, then the sub-block scales are quantized
//     against the super-block scale and every value is re-rounded against the scale it will
//     actually be decoded with. It is not llama.cpp's search and does not give its bytes; it
//     gives comparable error (see the round-trip tests for the measured bounds). Non-finite
//     input gives unspecified but well-defined bytes.
#pragma once

#include <cstdint>

namespace llms::quant {

// Sub-block j (0..7) of a Q4_K/Q5_K block: its 6-bit scale and 6-bit min, unpacked from the
// 12 packed bytes. Bytes 0..3 hold scales 0..3 (low 6 bits) and the top 2 bits of scales 4..7;
// bytes 4..7 likewise for the mins; bytes 8..11 hold the low 4 bits of scale (low nibble) and
// min (high nibble) of sub-blocks 4..7.
inline void k_scale_min(int j, const uint8_t* scales, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = scales[j] & 63;
    *min = scales[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

// The inverse of k_scale_min for all 8 sub-blocks; values must be < 64.
void k_pack_scale_min(const uint8_t scale[8], const uint8_t min[8], uint8_t* scales);

void dequantize_q2_K(const void* src, float* dst, int64_t n_blocks);
void dequantize_q3_K(const void* src, float* dst, int64_t n_blocks);
void dequantize_q4_K(const void* src, float* dst, int64_t n_blocks);
void dequantize_q5_K(const void* src, float* dst, int64_t n_blocks);
void dequantize_q6_K(const void* src, float* dst, int64_t n_blocks);
void dequantize_q8_K(const void* src, float* dst, int64_t n_blocks);

void quantize_q2_K(const float* src, void* dst, int64_t n_blocks);
void quantize_q3_K(const float* src, void* dst, int64_t n_blocks);
void quantize_q4_K(const float* src, void* dst, int64_t n_blocks);
void quantize_q5_K(const float* src, void* dst, int64_t n_blocks);
void quantize_q6_K(const float* src, void* dst, int64_t n_blocks);
// Q8_K as GGML makes it for activations: d = -max/127 where max is the signed value of largest
// magnitude, q = round-half-even(x / d), bsums = sums of 16 consecutive q.
void quantize_q8_K(const float* src, void* dst, int64_t n_blocks);

}  // namespace llms::quant
