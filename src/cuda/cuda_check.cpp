#include "cuda_check.h"

#include <string>

#include "util/error.h"

namespace llms::cuda {

void throw_cuda_error(cudaError_t error, const char* what) {
  const Error::Kind kind =
      error == cudaErrorMemoryAllocation ? Error::Kind::kUnavailable : Error::Kind::kInternal;
  throw Error(kind, std::string("CUDA: ") + what + ": " + cudaGetErrorName(error) + " (" +
                        cudaGetErrorString(error) + ")");
}

}  // namespace llms::cuda
