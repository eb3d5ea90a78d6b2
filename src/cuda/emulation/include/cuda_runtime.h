// The device side of CUDA C++ as the CPU emulation provides it (docs/CUDA.md, "The CPU emulation"):
// the qualifiers, the built-in indices, __syncthreads, warp shuffles and the intrinsics the
// module's kernels use. A kernel is an ordinary function; each of a block's threads runs it on its
// own fiber (cuda/emulation/thread_blocks.h), so the built-in indices are those of the running
// fiber and __shared__ variables (function statics) are shared by the block, whose threads alone
// run until it ends.
#pragma once

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "emulation/thread_blocks.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define threadIdx (::llms::cuda::emulation::current_thread().thread_idx)
#define blockIdx (::llms::cuda::emulation::current_thread().block_idx)
#define blockDim (::llms::cuda::emulation::current_thread().block_dim)
#define gridDim (::llms::cuda::emulation::current_thread().grid_dim)

inline void __syncthreads() { ::llms::cuda::emulation::sync_threads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::llms::cuda::emulation::sync_warp(mask); }

// Lane (this lane ^ lane_mask)'s v. Every lane of the warp must take part (mask all ones): a
// lane that has left makes the others wait forever, which the emulation reports.
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask) {
  static_assert(sizeof(T) <= sizeof(uint64_t), "a shuffle moves at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof v);
  bits = ::llms::cuda::emulation::shuffle_xor(mask, bits, lane_mask);
  T out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

// Each rounded on its own (the emulation is built with -ffp-contract=off, so nothing is fused).
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __expf(float x) { return std::exp(x); }

inline float __uint_as_float(unsigned bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline unsigned __float_as_uint(float f) {
  unsigned bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// The device library's integer min and max (the kernels call them unqualified).
inline int max(int a, int b) { return a > b ? a : b; }
inline int min(int a, int b) { return a < b ? a : b; }

inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
