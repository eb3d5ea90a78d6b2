// cuda/cublas.h for the CPU emulation of the device: the bf16 GEMM with f32 products and sums,
// enqueued on the runner's stream like the kernels (so a captured graph records it too).
#include <cstdint>

#include "cublas.h"
#include "emulation/kernel_launch.h"
#include "quant/float_convert.h"
#include "util/error.h"

namespace llms::cuda {

std::string cublas_unavailable_reason() { return {}; }

Cublas::Cublas(cudaStream_t stream) : handle_(stream) {}

Cublas::~Cublas() = default;

void Cublas::gemm_bf16(const uint16_t* w, const uint16_t* x, float* y, int64_t rows, int64_t m,
                       int64_t k, int64_t ldy) {
  const cudaError_t error =
      emulation::enqueue("cublasGemmEx", static_cast<cudaStream_t>(handle_), [=] {
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t r = 0; r < rows; ++r) {
            float sum = 0.0f;
            for (int64_t c = 0; c < k; ++c) {
              sum += quant::bf16_to_fp32(w[r * k + c]) * quant::bf16_to_fp32(x[i * k + c]);
            }
            y[i * ldy + r] = sum;
          }
        }
      });
  if (error != cudaSuccess) {
    throw Error(Error::Kind::kInternal,
                std::string("cuBLAS (emulated): cublasGemmEx: ") + cudaGetErrorString(error));
  }
}

}  // namespace llms::cuda
