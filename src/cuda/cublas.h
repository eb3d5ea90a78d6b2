// cuda/cublas: the one cuBLAS call the runner makes (a bf16 GEMM with f32 results), through
// libcublas loaded when the first CUDA runner starts.
//
// Why not linked: libcublasLt alone is ~540 MB, and a linked cuBLAS made every llmserve process
// (CPU-only runs and every test included) load it at start, ~0.1 s and ~220 MB resident. The
// library is opened with dlopen by its soname when first needed; a machine without it (a GPU
// machine with the driver only) still runs, and says so (cublas_unavailable_reason()).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace llms::cuda {

// Empty when libcublas loads; else why not (the runner then multiplies larger batches with the
// GEMV kernels, a few rows at a time).
std::string cublas_unavailable_reason();

class Cublas {
 public:
  // Throws llms::Error(kUnavailable) when libcublas cannot be loaded, kInternal when no handle
  // can be made.
  explicit Cublas(cudaStream_t stream);
  ~Cublas();
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;

  // y[i * ldy + r] = sum_c w[r * k + c] * x[i * k + c] for r < rows, i < m: bf16 row-major
  // weights (rows x k) and activations (m x k), f32 products and results.
  void gemm_bf16(const uint16_t* w, const uint16_t* x, float* y, int64_t rows, int64_t m, int64_t k,
                 int64_t ldy);

 private:
  void* handle_ = nullptr;  // cublasHandle_t
};

}  // namespace llms::cuda
