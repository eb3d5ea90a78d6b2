// quant/legacy_blocks: scalar reference dequantize and quantize for GGML's 32-element block
// formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q8_1 (layouts in blocks.h).
//
// Contract:
//   - Functions work on whole blocks: src/dst hold n_blocks blocks (n_blocks * 32 floats).
//     Callers validate sizes (quant.h does); n_blocks <= 0 is a no-op.
//   - Block pointers need no alignment.
//   - Dequantization evaluates exactly the float expression of the format (for example
//     d * q + m for Q4_1, each operation rounded to f32), so it matches GGML's reference
//     dequantizers and gguf-py bit for bit when the compiler does not fuse multiply-adds.
//   - Quantization follows GGML's reference rounding (the one gguf-py reproduces), so the bytes
//     are identical to gguf-py's for finite input. Non-finite input gives unspecified but
//     well-defined bytes (no undefined behaviour).
#pragma once

#include <cstdint>

namespace llms::quant {

void dequantize_q4_0(const void* src, float* dst, int64_t n_blocks);
void dequantize_q4_1(const void* src, float* dst, int64_t n_blocks);
void dequantize_q5_0(const void* src, float* dst, int64_t n_blocks);
void dequantize_q5_1(const void* src, float* dst, int64_t n_blocks);
void dequantize_q8_0(const void* src, float* dst, int64_t n_blocks);
void dequantize_q8_1(const void* src, float* dst, int64_t n_blocks);

void quantize_q4_0(const float* src, void* dst, int64_t n_blocks);
void quantize_q4_1(const float* src, void* dst, int64_t n_blocks);
void quantize_q5_0(const float* src, void* dst, int64_t n_blocks);
void quantize_q5_1(const float* src, void* dst, int64_t n_blocks);
void quantize_q8_0(const float* src, void* dst, int64_t n_blocks);
// Q8_1 also stores s = d * sum(q), rounded to f16, for dot products with Q4_1/Q5_1.
void quantize_q8_1(const float* src, void* dst, int64_t n_blocks);

}  // namespace llms::quant
