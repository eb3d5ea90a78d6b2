// cuda/matmul: the weight-reading kernels of cuda/device_kernels.h: gemv (decode steps),
// dequantize_bf16 (the operand of the cuBLAS GEMM for larger batches), gather_rows (embedding
// lookup) and f32_to_bf16 (the GEMM's activations).
//
// Contract (beyond device_kernels.h):
//   - Weights are decoded straight from their GGUF blocks with cuda/block_decode.h, so a decoded
//     value is exactly what quant::dequantize_row gives on the host; dequantize_bf16 rounds it
//     as quant::fp32_to_bf16 does and gather_rows with scale 1 returns it unchanged. gemv's sums
//     are f32 with fused multiply-adds in a fixed order per lane, then a warp tree: deterministic
//     run to run, but not the CPU kernels' order.
//   - Matrix data must be 2-byte aligned (every row then is: all row sizes are even); x, y and
//     out need only their element alignment (16-byte aligned ones take vector loads/stores).
//   - Rows are taken 32 values at a time: n_cols must be a multiple of 32 (always so for the
//     quantized types; F32/F16/BF16 matrices of other widths throw llms::Error(kUnsupported)).
//   - An unsupported weight type or width throws llms::Error(kUnsupported) naming it, even for an
//     empty call; an empty call (m, n or the row count 0) launches nothing.
//   - Built without flush-to-zero (no -ftz=true / --use_fast_math): f16 scales can be subnormal
//     and the decoded values must match the host's.
//   - Only the CUDA runtime; no library calls.
#include <algorithm>
#include <cstdint>
#include <string>

#include "block_decode.h"
#include "cuda_check.h"
#include "device_kernels.h"
#include "launch.h"
#include "type_dispatch.h"
#include "util/error.h"

namespace llms::cuda {
namespace {

using gguf::GgmlType;

constexpr int kWarpSize = 32;
// gemv: one warp per weight row, this many rows per thread block. 8 warps share the activation
// rows through L1 and give enough independent loads in flight per SM.
constexpr int kGemvWarps = 8;
// The element-wise and decode kernels.
constexpr int kThreads = 256;
// Grid-stride loops above this many blocks: any size launches, none needs a huge grid.
constexpr int64_t kMaxBlocks = int64_t{1} << 16;

unsigned grid_for(int64_t items, int threads_per_block) {
  return static_cast<unsigned>(
      std::min((items + threads_per_block - 1) / threads_per_block, kMaxBlocks));
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// sum_j v[j] * x[j] over one sub-block. Two chains halve the dependent FMA latency; the order
// is fixed, so results repeat exactly.
__device__ __forceinline__ float dot_sub(const float* v, const float* x, bool x_vec4) {
  float a = 0.0f;
  float b = 0.0f;
  if (x_vec4) {
    const auto* x4 = reinterpret_cast<const float4*>(x);
#pragma unroll
    for (int k = 0; k < kSubBlockValues / 4; ++k) {
      const float4 t = x4[k];
      a = fmaf(v[4 * k], t.x, a);
      b = fmaf(v[4 * k + 1], t.y, b);
      a = fmaf(v[4 * k + 2], t.z, a);
      b = fmaf(v[4 * k + 3], t.w, b);
    }
  } else {
#pragma unroll
    for (int k = 0; k < kSubBlockValues; k += 2) {
      a = fmaf(v[k], x[k], a);
      b = fmaf(v[k + 1], x[k + 1], b);
    }
  }
  return a + b;
}

// acc[i] += sub-block s of `row` (decoded) . the same 32 columns of activation row i, i < m.
// The one order both GEMV kernels sum in, so that they give the same bits.
template <GgmlType T, int MaxM>
__device__ __forceinline__ void accumulate_sub(const uint8_t* row, int64_t s, const float* xs,
                                               int64_t n_cols, int32_t m, bool x_vec4, float* acc) {
  float v[kSubBlockValues];
  decode_sub<T>(row, s, v);
#pragma unroll
  for (int i = 0; i < MaxM; ++i) {
    if (i < m) acc[i] += dot_sub(v, xs + i * n_cols, x_vec4);
  }
}

// The warp's sums of row r: a shuffle tree, then lane 0 writes y[i * n_rows + r], i < m.
template <int MaxM>
__device__ __forceinline__ void store_row(float* acc, int lane, int64_t r, int64_t n_rows,
                                          int32_t m, float* y) {
#pragma unroll
  for (int i = 0; i < MaxM; ++i) {
#pragma unroll
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
      acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], offset);
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < MaxM; ++i) {
      if (i < m) y[i * n_rows + r] = acc[i];
    }
  }
}

// One warp per weight row r: lane L takes sub-blocks L, L + 32, ... of the row (rows of only a
// few sub-blocks leave lanes idle but stay correct), decodes each once in registers and dots it
// with the same 32 columns of every activation row. MaxM bounds m at compile time so the
// accumulators stay in registers; rows i >= m are skipped by a warp-uniform test.
template <GgmlType T, int MaxM>
__global__ void __launch_bounds__(kGemvWarps* kWarpSize)
    gemv_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t n_rows, int64_t n_subs,
                const float* __restrict__ x, int32_t m, bool x_vec4, float* __restrict__ y) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kGemvWarps + threadIdx.x / kWarpSize;
  if (r >= n_rows) return;  // the whole warp leaves: the shuffles below see full warps
  const uint8_t* row = w + r * static_cast<int64_t>(row_bytes);
  const int64_t n_cols = n_subs * kSubBlockValues;

  float acc[MaxM];
#pragma unroll
  for (int i = 0; i < MaxM; ++i) acc[i] = 0.0f;

  for (int64_t s = lane; s < n_subs; s += kWarpSize) {
    accumulate_sub<T, MaxM>(row, s, x + s * kSubBlockValues, n_cols, m, x_vec4, acc);
  }

  store_row<MaxM>(acc, lane, r, n_rows, m, y);
}

// Bytes of 2,048 values (64 sub-blocks: 64 legacy blocks or 8 K-quant super-blocks) of the
// types gemv_staged_kernel takes; 0 for F32, whose 8 KiB a warp would not fit the block's shared
// memory.
template <GgmlType T>
__host__ __device__ constexpr int staged_group_bytes() {
  switch (T) {
    case GgmlType::kF16:
    case GgmlType::kBF16:
      return 64 * 64;
    case GgmlType::kQ4_0:
      return 64 * 18;
    case GgmlType::kQ4_1:
      return 64 * 20;
    case GgmlType::kQ5_0:
      return 64 * 22;
    case GgmlType::kQ5_1:
      return 64 * 24;
    case GgmlType::kQ8_0:
      return 64 * 34;
    case GgmlType::kQ4_K:
      return 8 * 144;
    case GgmlType::kQ5_K:
      return 8 * 176;
    case GgmlType::kQ6_K:
      return 8 * 210;
    default:
      return 0;
  }
}

constexpr int kStagedSubs = 64;

// gemv_kernel with the weights read through shared memory: each warp copies 64 sub-blocks of its
// row at a time with 16-byte loads, lane L the words L, L + 32, ... (the warp reads contiguous
// bytes, every load instruction whole 32-byte sectors, several loads in flight per lane), then
// lane L decodes sub-blocks L and L + 32 of the copy. Most types' blocks are not 16-byte aligned
// (Q6_K's 210 bytes, Q8_0's 34) and rows need not be either: the copy starts at the 16-byte word
// holding the group's first byte and ends with the word holding its last, so it may read up to
// 15 bytes past the matrix (device allocations and the runner's weight pieces are padded to 256
// bytes). Each lane takes the same sub-blocks in the same order as gemv_kernel: the same bits.
template <GgmlType T, int MaxM>
__global__ void __launch_bounds__(kGemvWarps* kWarpSize)
    gemv_staged_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t n_rows,
                       int64_t n_subs, const float* __restrict__ x, int32_t m, bool x_vec4,
                       float* __restrict__ y) {
  constexpr int kGroupBytes = staged_group_bytes<T>();
  constexpr int kStageWords = kGroupBytes / 16 + 2;  // + the partial words at both ends
  __shared__ uint4 stage[kGemvWarps][kStageWords];
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp;
  if (r >= n_rows) return;  // the whole warp leaves: its __syncwarp and shuffles see full warps
  const uint8_t* row = w + r * static_cast<int64_t>(row_bytes);
  const int64_t n_cols = n_subs * kSubBlockValues;

  float acc[MaxM];
#pragma unroll
  for (int i = 0; i < MaxM; ++i) acc[i] = 0.0f;

  for (int64_t g = 0; g < n_subs; g += kStagedSubs) {
    const int subs = static_cast<int>(n_subs - g < kStagedSubs ? n_subs - g : kStagedSubs);
    // A partial group of K-quants is whole super-blocks (rows are), so its size is exact too.
    const uint8_t* begin = row + g / kStagedSubs * kGroupBytes;
    const uint8_t* end = begin + subs * kGroupBytes / kStagedSubs;
    const uintptr_t first = reinterpret_cast<uintptr_t>(begin) & ~uintptr_t{15};
    const int head = static_cast<int>(reinterpret_cast<uintptr_t>(begin) - first);
    const int words = static_cast<int>((reinterpret_cast<uintptr_t>(end) - first + 15) / 16);
    const auto* src = reinterpret_cast<const uint4*>(first);
    for (int i = lane; i < words; i += kWarpSize) stage[warp][i] = src[i];
    __syncwarp();
    const uint8_t* staged = reinterpret_cast<const uint8_t*>(stage[warp]) + head;
    for (int s = lane; s < subs; s += kWarpSize) {
      accumulate_sub<T, MaxM>(staged, s, x + (g + s) * kSubBlockValues, n_cols, m, x_vec4, acc);
    }
    __syncwarp();  // every lane has decoded this group before the next copy overwrites it
  }

  store_row<MaxM>(acc, lane, r, n_rows, m, y);
}

// One thread per sub-block t of the first n_rows rows: row t / n_subs, sub-block t % n_subs,
// whose 32 outputs start at out + 32 t (row r's values start at r * n_cols = 32 r * n_subs).
template <GgmlType T>
__global__ void __launch_bounds__(kThreads)
    dequantize_bf16_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t n_subs,
                           int64_t total, bool out_vec, uint16_t* __restrict__ out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += stride) {
    const int64_t r = t / n_subs;
    float v[kSubBlockValues];
    decode_sub<T>(w + r * static_cast<int64_t>(row_bytes), t - r * n_subs, v);
    uint16_t* o = out + t * kSubBlockValues;
    if (out_vec) {
      // 64 bytes as four 16-byte stores; o is 16-byte aligned when out is (64-byte steps).
      uint32_t packed[kSubBlockValues / 2];
#pragma unroll
      for (int k = 0; k < kSubBlockValues / 2; ++k) {
        packed[k] = static_cast<uint32_t>(f32_to_bf16_bits(v[2 * k])) |
                    (static_cast<uint32_t>(f32_to_bf16_bits(v[2 * k + 1])) << 16);
      }
      auto* o4 = reinterpret_cast<uint4*>(o);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        o4[k] = make_uint4(packed[4 * k], packed[4 * k + 1], packed[4 * k + 2], packed[4 * k + 3]);
      }
    } else {
#pragma unroll
      for (int j = 0; j < kSubBlockValues; ++j) o[j] = f32_to_bf16_bits(v[j]);
    }
  }
}

// One thread per sub-block t of the n gathered rows: output row t / n_subs reads weight row
// rows[t / n_subs]. Outputs start at out + 32 t as in dequantize_bf16_kernel.
template <GgmlType T>
__global__ void __launch_bounds__(kThreads)
    gather_rows_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t n_subs,
                       const int32_t* __restrict__ rows, int64_t total, float scale,
                       bool apply_scale, bool out_vec, float* __restrict__ out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += stride) {
    const int64_t i = t / n_subs;
    const int64_t r = rows[i];
    float v[kSubBlockValues];
    decode_sub<T>(w + r * static_cast<int64_t>(row_bytes), t - i * n_subs, v);
    if (apply_scale) {
#pragma unroll
      for (int j = 0; j < kSubBlockValues; ++j) v[j] *= scale;
    }
    float* o = out + t * kSubBlockValues;
    if (out_vec) {
      auto* o4 = reinterpret_cast<float4*>(o);
#pragma unroll
      for (int k = 0; k < kSubBlockValues / 4; ++k) {
        o4[k] = make_float4(v[4 * k], v[4 * k + 1], v[4 * k + 2], v[4 * k + 3]);
      }
    } else {
#pragma unroll
      for (int j = 0; j < kSubBlockValues; ++j) o[j] = v[j];
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    f32_to_bf16_kernel(const float* __restrict__ x, int64_t n, uint16_t* __restrict__ out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i] = f32_to_bf16_bits(x[i]);
  }
}

template <GgmlType T, int MaxM>
void launch_gemv(const DeviceMatrix& w, int64_t n_subs, const float* x, int32_t m, float* y,
                 GemvKernel kernel, cudaStream_t stream) {
  const auto n_blocks = static_cast<unsigned>((w.n_rows + kGemvWarps - 1) / kGemvWarps);
  const auto* data = static_cast<const uint8_t*>(w.data);
  // The staged copy starts at 16-byte words: the matrix must start on one.
  if constexpr (staged_group_bytes<T>() > 0) {
    if (kernel == GemvKernel::kAuto && aligned16(data)) {
      launch("gemv_staged_kernel", gemv_staged_kernel<T, MaxM>, n_blocks, kGemvWarps * kWarpSize,
             stream, data, w.row_bytes, w.n_rows, n_subs, x, m, aligned16(x), y);
      return;
    }
  }
  launch("gemv_kernel", gemv_kernel<T, MaxM>, n_blocks, kGemvWarps * kWarpSize, stream, data,
         w.row_bytes, w.n_rows, n_subs, x, m, aligned16(x), y);
}

}  // namespace

bool device_supports(gguf::GgmlType type) { return decodable(type); }

void gemv(const DeviceMatrix& w, const float* x, int32_t m, float* y, cudaStream_t stream,
          GemvKernel kernel) {
  dispatch_type(w.type, "gemv", [&](auto tag) {
    constexpr GgmlType T = decltype(tag)::value;
    const int64_t n_subs = sub_blocks(w, "gemv");
    if (m <= 0 || w.n_rows <= 0) return;
    // Instantiations for m = 1, 2, <= 4, <= 8: decode (m = 1) pays for no unused accumulators,
    // and the type x m matrix stays small.
    if (m == 1) {
      launch_gemv<T, 1>(w, n_subs, x, m, y, kernel, stream);
    } else if (m == 2) {
      launch_gemv<T, 2>(w, n_subs, x, m, y, kernel, stream);
    } else if (m <= 4) {
      launch_gemv<T, 4>(w, n_subs, x, m, y, kernel, stream);
    } else {
      static_assert(kMaxGemvRows == 8, "gemv instantiates up to 8 activation rows");
      launch_gemv<T, kMaxGemvRows>(w, n_subs, x, m, y, kernel, stream);
    }
  });
}

void dequantize_bf16(const DeviceMatrix& w, int64_t n_rows, uint16_t* out, cudaStream_t stream) {
  dispatch_type(w.type, "dequantize_bf16", [&](auto tag) {
    constexpr GgmlType T = decltype(tag)::value;
    const int64_t n_subs = sub_blocks(w, "dequantize_bf16");
    const int64_t total = n_rows * n_subs;
    if (total <= 0) return;
    launch("dequantize_bf16_kernel", dequantize_bf16_kernel<T>, grid_for(total, kThreads), kThreads,
           stream, static_cast<const uint8_t*>(w.data), w.row_bytes, n_subs, total, aligned16(out),
           out);
  });
}

void gather_rows(const DeviceMatrix& w, const int32_t* rows, int32_t n, float scale, float* out,
                 cudaStream_t stream) {
  dispatch_type(w.type, "gather_rows", [&](auto tag) {
    constexpr GgmlType T = decltype(tag)::value;
    const int64_t n_subs = sub_blocks(w, "gather_rows");
    const int64_t total = static_cast<int64_t>(n) * n_subs;
    if (total <= 0) return;
    // Scale 1 skips the multiply so the rows come out exactly as decoded (NaN payloads too).
    launch("gather_rows_kernel", gather_rows_kernel<T>, grid_for(total, kThreads), kThreads, stream,
           static_cast<const uint8_t*>(w.data), w.row_bytes, n_subs, rows, total, scale,
           scale != 1.0f, aligned16(out), out);
  });
}

void f32_to_bf16(const float* x, int64_t n, uint16_t* out, cudaStream_t stream) {
  if (n <= 0) return;
  launch("f32_to_bf16_kernel", f32_to_bf16_kernel, grid_for(n, kThreads), kThreads, stream, x, n,
         out);
}

}  // namespace llms::cuda
