// cuda/host_device: qualifiers for functions that both the host and the kernels call (the block
// decoders, the attention's tile arithmetic). Under nvcc they are __host__ __device__; the C++
// compiler (host code, the CPU emulation, the host tests) sees ordinary inline functions.
#pragma once

#if defined(__CUDACC__)
#define LLMS_HOST_DEVICE __host__ __device__
#define LLMS_FORCE_INLINE __forceinline__
#else
#define LLMS_HOST_DEVICE
#define LLMS_FORCE_INLINE inline
#endif
