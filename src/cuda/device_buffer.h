// cuda/device_buffer: owning handles of device memory, pinned host memory and the runner's
// stream, so that every exit path (a throw mid-load included) frees them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "cuda_check.h"

namespace llms::cuda {

// Where a buffer lives: device memory, or page-locked host memory (copies from and to it run
// asynchronously at full link speed).
struct DeviceMemory {
  static constexpr const char* kAllocator = "cudaMalloc";
  static cudaError_t allocate(void** p, size_t bytes) { return cudaMalloc(p, bytes); }
  static void release(void* p) { cudaFree(p); }
};
struct PinnedMemory {
  static constexpr const char* kAllocator = "cudaMallocHost";
  static cudaError_t allocate(void** p, size_t bytes) { return cudaMallocHost(p, bytes); }
  static void release(void* p) { cudaFreeHost(p); }
};

// `bytes` of Memory's kind (uninitialized). Empty when bytes == 0.
template <class Memory>
class CudaBuffer {
 public:
  CudaBuffer() = default;
  explicit CudaBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) check(Memory::allocate(&data_, bytes), Memory::kAllocator);
  }
  ~CudaBuffer() {
    if (data_ != nullptr) Memory::release(data_);
  }
  CudaBuffer(CudaBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  CudaBuffer& operator=(CudaBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;

  template <class T = void>
  T* get() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

using DeviceBuffer = CudaBuffer<DeviceMemory>;
using PinnedBuffer = CudaBuffer<PinnedMemory>;

class Stream {
 public:
  Stream() {
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~Stream() { cudaStreamDestroy(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace llms::cuda
