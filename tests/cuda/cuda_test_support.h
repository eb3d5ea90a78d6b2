// Shared by the CUDA conformance tests (tests/cuda): the fixture that runs a test only on a
// usable GPU (skipping, or failing under LLMS_REQUIRE_GPU=1, without one), device uploads and
// downloads, the normalized squared error every comparison uses, and random inputs.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "device_buffer.h"
#include "gguf/ggml_type.h"
#include "quant/quant.h"

namespace llms::cuda::testing_support {

using gguf::GgmlType;

class CudaConformance : public ::testing::Test {
 protected:
  DeviceInfo device_;
  void SetUp() override {
    const Probe p = probe();
    // The device run sets LLMS_REQUIRE_GPU=1: there a missing GPU (an old driver, a libcuda
    // the runtime cannot load) is a failure, not a skip that would pass for a clean run.
    const char* require = std::getenv("LLMS_REQUIRE_GPU");
    if (p.devices.empty() && require != nullptr && std::string(require) == "1") {
      FAIL() << "LLMS_REQUIRE_GPU=1 and no GPU: " << p.why_none;
    }
    if (p.devices.empty()) GTEST_SKIP() << "no GPU: " << p.why_none;
    if (p.devices[0].compute_major < 8) {
      GTEST_SKIP() << p.devices[0].name << " has compute capability " << p.devices[0].compute_major
                   << "." << p.devices[0].compute_minor
                   << "; the kernels are built for 8.0 and later";
    }
    device_ = p.devices[0];
    check(cudaSetDevice(0), "cudaSetDevice");
  }
};

template <class T>
DeviceBuffer upload(const std::vector<T>& v) {
  DeviceBuffer b(std::max<size_t>(1, v.size() * sizeof(T)));
  if (!v.empty())
    check(cudaMemcpy(b.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
  return b;
}

template <class T>
std::vector<T> download(const DeviceBuffer& b, size_t n) {
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  std::vector<T> v(n);
  if (n > 0)
    check(cudaMemcpy(v.data(), b.get(), n * sizeof(T), cudaMemcpyDeviceToHost), "download");
  return v;
}

// sum (got - want)^2 / sum want^2, as test-backend-ops measures a backend against the CPU.
inline double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0.0;
  double ref = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    err += d * d;
    ref += static_cast<double>(want[i]) * want[i];
  }
  return ref > 0.0 ? err / ref : err;
}

inline std::vector<float> random_floats(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A matrix of random values stored as `type`, and its values as the CPU decodes them.
struct HostMatrix {
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // n_rows x n_cols
  size_t row_bytes = 0;
};

inline HostMatrix random_matrix(GgmlType type, int64_t rows, int64_t cols, uint64_t seed) {
  HostMatrix m;
  m.row_bytes = *gguf::ggml_row_bytes(type, static_cast<uint64_t>(cols));
  m.bytes.resize(m.row_bytes * static_cast<size_t>(rows));
  m.values.resize(static_cast<size_t>(rows * cols));
  const std::vector<float> src = random_floats(static_cast<size_t>(rows * cols), seed);
  for (int64_t r = 0; r < rows; ++r) {
    quant::quantize_row(type, src.data() + r * cols, m.bytes.data() + r * m.row_bytes, cols);
    quant::dequantize_row(type, m.bytes.data() + r * m.row_bytes, m.values.data() + r * cols, cols);
  }
  return m;
}

inline const GgmlType kTypes[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16,
                                  GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0,
                                  GgmlType::kQ5_1, GgmlType::kQ8_0, GgmlType::kQ4_K,
                                  GgmlType::kQ5_K, GgmlType::kQ6_K};

inline bool k_quant(GgmlType t) {
  return t == GgmlType::kQ4_K || t == GgmlType::kQ5_K || t == GgmlType::kQ6_K;
}

}  // namespace llms::cuda::testing_support
