// cuda/emulation/kernel_launch: what cuda/launch.h and the emulated cuBLAS enqueue on a stream.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

namespace llms::cuda::emulation {

// Runs body as every thread of a grid x block launch on `stream`, now, or as a node of the graph
// the stream is capturing. As on the device, a bad configuration is reported by
// cudaGetLastError (cudaErrorInvalidConfiguration) and nothing runs; a fault inside the kernel
// (threads that wait forever at a barrier, an exception) is reported the same way, as
// cudaErrorLaunchFailure, whose cudaGetErrorString names the kernel and what went wrong.
void launch_kernel(const char* kernel, dim3 grid, dim3 block, cudaStream_t stream,
                   std::function<void()> body);

// Host work that stands for device work (the emulated cuBLAS GEMM), enqueued like a kernel.
cudaError_t enqueue(const char* what, cudaStream_t stream, std::function<void()> work);

}  // namespace llms::cuda::emulation
