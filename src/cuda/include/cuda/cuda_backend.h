// cuda/cuda_backend: whether this build and this machine can run a model on an NVIDIA GPU, and
// the CUDA model runner (model::ModelRunner) that does.
//
// Contract:
//   - compiled_in() says whether the build has the backend (CMake LLMS_CUDA; on wherever nvcc
//     was found). Without it, probe() reports no device and why, and make_runner() throws
//     llms::Error(kUnavailable) with that reason.
//   - probe() never throws: no driver, a driver older than the runtime, no device or an
//     unusable one each give an empty list and a reason naming the CUDA error.
//   - make_runner() loads the model's weights into the device's memory in their GGUF formats
//     (the types kernels::matmul takes) and throws before allocating when they do not fit in
//     gpu_memory_utilization of the card (kUnavailable), and for what the CUDA runner does not
//     implement yet (kUnsupported, naming it). Its KV pool lives in device memory: the engine
//     sizes it by ModelRunner::kv_memory_available().
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/model_runner.h"

namespace llms::cuda {

bool compiled_in();

struct DeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  size_t total_bytes = 0;
  int multiprocessors = 0;
};

struct Probe {
  std::vector<DeviceInfo> devices;
  std::string why_none;  // set when devices is empty
};

Probe probe();

// Device memory the runner keeps out of every budget: the CUDA context's own allocations beyond
// what cudaMemGetInfo reports at start, cuBLAS's workspace, and fragmentation.
inline constexpr size_t kDeviceReserveBytes = size_t{512} << 20;

struct RunnerOptions {
  int device = 0;
  // The share of the card's memory this runner may take in all (weights, step buffers and the
  // KV pool), as vLLM's --gpu-memory-utilization; in (0, 1].
  double gpu_memory_utilization = 0.9;
  // false: every kernel launched one by one, no captured step graphs (vLLM's --enforce-eager).
  bool use_graphs = true;
  // true: a sequence's numbers do not depend on what shares its step, as on the CPU: every
  // layer matrix takes the GEMV (f32, 8 rows at a time) whatever the step's size, instead of
  // the bf16 tensor-core GEMM for steps of more than 8 tokens. Prefill pays for it.
  bool batch_invariant = false;
};

std::unique_ptr<model::ModelRunner> make_runner(const gguf::GgufFile& file,
                                                const RunnerOptions& options);

// The floors a GPU benchmark is measured against, on the device itself (bench-model --device
// cuda): its read bandwidth in bytes per second (the best of `passes` full reads of a buffer of
// `bytes`) and its dense bf16 tensor-core rate in FLOP/s (the best of `passes` n x n x n
// GEMMs with f32 results, the kind prefill runs). Throw llms::Error(kUnavailable) without a
// device, as make_runner() does.
double measure_read_bandwidth(int device, size_t bytes, int passes);
// How the runner multiplies steps of more than 64 tokens: "cublas" (bf16 tensor cores on a bf16
// copy of the weights), or why not ("tiled: cannot load libcublas.so.13 ...": the tiled GEMM on
// the weights' blocks takes every step) where cuBLAS is missing.
std::string gemm_path();
double measure_bf16_gemm_flops(int device, int n, int passes);

}  // namespace llms::cuda
