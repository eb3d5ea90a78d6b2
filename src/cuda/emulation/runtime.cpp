// The CUDA runtime API (include/cuda_runtime_api.h) on the host, for the CPU emulation of the
// device. What it checks as the runtime would, so that a bug the GPU would report is reported
// here too: copies whose device side is not inside one device allocation, freeing what was not
// allocated, synchronous calls while this thread captures a graph (they invalidate the capture),
// capturing the legacy default stream, bad launch configurations, kernels whose threads wait at
// a barrier that cannot open.
#include <fmt/core.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "emulation/kernel_launch.h"
#include "emulation/thread_blocks.h"
#include "util/error.h"

struct CUstream_st {
  bool capturing = false;
  bool invalidated = false;  // a prohibited call happened during the capture
  CUgraph_st* graph = nullptr;
};

struct CUgraph_st {
  std::vector<std::function<void()>> nodes;
};

struct CUgraphExec_st {
  std::vector<std::function<void()>> nodes;
};

struct CUevent_st {
  std::chrono::steady_clock::time_point at{};
  bool recorded = false;
};

namespace {

// The emulated device's memory: LLMS_CUDA_EMULATION_MIB (default 2048) MiB. Fresh allocations
// are filled with 0xff bytes (NaN as f32, f16 and bf16), so a kernel that reads what nothing
// wrote shows it in its results.
size_t total_memory() {
  static const size_t bytes = [] {
    const char* env = std::getenv("LLMS_CUDA_EMULATION_MIB");
    const long mib = env != nullptr ? std::strtol(env, nullptr, 10) : 2048;
    return static_cast<size_t>(mib > 0 ? mib : 2048) << 20;
  }();
  return bytes;
}

struct Memory {
  std::mutex mutex;
  std::map<const char*, size_t> device;  // allocation start -> bytes
  size_t used = 0;
};

Memory& memory() {
  static Memory m;
  return m;
}

// Whether [p, p + bytes) lies inside one device allocation.
bool on_device(const void* p, size_t bytes) {
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  const auto* c = static_cast<const char*>(p);
  auto it = m.device.upper_bound(c);
  if (it == m.device.begin()) return false;
  --it;
  return c >= it->first && c + bytes <= it->first + it->second;
}

thread_local cudaError_t t_last_error = cudaSuccess;
thread_local std::string t_fault;                   // what the last cudaErrorLaunchFailure was
thread_local std::vector<CUstream_st*> t_captures;  // the streams this thread is capturing

CUstream_st g_legacy_stream;

CUstream_st& stream_of(cudaStream_t s) { return s != nullptr ? *s : g_legacy_stream; }

cudaError_t fail(cudaError_t error) {
  t_last_error = error;
  return error;
}

// A synchronous call while this thread captures: prohibited, and it invalidates the capture.
bool prohibited_during_capture() {
  if (t_captures.empty()) return false;
  for (CUstream_st* s : t_captures) s->invalidated = true;
  return true;
}

// Kernels share their function-static __shared__ arrays: one launch runs at a time.
std::mutex g_launch_mutex;

cudaError_t run_now(const char* what, const std::function<void()>& work) {
  std::lock_guard lock(g_launch_mutex);
  try {
    work();
  } catch (const std::exception& e) {
    t_fault = fmt::format("{}: {}", what, e.what());
    return fail(cudaErrorLaunchFailure);
  }
  return cudaSuccess;
}

cudaError_t enqueue_work(const char* what, cudaStream_t stream, std::function<void()> work) {
  CUstream_st& s = stream_of(stream);
  if (s.capturing) {
    s.graph->nodes.push_back([what, w = std::move(work)] {
      // A node that faults during a replay reports through the graph launch.
      const cudaError_t e = run_now(what, w);
      if (e != cudaSuccess) throw llms::Error(llms::Error::Kind::kInternal, t_fault);
    });
    return cudaSuccess;
  }
  return run_now(what, work);
}

}  // namespace

namespace llms::cuda::emulation {

void launch_kernel(const char* kernel, dim3 grid, dim3 block, cudaStream_t stream,
                   std::function<void()> body) {
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
      grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) {
    fail(cudaErrorInvalidConfiguration);
    return;
  }
  (void)enqueue_work(kernel, stream, [kernel, grid, block, b = std::move(body)] {
    run_grid(kernel, grid, block, b);
  });
}

cudaError_t enqueue(const char* what, cudaStream_t stream, std::function<void()> work) {
  return enqueue_work(what, stream, std::move(work));
}

}  // namespace llms::cuda::emulation

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "%s", "llmserve CUDA emulation (CPU)");
  prop->totalGlobalMem = total_memory();
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 2;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice);
}

cudaError_t cudaDriverGetVersion(int* version) {
  *version = 13000;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = 13000;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  *total_bytes = total_memory();
  *free_bytes = total_memory() - m.used;
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() { return t_last_error; }

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorIllegalAddress:
      return "cudaErrorIllegalAddress";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorStreamCaptureUnsupported:
      return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated:
      return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureUnmatched:
      return "cudaErrorStreamCaptureUnmatched";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorIllegalAddress:
      return "an illegal memory access was encountered";
    case cudaErrorLaunchFailure: {
      static thread_local std::string text;
      text = "unspecified launch failure (emulation: " + t_fault + ")";
      return text.c_str();
    }
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureUnmatched:
      return "capture was not initiated in this stream";
  }
  return "unknown error";
}

cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = nullptr;
  if (prohibited_during_capture()) return fail(cudaErrorStreamCaptureUnsupported);
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  if (bytes > total_memory() - m.used) return fail(cudaErrorMemoryAllocation);
  const size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  void* a = std::aligned_alloc(256, rounded);
  if (a == nullptr) return fail(cudaErrorMemoryAllocation);
  std::memset(a, 0xff, rounded);
  m.device.emplace(static_cast<const char*>(a), bytes);
  m.used += bytes;
  *p = a;
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  if (p == nullptr) return cudaSuccess;
  if (prohibited_during_capture()) return fail(cudaErrorStreamCaptureUnsupported);
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  auto it = m.device.find(static_cast<const char*>(p));
  if (it == m.device.end()) return fail(cudaErrorInvalidValue);
  m.used -= it->second;
  m.device.erase(it);
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, size_t bytes) {
  *p = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
  return *p != nullptr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFreeHost(void* p) {
  std::free(p);
  return cudaSuccess;
}

namespace {

// The runtime refuses a copy whose device side is not device memory (cudaErrorInvalidValue).
cudaError_t check_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return cudaSuccess;
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if ((dst_device && !on_device(dst, bytes)) || (src_device && !on_device(src, bytes))) {
    return fail(cudaErrorInvalidValue);
  }
  if (kind == cudaMemcpyHostToDevice && on_device(src, 1)) return fail(cudaErrorInvalidValue);
  if (kind == cudaMemcpyDeviceToHost && on_device(dst, 1)) return fail(cudaErrorInvalidValue);
  return cudaSuccess;
}

}  // namespace

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (prohibited_during_capture()) return fail(cudaErrorStreamCaptureUnsupported);
  if (const cudaError_t e = check_copy(dst, src, bytes, kind); e != cudaSuccess) return e;
  if (bytes > 0) std::memcpy(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (const cudaError_t e = check_copy(dst, src, bytes, kind); e != cudaSuccess) return e;
  if (bytes == 0) return cudaSuccess;
  return llms::cuda::emulation::enqueue("cudaMemcpyAsync", stream,
                                        [=] { std::memcpy(dst, src, bytes); });
}

cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  if (prohibited_during_capture()) return fail(cudaErrorStreamCaptureUnsupported);
  if (bytes > 0 && !on_device(p, bytes)) return fail(cudaErrorInvalidValue);
  if (bytes > 0) std::memset(p, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  if (!on_device(p, bytes)) return fail(cudaErrorInvalidValue);
  return llms::cuda::emulation::enqueue("cudaMemsetAsync", stream,
                                        [=] { std::memset(p, value, bytes); });
}

cudaError_t cudaDeviceSynchronize() {
  if (prohibited_during_capture()) return fail(cudaErrorStreamCaptureUnsupported);
  return cudaPeekAtLastError();
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  *stream = new CUstream_st;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned /*flags*/) {
  return cudaStreamCreate(stream);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr) return fail(cudaErrorInvalidResourceHandle);
  std::erase(t_captures, stream);
  delete stream->graph;
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (stream_of(stream).capturing || (stream == nullptr && prohibited_during_capture())) {
    stream_of(stream).invalidated = true;
    return fail(cudaErrorStreamCaptureUnsupported);
  }
  return cudaPeekAtLastError();
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode /*mode*/) {
  // The legacy default stream cannot be captured.
  if (stream == nullptr) return fail(cudaErrorStreamCaptureUnsupported);
  if (stream->capturing) return fail(cudaErrorStreamCaptureUnsupported);
  stream->capturing = true;
  stream->invalidated = false;
  stream->graph = new CUgraph_st;
  t_captures.push_back(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  *graph = nullptr;
  if (stream == nullptr || !stream->capturing) return fail(cudaErrorStreamCaptureUnmatched);
  stream->capturing = false;
  std::erase(t_captures, stream);
  CUgraph_st* g = stream->graph;
  stream->graph = nullptr;
  if (stream->invalidated) {
    delete g;
    return fail(cudaErrorStreamCaptureInvalidated);
  }
  *graph = g;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long /*flags*/) {
  if (graph == nullptr) return fail(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->nodes};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec == nullptr) return fail(cudaErrorInvalidValue);
  if (stream_of(stream).capturing) return fail(cudaErrorStreamCaptureUnsupported);
  for (const auto& node : exec->nodes) {
    try {
      node();
    } catch (const std::exception&) {
      return fail(cudaErrorLaunchFailure);  // t_fault says which node and why
    }
  }
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  *event = new CUevent_st;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t /*stream*/) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  event->at = std::chrono::steady_clock::now();  // everything enqueued before it has run
  event->recorded = true;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return event != nullptr ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (start == nullptr || end == nullptr || !start->recorded || !end->recorded) {
    return fail(cudaErrorInvalidResourceHandle);
  }
  *ms = std::chrono::duration<float, std::milli>(end->at - start->at).count();
  return cudaSuccess;
}
