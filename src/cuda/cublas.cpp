#include "cublas.h"

#include <cublas_v2.h>
#include <dlfcn.h>
#include <fmt/core.h>

#include <mutex>
#include <string>

#include "util/error.h"

namespace llms::cuda {

namespace {

// The entry points used, resolved once per process.
struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  // Spelled out: C++ sees an overloaded cublasGemmEx (a legacy cudaDataType compute type).
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                            int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                            cublasGemmAlgo_t) = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
  std::string error;  // why it could not be loaded (empty: loaded)
};

template <class F>
void resolve(void* library, const char* name, F& f, std::string& error) {
  f = reinterpret_cast<F>(dlsym(library, name));
  if (f == nullptr && error.empty()) error = fmt::format("libcublas has no symbol {}", name);
}

const CublasApi& api() {
  static CublasApi a;
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string soname = fmt::format("libcublas.so.{}", CUBLAS_VER_MAJOR);
    void* library = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char* why = dlerror();
      a.error = fmt::format(
          "cannot load {} ({}): the CUDA runner needs cuBLAS from the CUDA "
          "toolkit on the library path",
          soname, why != nullptr ? why : "dlopen failed");
      return;
    }
    resolve(library, "cublasCreate_v2", a.create, a.error);
    resolve(library, "cublasDestroy_v2", a.destroy, a.error);
    resolve(library, "cublasSetStream_v2", a.set_stream, a.error);
    resolve(library, "cublasGemmEx", a.gemm_ex, a.error);
    resolve(library, "cublasGetStatusString", a.status_string, a.error);
  });
  return a;
}

}  // namespace

std::string cublas_unavailable_reason() { return api().error; }

Cublas::Cublas(cudaStream_t stream) {
  const CublasApi& a = api();
  if (!a.error.empty()) throw Error(Error::Kind::kUnavailable, "--device cuda: " + a.error);
  cublasHandle_t handle = nullptr;
  const cublasStatus_t status = a.create(&handle);
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw Error(Error::Kind::kInternal,
                fmt::format("CUDA: cublasCreate failed ({})", a.status_string(status)));
  }
  handle_ = handle;
  a.set_stream(handle, stream);
}

Cublas::~Cublas() {
  if (handle_ != nullptr) api().destroy(static_cast<cublasHandle_t>(handle_));
}

void Cublas::gemm_bf16(const uint16_t* w, const uint16_t* x, float* y, int64_t rows, int64_t m,
                       int64_t k, int64_t ldy) {
  // In cuBLAS's column-major terms y^T = W x^T: W's rows are the columns of a k x rows matrix
  // (transposed), x's rows the columns of a k x m one, and y an ldy-strided rows x m result.
  const float alpha = 1.0f;
  const float beta = 0.0f;
  const CublasApi& a = api();
  const cublasStatus_t status =
      a.gemm_ex(static_cast<cublasHandle_t>(handle_), CUBLAS_OP_T, CUBLAS_OP_N,
                static_cast<int>(rows), static_cast<int>(m), static_cast<int>(k), &alpha, w,
                CUDA_R_16BF, static_cast<int>(k), x, CUDA_R_16BF, static_cast<int>(k), &beta, y,
                CUDA_R_32F, static_cast<int>(ldy), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw Error(Error::Kind::kInternal,
                fmt::format("CUDA: cublasGemmEx failed ({})", a.status_string(status)));
  }
}

}  // namespace llms::cuda
