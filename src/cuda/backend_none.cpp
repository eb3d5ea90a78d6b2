// The CUDA backend of a build without it (LLMS_CUDA off): every request for the GPU gets the
// reason.
#include "cuda/cuda_backend.h"
#include "util/error.h"

namespace llms::cuda {

namespace {
constexpr const char* kNotBuilt =
    "this llmserve was built without the CUDA backend (configure with -DLLMS_CUDA=ON on a "
    "machine with the CUDA toolkit)";
}  // namespace

bool compiled_in() { return false; }

Probe probe() { return Probe{{}, kNotBuilt}; }

std::unique_ptr<model::ModelRunner> make_runner(const gguf::GgufFile&, const RunnerOptions&) {
  throw Error(Error::Kind::kUnavailable, std::string("--device cuda: ") + kNotBuilt);
}

double measure_read_bandwidth(int, size_t, int) {
  throw Error(Error::Kind::kUnavailable, std::string("--device cuda: ") + kNotBuilt);
}

std::string gemm_path() { return "none"; }

double measure_bf16_gemm_flops(int, int, int) {
  throw Error(Error::Kind::kUnavailable, std::string("--device cuda: ") + kNotBuilt);
}

}  // namespace llms::cuda
