// The CUDA backend of a build with it (LLMS_CUDA on): device discovery and the runner.
#include <cuda_runtime_api.h>
#include <fmt/core.h>

#include "cublas.h"
#include "cuda/cuda_backend.h"
#include "cuda_runner.h"
#include "util/error.h"

namespace llms::cuda {

bool compiled_in() { return true; }

std::string gemm_path() {
#if defined(LLMS_CUDA_EMULATION)
  // A host loop stands for cuBLAS (cuda/emulation): nothing to measure a GPU's rate against.
  return "emulated";
#else
  const std::string why = cublas_unavailable_reason();
  return why.empty() ? std::string("cublas") : "tiled: " + why;
#endif
}

Probe probe() {
  Probe p;
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    int driver = 0;
    int runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    std::string driver_text =
        driver == 0 ? std::string("no NVIDIA driver is loaded")
                    : fmt::format("driver supports CUDA {}.{}", driver / 1000, driver % 1000 / 10);
    p.why_none = fmt::format(
        "no usable CUDA device: cudaGetDeviceCount: {} ({}); {}, this build "
        "needs CUDA {}.{}",
        cudaGetErrorName(error), cudaGetErrorString(error), driver_text, runtime / 1000,
        runtime % 1000 / 10);
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return p;
  }
  if (count == 0) {
    p.why_none = "no CUDA device: cudaGetDeviceCount found none";
    return p;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    DeviceInfo d;
    d.index = i;
    d.name = prop.name;
    d.compute_major = prop.major;
    d.compute_minor = prop.minor;
    d.total_bytes = prop.totalGlobalMem;
    d.multiprocessors = prop.multiProcessorCount;
    // Properties only: asking for free memory would create a context (hundreds of MB) on every
    // GPU of the machine; the runner asks its own device.
    p.devices.push_back(std::move(d));
  }
  cudaGetLastError();
  if (p.devices.empty()) p.why_none = "no CUDA device answered cudaGetDeviceProperties";
  return p;
}

std::unique_ptr<model::ModelRunner> make_runner(const gguf::GgufFile& file,
                                                const RunnerOptions& options) {
  if (!(options.gpu_memory_utilization > 0.0) || options.gpu_memory_utilization > 1.0) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("--gpu-memory-utilization: {} is not in (0, 1]",
                            options.gpu_memory_utilization));
  }
  const Probe p = probe();
  if (p.devices.empty()) throw Error(Error::Kind::kUnavailable, "--device cuda: " + p.why_none);
  const DeviceInfo* device = nullptr;
  for (const DeviceInfo& d : p.devices) {
    if (d.index == options.device) device = &d;
  }
  if (device == nullptr) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("--device cuda:{}: this machine has {} CUDA device(s)", options.device,
                            p.devices.size()));
  }
  if (device->compute_major < 8) {
    throw Error(
        Error::Kind::kUnsupported,
        fmt::format("--device cuda:{}: {} has compute capability {}.{}; the CUDA runner "
                    "needs 8.0 or later (A100, H100, H200 and newer)",
                    device->index, device->name, device->compute_major, device->compute_minor));
  }
  return std::make_unique<CudaRunner>(file, *device, options);
}

}  // namespace llms::cuda
