// The CPU emulation of the device (src/cuda/emulation) itself: that kernels see what CUDA
// promises them (shared memory ordered by __syncthreads, warp shuffles, the built-in indices,
// tensor-core fragments), and that what the hardware or the runtime would report is reported
// here too (a barrier that cannot open, a bad launch, a misaligned fragment, a copy that misses
// device memory, synchronous calls while a graph is being captured), so that the conformance
// tests run on it mean something.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mma.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda_check.h"
#include "device_buffer.h"
#include "launch.h"
#include "quant/float_convert.h"
#include "util/error.h"

namespace llms::cuda {
namespace {

__global__ void rotate_through_shared(const int* in, int* out) {
  __shared__ int tile[256];
  const unsigned t = threadIdx.x;
  tile[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  out[blockIdx.x * blockDim.x + t] = tile[(t + 1) % blockDim.x];
}

TEST(CudaEmulation, SyncthreadsOrdersSharedMemoryWithinEachBlock) {
  const int blocks = 3;
  const int threads = 256;
  std::vector<int> in(blocks * threads);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>(i * 7 + 1);
  DeviceBuffer d_in(in.size() * sizeof(int));
  DeviceBuffer d_out(in.size() * sizeof(int));
  check(cudaMemcpy(d_in.get(), in.data(), in.size() * sizeof(int), cudaMemcpyHostToDevice), "in");
  launch("rotate_through_shared", rotate_through_shared, blocks, threads, nullptr, d_in.get<int>(),
         d_out.get<int>());
  std::vector<int> out(in.size());
  check(cudaMemcpy(out.data(), d_out.get(), out.size() * sizeof(int), cudaMemcpyDeviceToHost),
        "out");
  for (int b = 0; b < blocks; ++b) {
    for (int t = 0; t < threads; ++t) {
      ASSERT_EQ(out[static_cast<size_t>(b * threads + t)],
                in[static_cast<size_t>(b * threads + (t + 1) % threads)])
          << "block " << b << " thread " << t;
    }
  }
}

// Every lane ends with the sum of its warp; lane 0 of each warp writes it.
__global__ void warp_sums(const float* in, float* out) {
  float v = in[threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (threadIdx.x % 32 == 0) out[threadIdx.x / 32] = v;
  // Every lane holds the same total: lane 31 checks it against lane 0's.
  if (threadIdx.x % 32 == 31 && v != out[threadIdx.x / 32]) out[threadIdx.x / 32] = NAN;
}

TEST(CudaEmulation, ShuffleXorReducesEachWarp) {
  std::vector<float> in(128);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
  DeviceBuffer d_in(in.size() * sizeof(float));
  DeviceBuffer d_out(4 * sizeof(float));
  check(cudaMemcpy(d_in.get(), in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice), "in");
  launch("warp_sums", warp_sums, 1, 128, nullptr, d_in.get<float>(), d_out.get<float>());
  std::vector<float> out(4);
  check(cudaMemcpy(out.data(), d_out.get(), out.size() * sizeof(float), cudaMemcpyDeviceToHost),
        "out");
  for (int w = 0; w < 4; ++w) {
    float want = 0.0f;
    for (int l = 0; l < 32; ++l) want += static_cast<float>(w * 32 + l);
    EXPECT_EQ(out[static_cast<size_t>(w)], want) << "warp " << w;
  }
}

__global__ void indices(uint32_t* out) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  out[block * blockDim.x * blockDim.y * blockDim.z + thread] = block * 1000 + thread;
}

TEST(CudaEmulation, EveryThreadOfEveryBlockRunsWithItsIndices) {
  const dim3 grid(3, 2, 2);
  const dim3 block(4, 3, 2);
  const size_t n = 12 * 24;
  DeviceBuffer out(n * sizeof(uint32_t));
  launch("indices", indices, grid, block, nullptr, out.get<uint32_t>());
  std::vector<uint32_t> got(n);
  check(cudaMemcpy(got.data(), out.get(), n * sizeof(uint32_t), cudaMemcpyDeviceToHost), "out");
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(got[i], i / 24 * 1000 + i % 24) << i;
}

// Lane 0 leaves before the warp's shuffle: the other 31 would wait forever on a GPU.
__global__ void shuffle_after_a_lane_left(float* out) {
  if (threadIdx.x == 0) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

TEST(CudaEmulation, AShuffleALaneNeverReachesFailsTheLaunchNamingTheKernel) {
  DeviceBuffer out(32 * sizeof(float));
  try {
    launch("shuffle_after_a_lane_left", shuffle_after_a_lane_left, 1, 32, nullptr,
           out.get<float>());
    FAIL() << "the launch did not fail";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cudaErrorLaunchFailure"), std::string::npos) << what;
    EXPECT_NE(what.find("shuffle_after_a_lane_left"), std::string::npos) << what;
    EXPECT_NE(what.find("31 at a warp shuffle"), std::string::npos) << what;
  }
  // The fault was reported once; the device goes on.
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  launch("indices", indices, 1, 32, nullptr, out.get<uint32_t>());
}

// One 16x16x16 tensor-core product per warp of the block: warp w multiplies A (row-major, at
// a + offset) by B (column-major) into D (row-major, its own 16x16 of d).
__global__ void wmma_product(const __nv_bfloat16* a, const __nv_bfloat16* b, float* d, int offset) {
  namespace wmma = nvcuda::wmma;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 1.0f);
  wmma::load_matrix_sync(fa, a + offset, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(d + warp * 256, acc, 16, wmma::mem_row_major);
}

TEST(CudaEmulation, TensorCoreFragmentsMultiplyAndRefuseMisalignedOperands) {
  std::vector<uint16_t> a(256 + 16);
  std::vector<uint16_t> b(256);
  for (int i = 0; i < 256 + 16; ++i) a[i] = quant::fp32_to_bf16(static_cast<float>(i % 7) - 3.0f);
  for (int i = 0; i < 256; ++i) b[i] = quant::fp32_to_bf16(static_cast<float>(i % 5) * 0.5f);
  DeviceBuffer da(a.size() * sizeof(uint16_t));
  DeviceBuffer db(b.size() * sizeof(uint16_t));
  DeviceBuffer dd(2 * 256 * sizeof(float));
  check(cudaMemcpy(da.get(), a.data(), da.bytes(), cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(db.get(), b.data(), db.bytes(), cudaMemcpyHostToDevice), "cudaMemcpy");
  const auto* pa = da.get<__nv_bfloat16>();
  launch("wmma_product", wmma_product, 1, 64, nullptr, pa, db.get<__nv_bfloat16>(), dd.get<float>(),
         0);
  std::vector<float> d(2 * 256);
  check(cudaMemcpy(d.data(), dd.get(), dd.bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy");
  for (int w = 0; w < 2; ++w) {
    for (int i = 0; i < 16; ++i) {
      for (int j = 0; j < 16; ++j) {
        // B column-major: element (k, j) at b[j * 16 + k].
        float want = 1.0f;
        for (int k = 0; k < 16; ++k) {
          want += quant::bf16_to_fp32(a[i * 16 + k]) * quant::bf16_to_fp32(b[j * 16 + k]);
        }
        ASSERT_EQ(d[w * 256 + i * 16 + j], want) << "warp " << w << " (" << i << ", " << j << ")";
      }
    }
  }
  // 8 elements past the start: 16 bytes, not the 32 the device requires.
  try {
    launch("wmma_product", wmma_product, 1, 32, nullptr, pa, db.get<__nv_bfloat16>(),
           dd.get<float>(), 8);
    FAIL() << "a misaligned fragment load ran";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cudaErrorLaunchFailure"), std::string::npos) << what;
    EXPECT_NE(what.find("32-byte boundary"), std::string::npos) << what;
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(CudaEmulation, ABadLaunchConfigurationIsRefusedAsTheRuntimeDoes) {
  DeviceBuffer out(4096 * sizeof(uint32_t));
  try {
    launch("indices", indices, 1, 2048, nullptr, out.get<uint32_t>());
    FAIL() << "a block of 2048 threads was launched";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cudaErrorInvalidConfiguration"), std::string::npos)
        << e.what();
  }
}

TEST(CudaEmulation, CopiesMustLandInDeviceMemory) {
  DeviceBuffer device(64);
  std::vector<uint8_t> host(128);
  EXPECT_EQ(cudaMemcpy(host.data(), host.data() + 64, 64, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);  // "device" side is host memory
  EXPECT_EQ(cudaMemcpy(device.get(), host.data(), 128, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);  // past the allocation's end
  EXPECT_EQ(cudaMemcpy(host.data(), device.get(), 64, cudaMemcpyDeviceToHost), cudaSuccess);
  (void)cudaGetLastError();
  // Nothing wrote the allocation: its bytes are 0xff (NaN as f32), so reading it shows.
  float f = 0.0f;
  std::memcpy(&f, host.data(), sizeof f);
  EXPECT_TRUE(std::isnan(f));
}

__global__ void add_one(float* x, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] += 1.0f;
}

TEST(CudaEmulation, GraphsRecordTheirStreamsWorkAndReplayIt) {
  Stream stream;
  DeviceBuffer x(64 * sizeof(float));
  check(cudaMemsetAsync(x.get(), 0, 64 * sizeof(float), stream.get()), "memset");
  check(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal), "capture");
  launch("add_one", add_one, 1, 64, stream.get(), x.get<float>(), 64);
  launch("add_one", add_one, 1, 64, stream.get(), x.get<float>(), 64);
  cudaGraph_t graph = nullptr;
  check(cudaStreamEndCapture(stream.get(), &graph), "end capture");
  cudaGraphExec_t exec = nullptr;
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  std::vector<float> got(64);
  // Captured, not run.
  check(cudaMemcpy(got.data(), x.get(), 256, cudaMemcpyDeviceToHost), "read");
  EXPECT_EQ(got[5], 0.0f);
  for (int i = 0; i < 3; ++i) check(cudaGraphLaunch(exec, stream.get()), "replay");
  check(cudaMemcpy(got.data(), x.get(), 256, cudaMemcpyDeviceToHost), "read");
  EXPECT_EQ(got[5], 6.0f);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST(CudaEmulation, ASynchronousCallWhileCapturingInvalidatesTheCapture) {
  Stream stream;
  DeviceBuffer x(64);
  std::vector<uint8_t> host(64);
  check(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal), "capture");
  EXPECT_EQ(cudaMemcpy(x.get(), host.data(), 64, cudaMemcpyHostToDevice),
            cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamSynchronize(stream.get()), cudaErrorStreamCaptureUnsupported);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream.get(), &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  (void)cudaGetLastError();
  // The legacy default stream cannot be captured at all.
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal),
            cudaErrorStreamCaptureUnsupported);
  (void)cudaGetLastError();
}

}  // namespace
}  // namespace llms::cuda
