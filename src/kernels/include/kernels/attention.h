// kernels/attention: the inner step of paged attention, one tile of query rows against one
// block of keys and values, with a block-wise online softmax.
//
// Contract:
//   - A tile is n_rows query rows (q already multiplied by the softmax scale) that share one
//     KV head, with per row a running max, a running sum of exp(score - max) and an
//     unnormalised output accumulator acc = sum_j exp(score_j - max) * v_j. Start a row with
//     max = -inf, sum = 0, acc = 0; after its last block its output is acc / sum.
//   - attention_block() folds one cache block of n_keys keys and values (KvBlock: f32, f16,
//     or int8 / fp8 with per-slot scales; keys dim-major, element e of key j at k[e * k_stride +
//     j], so the scores of consecutive keys come out in vector lanes without a horizontal sum;
//     values key-major, key j's at v + j * head_dim_v) into every row: row r sees keys key_begin[r]
//     <= j < key_end[r] (the causal mask and the sliding window, cut to this block); other keys do
//     not exist for it, and a row that sees none is left untouched. Keys outside a row's range, and
//     the slots of the block past n_keys, may hold any bits (their scales too): they never reach
//     that row's result.
//   - Each row's result depends only on its own q, range and state and on the block: never on
//     the other rows of the tile nor on n_rows (batch invariance relies on it).
//   - `scores` is scratch for n_rows * k_stride floats.
//   - The AVX2 path needs k_stride and head_dim_v to be multiples of 8 and falls back to the
//     scalar reference otherwise; it matches the reference to f32 rounding (its exp is a
//     polynomial with relative error below 1e-6; inputs below -87.3 give exactly 0).
//   - The free functions run the best_isa() path (AVX-512 CPUs use AVX2); attention_table(isa)
//     gives one ISA's functions for tests and throws llms::Error(kInvalidArgument) for an ISA
//     the CPU cannot run.
#pragma once

#include <cstdint>

#include "kernels/cpu_features.h"

namespace llms::kernels {

struct AttentionTile {
  const float* q = nullptr;            // n_rows x head_dim_k, contiguous, pre-scaled
  float* acc = nullptr;                // n_rows x head_dim_v, contiguous
  float* max = nullptr;                // n_rows
  float* sum = nullptr;                // n_rows
  const int32_t* key_begin = nullptr;  // n_rows
  const int32_t* key_end = nullptr;    // n_rows
  float* scores = nullptr;             // scratch, n_rows x k_stride
  int32_t n_rows = 0;
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
};

// How the cache stores one element. The 8-bit types are quantized per token: each key and each
// value vector of one KV head has its own scale (a bfloat16, rounded up so that nothing clips),
// and element = decoded byte * scale, where an int8 byte decodes to its integer and an fp8 one
// to its E4M3 value (quant/float_convert.h).
enum class KvElement : uint8_t { kF32, kF16, kInt8, kFp8 };

// One block of one KV head as the cache holds it.
struct KvBlock {
  const void* k = nullptr;  // head_dim_k rows of k_stride keys (dim-major)
  const void* v = nullptr;  // k_stride rows of head_dim_v values (key-major)
  // kInt8 / kFp8 only: per slot, the bf16 scale of its key / of its value (k_stride each).
  const uint16_t* k_scale = nullptr;
  const uint16_t* v_scale = nullptr;
  int32_t k_stride = 0;  // slots per block, >= n_keys
  KvElement element = KvElement::kF32;
};

void attention_block(const AttentionTile& tile, const KvBlock& block, int32_t n_keys);

// y[i] = exp(x[i]) for n values (y may alias x). Exactly 0 below -87.3.
void exp_array(const float* x, float* y, int64_t n);

// An f16 KV cache: keys and values stored as IEEE half floats (f32 -> f16 rounds to nearest
// even, as F16C does; every path gives the same bits). attention_block widens them exactly.
void f32_to_f16_array(const float* x, uint16_t* y, int64_t n);

// An int8 or fp8 cache: quantizes one key or value vector of n elements, writing element i at
// out[i * stride] and the vector's bf16 scale at *scale (the largest magnitude over 127 for
// int8, over 448 for fp8, rounded up to a bfloat16; elements round to nearest, ties to even).
// A vector of zeros gets scale 0; one with a NaN or infinity gets a NaN scale, so the attention
// output it feeds is NaN rather than silently finite. Scalar on every ISA: one token's vectors
// per layer and head are few next to what attention reads.
void quantize_kv_vector(const float* x, int64_t n, KvElement element, uint8_t* out, int64_t stride,
                        uint16_t* scale);

struct AttentionTable {
  void (*block)(const AttentionTile& tile, const KvBlock& block, int32_t n_keys);
  void (*exp)(const float* x, float* y, int64_t n);
  void (*to_f16)(const float* x, uint16_t* y, int64_t n);
};

const AttentionTable& attention_table(Isa isa);

}  // namespace llms::kernels
