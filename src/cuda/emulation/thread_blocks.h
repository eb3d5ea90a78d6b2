// cuda/emulation/thread_blocks: a kernel's thread blocks run on the CPU.
//
// Each block runs on the calling OS thread, one block after another; each of the block's threads
// is a fiber with its own stack (a guard page below it), switched only where CUDA threads wait
// for each other: __syncthreads (every thread of the block that has not returned) and warp
// shuffles (all the warp's lanes). So the block's threads see each other's shared-memory writes
// exactly where CUDA orders them, a thread that waits at a barrier the others never reach is
// found (reported, not hung), and code that is wrong only under a real GPU's concurrency (a race
// between barriers) is not: the emulation checks what the kernels compute, not their timing.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>

namespace llms::cuda::emulation {

struct ThreadIndices {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};

namespace detail {
extern thread_local const ThreadIndices* current;
}

// The indices of the device thread running now (threadIdx, blockIdx, blockDim, gridDim).
inline const ThreadIndices& current_thread() { return *detail::current; }

// __syncthreads: returns once every thread of the block still running has called it.
void sync_threads();

// __syncwarp: returns once every lane of this thread's warp has called it (the full mask only).
void sync_warp(unsigned mask);

// __shfl_xor_sync: this lane's bits go to lane ^ lane_mask; returns that lane's. Only the full
// mask is taken (all the module's shuffles are whole-warp reductions).
uint64_t shuffle_xor(unsigned mask, uint64_t bits, int lane_mask);

// Runs body as every thread of every block of the grid; returns when all have returned. Throws
// llms::Error(kInternal) naming the kernel when its threads wait at a barrier that cannot
// complete, or rethrows what the body threw (the block's other threads are abandoned).
void run_grid(const char* kernel, dim3 grid, dim3 block, const std::function<void()>& body);

}  // namespace llms::cuda::emulation
