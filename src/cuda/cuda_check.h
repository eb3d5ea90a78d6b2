// cuda/cuda_check: CUDA runtime errors as llms::Error.
//
// A failing CUDA call throws llms::Error naming the call and the runtime's message: kUnavailable
// for running out of device memory (the request or the model does not fit), kInternal for the
// rest (a launch or kernel fault; the engine ends the requests of the step). Kernels report
// execution faults only at the next synchronizing call, which names its own call.
#pragma once

#include <cuda_runtime_api.h>

namespace llms::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t error, const char* what);

inline void check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) throw_cuda_error(error, what);
}

// After a kernel launch: a bad launch configuration or an earlier asynchronous fault.
inline void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

}  // namespace llms::cuda
