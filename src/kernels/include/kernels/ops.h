// kernels/ops: the row-wise f32 operations of a transformer step.
//
// Contract:
//   - Every op has a scalar reference and an AVX2 path (AVX-512 CPUs use the AVX2 one: these
//     ops are memory- or latency-bound on rows of a few thousand values, so wider vectors do
//     not pay). The free functions run the best_isa() path; op_table(isa) gives one ISA's
//     functions for tests and benchmarks, and throws llms::Error(kInvalidArgument) for an ISA
//     the CPU cannot run.
//   - n >= 0; n == 0 is a no-op (dot returns 0). Outputs may alias inputs exactly (in place)
//     but must not partly overlap them.
//   - SIMD paths match the scalar reference to a few f32 ulps (exp, sigmoid and tanh use
//     polynomial approximations with relative error below 1e-6 over the f32 range).
#pragma once

#include <cstdint>

#include "kernels/cpu_features.h"

namespace llms::kernels {

// y = x / sqrt(mean(x^2) + eps) * weight; weight == nullptr means all ones.
void rms_norm(const float* x, const float* weight, float* y, int64_t n, float eps);
// x = exp(x - max) / sum, numerically stable; entries of -inf become 0. If every entry is -inf
// (a fully masked row) the result is all zeros.
void softmax(float* x, int64_t n);
// SwiGLU: out = silu(gate) * up, silu(g) = g / (1 + exp(-g)).
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
// GeGLU with the tanh approximation (Gemma):
// out = 0.5 * g * (1 + tanh(sqrt(2 / pi) * (g + 0.044715 * g^3))) * up.
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n);
void add(const float* a, const float* b, float* out, int64_t n);  // out = a + b
void scale(float* x, float s, int64_t n);                         // x *= s
float dot(const float* a, const float* b, int64_t n);
void axpy(float a, const float* x, float* y, int64_t n);  // y += a * x

enum class RopeMode {
  kNormal,  // adjacent pairs (x[2i], x[2i+1]): llama-style GGUF
  kNeox,    // halves (x[i], x[i + head_dim/2]): qwen2, gemma3
};

// Rotates n_heads consecutive vectors of head_dim (even) values in place for token position
// pos >= 0: pair i turns by theta_i = pos * freq_scale * freq_base^(-2i / head_dim). The
// angles and their cos/sin are computed in double, so any pos up to 1e6 and beyond is exact
// to f32 rounding. The last table is cached per thread, so rotating q and then k of the same
// token computes it once. A bad head_dim (odd, <= 0) or pos < 0 throws
// llms::Error(kInvalidArgument).
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t pos, float freq_base,
          float freq_scale, RopeMode mode);

// The two halves of rope, for callers that keep their own per-position tables:
// cos[i], sin[i] of theta_i for i < head_dim / 2, then the rotation with them.
void rope_cos_sin(int64_t pos, int64_t head_dim, float freq_base, float freq_scale, float* cos,
                  float* sin);
void rope_apply(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin,
                RopeMode mode);

// One ISA's implementations (tests, benchmarks).
struct OpTable {
  void (*rms_norm)(const float* x, const float* weight, float* y, int64_t n, float eps);
  void (*softmax)(float* x, int64_t n);
  void (*silu_mul)(const float* gate, const float* up, float* out, int64_t n);
  void (*gelu_tanh_mul)(const float* gate, const float* up, float* out, int64_t n);
  void (*add)(const float* a, const float* b, float* out, int64_t n);
  void (*scale)(float* x, float s, int64_t n);
  float (*dot)(const float* a, const float* b, int64_t n);
  void (*axpy)(float a, const float* x, float* y, int64_t n);
  void (*rope_apply)(float* x, int64_t n_heads, int64_t head_dim, const float* cos,
                     const float* sin, RopeMode mode);
};

const OpTable& op_table(Isa isa);

}  // namespace llms::kernels
