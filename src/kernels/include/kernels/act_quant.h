// kernels/act_quant: on-the-fly quantization of f32 activations so that matmul's inner
// products with quantized weights are exact integer sums.
//
// Contract:
//   - ActQ8 (for the 32-element weight formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): per block of 32,
//     d = amax / 127 kept in f32 (not rounded to f16 as GGML's Q8_0 is), q = round-half-even(x
//     * (1 / d)) in [-127, 127], and sum = sum of q. A block of zeros gives d = 0, q = 0.
//   - ActQ8K (for Q4_K, Q5_K, Q6_K) is quant::BlockQ8_K, bit for bit what
//     quant::quantize_row(Q8_K) produces: d = -max / 127 with max the signed value of largest
//     magnitude, q = round-half-even(x / d), bsums = sums of 16 consecutive q.
//   - n must be a multiple of the block size (32 or 256); callers check (matmul does). Every
//     Isa gives the same bytes. Non-finite input gives well-defined garbage, never UB.
//   - An Isa the CPU cannot run throws llms::Error(kInvalidArgument).
#pragma once

#include <cstdint>

#include "kernels/cpu_features.h"
#include "quant/blocks.h"

namespace llms::kernels {

struct ActQ8 {
  float d;      // x ~ d * q
  int32_t sum;  // sum of qs
  int8_t qs[quant::kQK];
};
static_assert(sizeof(ActQ8) == 40);

using ActQ8K = quant::BlockQ8_K;

void quantize_act_q8(const float* x, int64_t n, ActQ8* out, Isa isa = best_isa());
void quantize_act_q8k(const float* x, int64_t n, ActQ8K* out, Isa isa = best_isa());

}  // namespace llms::kernels
