// cuda/measure: the device floors of cuda/cuda_backend.h (read bandwidth, bf16 GEMM rate), timed
// with CUDA events on the device's own clock.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "cublas.h"
#include "cuda/cuda_backend.h"
#include "cuda_check.h"
#include "device_buffer.h"
#include "launch.h"
#include "util/error.h"

namespace llms::cuda {

namespace {

constexpr int kThreads = 256;

// Every thread sums a strided run of 16-byte loads; one value per block is written so the
// reads cannot be optimized away. Reads dominate: the writes are one float per 256 threads.
__global__ void __launch_bounds__(kThreads)
    read_sum_kernel(const float4* __restrict__ x, int64_t n, float* __restrict__ partial) {
  float acc = 0.0f;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float4 v = x[i];
    acc += (v.x + v.y) + (v.z + v.w);
  }
  __shared__ float block_sum[kThreads];
  block_sum[threadIdx.x] = acc;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half)
      block_sum[threadIdx.x] += block_sum[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = block_sum[0];
}

class Event {
 public:
  Event() { check(cudaEventCreate(&event_), "cudaEventCreate"); }
  ~Event() { cudaEventDestroy(event_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

void select_device(int device) {
  const Probe p = probe();
  if (p.devices.empty()) throw Error(Error::Kind::kUnavailable, "--device cuda: " + p.why_none);
  check(cudaSetDevice(device), "cudaSetDevice");
}

// Seconds of the work `enqueue` puts on `stream`, by events around it.
template <class F>
double timed(cudaStream_t stream, F&& enqueue) {
  Event start;
  Event stop;
  check(cudaEventRecord(start.get(), stream), "cudaEventRecord");
  enqueue();
  check(cudaEventRecord(stop.get(), stream), "cudaEventRecord");
  check(cudaEventSynchronize(stop.get()), "cudaEventSynchronize");
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, start.get(), stop.get()), "cudaEventElapsedTime");
  return static_cast<double>(ms) / 1e3;
}

}  // namespace

double measure_read_bandwidth(int device, size_t bytes, int passes) {
  select_device(device);
  const auto n = static_cast<int64_t>(bytes / sizeof(float4));
  if (n < 1 || passes < 1) {
    throw Error(Error::Kind::kInvalidArgument, "measure_read_bandwidth: bytes and passes >= 1");
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  const int blocks = prop.multiProcessorCount * 8;
  DeviceBuffer data(static_cast<size_t>(n) * sizeof(float4));
  DeviceBuffer partial(static_cast<size_t>(blocks) * sizeof(float));
  Stream stream;
  check(cudaMemsetAsync(data.get(), 0, data.bytes(), stream.get()), "cudaMemsetAsync");
  double best = 0.0;
  for (int pass = 0; pass <= passes; ++pass) {  // pass 0 warms up
    const double s = timed(stream.get(), [&] {
      launch("read_sum_kernel", read_sum_kernel, blocks, kThreads, stream.get(), data.get<float4>(),
             n, partial.get<float>());
    });
    if (pass > 0) best = std::max(best, static_cast<double>(data.bytes()) / s);
  }
  return best;
}

double measure_bf16_gemm_flops(int device, int n, int passes) {
  select_device(device);
  if (n < 16 || passes < 1) {
    throw Error(Error::Kind::kInvalidArgument, "measure_bf16_gemm_flops: n >= 16, passes >= 1");
  }
  const size_t elements = static_cast<size_t>(n) * static_cast<size_t>(n);
  DeviceBuffer a(elements * sizeof(uint16_t));
  DeviceBuffer b(elements * sizeof(uint16_t));
  DeviceBuffer c(elements * sizeof(float));
  Stream stream;
  // Non-zero operands (bf16 0x3c3c, about 0.0115): zeros would toggle fewer bits than real
  // data and could read a rate prefill never sees.
  check(cudaMemsetAsync(a.get(), 0x3c, a.bytes(), stream.get()), "cudaMemsetAsync");
  check(cudaMemsetAsync(b.get(), 0x3c, b.bytes(), stream.get()), "cudaMemsetAsync");
  Cublas cublas(stream.get());
  double best = 0.0;
  for (int pass = 0; pass <= passes; ++pass) {
    const double s = timed(stream.get(), [&] {
      cublas.gemm_bf16(a.get<uint16_t>(), b.get<uint16_t>(), c.get<float>(), n, n, n, n);
    });
    if (pass > 0) best = std::max(best, 2.0 * static_cast<double>(elements) * n / s);
  }
  return best;
}

}  // namespace llms::cuda
