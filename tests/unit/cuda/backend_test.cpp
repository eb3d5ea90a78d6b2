// What a build or a machine without a usable GPU says when asked for one: probe() reports no
// device and why, and making a runner is refused with that reason, never a crash. On a machine
// with a GPU the same calls must find it (the device tests in tests/cuda run there).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cuda/cuda_backend.h"
#include "gguf/gguf_file.h"
#include "model/tiny_model.h"
#include "util/error.h"

namespace llms::cuda {
namespace {

using ::testing::HasSubstr;

gguf::GgufFile tiny_file(std::vector<uint8_t>& bytes) {
  bytes = model::build_tiny_model(model::TinyModelSpec{}).to_bytes();
  return gguf::GgufFile::from_bytes(bytes);
}

TEST(CudaBackend, BuildSaysWhetherItHasTheBackend) {
#ifdef LLMS_TEST_EXPECT_CUDA
  EXPECT_TRUE(compiled_in());
#else
  EXPECT_FALSE(compiled_in());
  EXPECT_THAT(probe().why_none, HasSubstr("built without the CUDA backend"));
#endif
}

TEST(CudaBackend, ProbeEitherListsDevicesOrSaysWhyNot) {
  const Probe p = probe();
  if (p.devices.empty()) {
    EXPECT_FALSE(p.why_none.empty());
    return;
  }
  EXPECT_TRUE(p.why_none.empty());
  for (const DeviceInfo& d : p.devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.total_bytes, 0u);
    EXPECT_GT(d.multiprocessors, 0);
  }
}

TEST(CudaBackend, RunnerWithoutADeviceIsRefusedWithTheReason) {
  const Probe p = probe();
  if (!p.devices.empty()) GTEST_SKIP() << "this machine has a GPU: " << p.devices[0].name;
  std::vector<uint8_t> bytes;
  const gguf::GgufFile file = tiny_file(bytes);
  try {
    (void)make_runner(file, RunnerOptions{});
    FAIL() << "make_runner succeeded without a device";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kUnavailable);
    EXPECT_THAT(e.what(), HasSubstr("--device cuda"));
    EXPECT_THAT(e.what(), HasSubstr(p.why_none));
  }
}

TEST(CudaBackend, UtilizationOutOfRangeIsRefusedNamingTheFlag) {
  if (!compiled_in()) GTEST_SKIP() << "no CUDA backend in this build: the device is refused first";
  std::vector<uint8_t> bytes;
  const gguf::GgufFile file = tiny_file(bytes);
  for (double u : {0.0, -0.5, 1.5}) {
    try {
      (void)make_runner(file, RunnerOptions{0, u});
      FAIL() << "utilization " << u << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument);
      EXPECT_THAT(e.what(), HasSubstr("--gpu-memory-utilization"));
    }
  }
}

}  // namespace
}  // namespace llms::cuda
