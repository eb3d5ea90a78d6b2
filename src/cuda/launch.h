// cuda/launch: how the module's host code starts a kernel. Only .cu files include it.
//
// launch("name", kernel, grid, block, stream, args...) enqueues kernel<<<grid, block, 0,
// stream>>>(args...) and checks the launch (cuda/cuda_check.h: a bad configuration or an earlier
// asynchronous fault throws llms::Error naming the kernel). Every launch goes through here so
// that the CPU emulation of the device (cuda/emulation, LLMS_CUDA_EMULATION) can run the same
// kernels: there the arguments are converted to the kernel's parameter types, as the triple
// chevrons do, and the blocks run on the host.
#pragma once

#include <cuda_runtime_api.h>

#include <tuple>
#include <type_traits>
#include <utility>

#include "cuda_check.h"

#if defined(LLMS_CUDA_EMULATION)
#include "emulation/kernel_launch.h"
#endif

namespace llms::cuda {

template <class... Params, class... Args>
void launch(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream,
            Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "a kernel takes each of its parameters");
#if defined(LLMS_CUDA_EMULATION)
  emulation::launch_kernel(
      name, grid, block, stream,
      [kernel, params = std::tuple<std::decay_t<Params>...>(std::forward<Args>(args)...)] {
        std::apply(kernel, params);
      });
#else
  // The chevrons as nvcc reads them (clang-format formats a header as C++ and splits them).
  // clang-format off
  kernel<<<grid, block, 0, stream>>>(std::forward<Args>(args)...);
  // clang-format on
#endif
  check_launch(name);
}

}  // namespace llms::cuda
