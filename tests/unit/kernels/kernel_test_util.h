// Shared helpers of the kernel conformance tests: the per-run seed, random data, normalized
// errors and the list of ISAs this CPU can run.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_features.h"

namespace llms::kernels::testing {

// One seed per test run, printed once so that a failure can be replayed with
// LLMS_TEST_SEED=<seed>.
inline uint64_t run_seed() {
  static const uint64_t seed = [] {
    uint64_t s = 0;
    if (const char* env = std::getenv("LLMS_TEST_SEED"); env != nullptr && *env != '\0') {
      s = std::strtoull(env, nullptr, 10);
    } else {
      std::random_device device;
      s = (static_cast<uint64_t>(device()) << 32) ^ device();
    }
    std::printf("[kernels] random seed %llu (replay with LLMS_TEST_SEED=%llu)\n",
                static_cast<unsigned long long>(s), static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

// A generator for one test case: the run seed mixed with a case-specific salt.
inline std::mt19937_64 rng_for(uint64_t salt) {
  std::seed_seq seq{static_cast<uint32_t>(run_seed()), static_cast<uint32_t>(run_seed() >> 32),
                    static_cast<uint32_t>(salt), static_cast<uint32_t>(salt >> 32)};
  return std::mt19937_64(seq);
}

inline std::vector<float> gaussian(std::mt19937_64& rng, size_t n, float sigma = 1.0f) {
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// ||y - ref|| / ||ref|| over n values read with the given strides (0 when both are zero).
inline double normalized_error(const float* y, const float* ref, size_t n) {
  double err = 0;
  double norm = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(y[i]) - ref[i];
    err += d * d;
    norm += static_cast<double>(ref[i]) * ref[i];
  }
  if (norm == 0) return err == 0 ? 0 : INFINITY;
  return std::sqrt(err / norm);
}

inline double normalized_error(const std::vector<float>& y, const std::vector<float>& ref) {
  EXPECT_EQ(y.size(), ref.size());
  return normalized_error(y.data(), ref.data(), std::min(y.size(), ref.size()));
}

inline std::vector<Isa> all_isas() { return {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}; }

// GTEST_SKIP()s the current test (with the reason) when the CPU cannot run `isa`.
#define LLMS_SKIP_UNLESS_ISA(isa)                                                   \
  do {                                                                              \
    if (!::llms::kernels::isa_supported(isa)) {                                     \
      GTEST_SKIP() << "CPU lacks " << ::llms::kernels::isa_name(isa)                \
                   << " (avx512 needs F/BW/VL/DQ/VNNI); that path is not run here"; \
    }                                                                               \
  } while (0)

}  // namespace llms::kernels::testing
