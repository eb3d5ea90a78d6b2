// cuda/ops: the row-wise f32 operations of a transformer step on the GPU (contract of each
// function in cuda/device_kernels.h).
//
// They mirror the scalar references of kernels/ops.cpp formula for formula, so the conformance
// tests can hold them to a few f32 ulps: rms_norm computes 1 / sqrt(mean + eps) with correctly
// rounded sqrtf and division (its sum of squares is f32, the CPU's double); rope and the gelu
// argument multiply and add with the _rn intrinsics, so that nvcc does not contract them into
// FMAs the scalar reference does not use; silu and gelu use the accurate expf, never __expf (this
// file must not be built with --use_fast_math). Every launch is checked (cuda/launch.h); an
// empty input launches nothing. weight == nullptr in rms_norm means all ones, as on the CPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda_check.h"
#include "device_kernels.h"
#include "launch.h"

namespace llms::cuda {
namespace {

constexpr int kWarpSize = 32;
constexpr int kElementwiseThreads = 256;
// Grid-stride kernels launch at most this many blocks: enough to fill an H100 several times over,
// and few enough that every thread does a handful of elements on the largest tensors.
constexpr int64_t kMaxElementwiseBlocks = 4096;

// Rows shorter than this get one warp each (four rows per 128-thread block); longer rows (the
// model width, thousands of values) get a whole 256-thread block, so a decode step's single row
// is not left to one warp.
constexpr int32_t kBlockRowMinDim = 1024;
constexpr int kRowWarps = 4;
constexpr int kRowBlockThreads = 256;

int elementwise_blocks(int64_t n) {
  const int64_t blocks = (n + kElementwiseThreads - 1) / kElementwiseThreads;
  return static_cast<int>(std::min(blocks, kMaxElementwiseBlocks));
}

__device__ __forceinline__ float warp_sum(float v) {
  // xor butterfly: every lane ends with the same total, summed in the same order.
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// y = x * inv * weight, elementwise, as kernels::rms_norm_ref orders it.
__device__ __forceinline__ float scaled(float x, float inv, const float* weight, int32_t e) {
  const float w = weight != nullptr ? weight[e] : 1.0f;
  return __fmul_rn(__fmul_rn(x, inv), w);
}

__device__ __forceinline__ float inverse_rms(float sum_squares, int32_t dim, float eps) {
  return 1.0f / sqrtf(sum_squares / static_cast<float>(dim) + eps);
}

// One warp per row. Every lane reads and later writes the same elements (e = lane + 32k), and
// the shuffle reduction completes every lane's reads before any lane writes, so y may be x.
__global__ void __launch_bounds__(kRowWarps* kWarpSize)
    rms_norm_warp_kernel(const float* x, const float* weight, float* y, int32_t n_rows, int32_t dim,
                         float eps) {
  const int32_t row =
      static_cast<int32_t>(blockIdx.x) * kRowWarps + static_cast<int32_t>(threadIdx.x) / kWarpSize;
  if (row >= n_rows) return;  // whole warps leave together: the shuffles stay full
  const int32_t lane = static_cast<int32_t>(threadIdx.x) % kWarpSize;
  const float* xr = x + static_cast<int64_t>(row) * dim;
  float* yr = y + static_cast<int64_t>(row) * dim;
  float sum = 0.0f;
  for (int32_t e = lane; e < dim; e += kWarpSize) sum += xr[e] * xr[e];
  const float inv = inverse_rms(warp_sum(sum), dim, eps);
  for (int32_t e = lane; e < dim; e += kWarpSize) yr[e] = scaled(xr[e], inv, weight, e);
}

// One block per row, for wide rows. Each thread writes only the elements it read itself, and the
// __syncthreads between the phases orders everything else, so y may be x.
__global__ void __launch_bounds__(kRowBlockThreads)
    rms_norm_block_kernel(const float* x, const float* weight, float* y, int32_t dim, float eps) {
  constexpr int kWarps = kRowBlockThreads / kWarpSize;
  __shared__ float partial[kWarps];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * dim;
  float* yr = y + row * dim;
  const int32_t tid = static_cast<int32_t>(threadIdx.x);
  float sum = 0.0f;
  for (int32_t e = tid; e < dim; e += kRowBlockThreads) sum += xr[e] * xr[e];
  sum = warp_sum(sum);
  if (tid % kWarpSize == 0) partial[tid / kWarpSize] = sum;
  __syncthreads();
  // Every thread adds the warps' partials in the same order: one value for the whole row.
  float total = 0.0f;
  for (int w = 0; w < kWarps; ++w) total += partial[w];
  const float inv = inverse_rms(total, dim, eps);
  for (int32_t e = tid; e < dim; e += kRowBlockThreads) yr[e] = scaled(xr[e], inv, weight, e);
}

__global__ void __launch_bounds__(kElementwiseThreads)
    add_bias_kernel(float* x, const float* bias, int32_t dim) {
  float* xr = x + static_cast<int64_t>(blockIdx.x) * dim;
  for (int32_t e = static_cast<int32_t>(threadIdx.x); e < dim; e += kElementwiseThreads) {
    xr[e] += bias[e];
  }
}

__global__ void __launch_bounds__(kElementwiseThreads)
    add_kernel(float* x, const float* y, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kElementwiseThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kElementwiseThreads + threadIdx.x; i < n;
       i += stride) {
    x[i] += y[i];
  }
}

// One block per token; its threads walk the token's (head, pair) grid. Each pair is read and
// written by one thread only, so the rotation is in place without hazards.
__global__ void __launch_bounds__(kElementwiseThreads)
    rope_kernel(float* x, int32_t n_heads, int32_t head_dim, const float* cos, const float* sin,
                bool neox) {
  const int32_t half = head_dim / 2;
  const int64_t t = blockIdx.x;
  float* xt = x + t * n_heads * head_dim;
  const float* ct = cos + t * half;
  const float* st = sin + t * half;
  const int32_t n_pairs = n_heads * half;
  for (int32_t idx = static_cast<int32_t>(threadIdx.x); idx < n_pairs; idx += kElementwiseThreads) {
    const int32_t h = idx / half;
    const int32_t p = idx - h * half;
    float* v = xt + static_cast<int64_t>(h) * head_dim;
    const int32_t i0 = neox ? p : 2 * p;
    const int32_t i1 = neox ? p + half : 2 * p + 1;
    const float a = v[i0];
    const float b = v[i1];
    const float c = ct[p];
    const float s = st[p];
    // Unfused, as kernels::rope_apply_ref rounds: a * c - b * s and a * s + b * c.
    v[i0] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
    v[i1] = __fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c));
  }
}

__global__ void __launch_bounds__(kElementwiseThreads)
    silu_mul_kernel(float* gate, const float* up, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kElementwiseThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kElementwiseThreads + threadIdx.x; i < n;
       i += stride) {
    const float g = gate[i];
    // Large negative g: expf(-g) = inf and g / inf = -0, as on the CPU.
    gate[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

__global__ void __launch_bounds__(kElementwiseThreads)
    gelu_tanh_mul_kernel(float* gate, const float* up, int64_t n) {
  // 0.5 * (1 + tanh(u)) == 1 / (1 + exp(-2u)): the sigmoid form of kernels::gelu_tanh_mul_ref,
  // which avoids the cancellation in 1 + tanh(u) for negative u. 2 * sqrt(2 / pi):
  constexpr float kTwoSqrt2OverPi = 1.5957691216057308f;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kElementwiseThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kElementwiseThreads + threadIdx.x; i < n;
       i += stride) {
    const float g = gate[i];
    // Unfused like the reference: kTwoSqrt2OverPi * (g + 0.044715f * g * g * g).
    const float cube = __fmul_rn(__fmul_rn(__fmul_rn(0.044715f, g), g), g);
    const float u2 = __fmul_rn(kTwoSqrt2OverPi, __fadd_rn(g, cube));
    gate[i] = g / (1.0f + expf(-u2)) * up[i];
  }
}

}  // namespace

void rms_norm(const float* x, const float* weight, float* y, int32_t n_rows, int32_t dim, float eps,
              cudaStream_t stream) {
  if (n_rows <= 0 || dim <= 0) return;
  if (dim >= kBlockRowMinDim) {
    launch("rms_norm_block_kernel", rms_norm_block_kernel, static_cast<unsigned>(n_rows),
           kRowBlockThreads, stream, x, weight, y, dim, eps);
  } else {
    const unsigned blocks = static_cast<unsigned>((n_rows + kRowWarps - 1) / kRowWarps);
    launch("rms_norm_warp_kernel", rms_norm_warp_kernel, blocks, kRowWarps * kWarpSize, stream, x,
           weight, y, n_rows, dim, eps);
  }
}

void add_bias(float* x, const float* bias, int32_t n_rows, int32_t dim, cudaStream_t stream) {
  if (n_rows <= 0 || dim <= 0) return;
  launch("add_bias_kernel", add_bias_kernel, static_cast<unsigned>(n_rows), kElementwiseThreads,
         stream, x, bias, dim);
}

void add(float* x, const float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  launch("add_kernel", add_kernel, elementwise_blocks(n), kElementwiseThreads, stream, x, y, n);
}

void rope(float* x, int32_t n_tokens, int32_t n_heads, int32_t head_dim, const float* cos,
          const float* sin, bool neox, cudaStream_t stream) {
  if (n_tokens <= 0 || n_heads <= 0 || head_dim < 2) return;
  launch("rope_kernel", rope_kernel, static_cast<unsigned>(n_tokens), kElementwiseThreads, stream,
         x, n_heads, head_dim, cos, sin, neox);
}

void silu_mul(float* gate, const float* up, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  launch("silu_mul_kernel", silu_mul_kernel, elementwise_blocks(n), kElementwiseThreads, stream,
         gate, up, n);
}

void gelu_tanh_mul(float* gate, const float* up, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  launch("gelu_tanh_mul_kernel", gelu_tanh_mul_kernel, elementwise_blocks(n), kElementwiseThreads,
         stream, gate, up, n);
}

}  // namespace llms::cuda
