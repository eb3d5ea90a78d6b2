// cuda/tiled_gemm: the tensor-core GEMM on the file's weight blocks (contract in
// cuda/device_kernels.h: tiled_gemm).
//
// Why: a step of a few dozen tokens (batched decode, a short prompt chunk) through
// dequantize_bf16 + cuBLAS writes every weight as 2 bytes of bf16 and reads it back, ~4.5 bytes
// of traffic a weight where a 4-bit file holds ~0.56: that step costs several decode steps. Here
// each thread block decodes a tile of weight rows into shared memory, once for up to 64 rows of
// activations, and multiplies there: the weights cross the memory bus once.
//
// A block: kWarps warps; warp w owns weight rows r0 + 16 w .. + 15 of the block's kTileRows, and
// the 16 x kMFrags activation rows of blockIdx.y. Per chunk of kChunkSubs sub-blocks (32 values
// each) along the rows:
//   1. the block decodes its rows' sub-blocks (cuda/block_decode.h, exact) and stores them as
//      bf16 in shared memory (rows past the matrix as zeros);
//   2. each warp multiplies 16-deep slices: its weight fragment from shared memory, the
//      activation fragments (bf16, row-major) straight from global memory, where every block
//      reads the same rows (L2 and L1 keep them).
// The accumulators go through shared memory to the output, rows past m and columns past the
// matrix left alone. Sums are f32 on tensor cores (their order and rounding are the hardware's),
// as in the cuBLAS path the products are of bf16 values.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>
#include <string>

#include "block_decode.h"
#include "device_kernels.h"
#include "launch.h"
#include "type_dispatch.h"
#include "util/error.h"

namespace llms::cuda {
namespace {

using gguf::GgmlType;
namespace wmma = nvcuda::wmma;

constexpr int kWarpSize = 32;
constexpr int kFragment = 16;  // the wmma tile: 16 x 16 x 16
constexpr int kWarps = 2;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kTileRows = kFragment * kWarps;  // weight rows a block decodes
constexpr int kChunkSubs = 4;                  // sub-blocks decoded per chunk
constexpr int kChunkValues = kChunkSubs * kSubBlockValues;
// Row strides in shared memory, padded so consecutive rows fall in other banks; both keep every
// fragment's first element on a 32-byte boundary and its stride a multiple of 16 bytes.
constexpr int kWeightStride = kChunkValues + 8;  // bf16
constexpr int kMaxMFrags = kTiledGemmRowAlign / kFragment;
constexpr int kOutStride = kTileRows + 4;  // f32

struct alignas(32) WeightTile {
  uint16_t v[kTileRows][kWeightStride];
};

struct alignas(32) OutTile {
  float v[kMaxMFrags * kFragment][kOutStride];
};

template <GgmlType T, int kMFrags>
__global__ void __launch_bounds__(kThreads)
    tiled_gemm_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t n_rows,
                      int64_t n_subs, const uint16_t* __restrict__ x, int32_t m,
                      float* __restrict__ y, int64_t ldy) {
  __shared__ WeightTile tile;
  __shared__ OutTile out;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / kWarpSize;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kTileRows;
  const int32_t m0 = static_cast<int32_t>(blockIdx.y) * kFragment * kMFrags;
  const auto n_cols = static_cast<unsigned>(n_subs * kSubBlockValues);
  const auto* xb = reinterpret_cast<const __nv_bfloat16*>(x);
  const auto* tb = reinterpret_cast<const __nv_bfloat16*>(&tile.v[0][0]);

  wmma::fragment<wmma::accumulator, kFragment, kFragment, kFragment, float> acc[kMFrags];
#pragma unroll
  for (int f = 0; f < kMFrags; ++f) wmma::fill_fragment(acc[f], 0.0f);

  for (int64_t s0 = 0; s0 < n_subs; s0 += kChunkSubs) {
    const int subs = n_subs - s0 < kChunkSubs ? static_cast<int>(n_subs - s0) : kChunkSubs;
    __syncthreads();  // every warp is done with the previous chunk's tile
    for (int t = tid; t < kTileRows * subs; t += kThreads) {
      const int r = t / subs;
      const int s = t - r * subs;
      float v[kSubBlockValues];
      if (r0 + r < n_rows) {
        decode_sub<T>(w + (r0 + r) * static_cast<int64_t>(row_bytes), s0 + s, v);
      } else {
#pragma unroll
        for (int j = 0; j < kSubBlockValues; ++j) v[j] = 0.0f;
      }
      // 64 bytes as four 16-byte stores (a row's stride and a sub-block's offset are whole
      // 16-byte words).
      uint32_t packed[kSubBlockValues / 2];
#pragma unroll
      for (int k = 0; k < kSubBlockValues / 2; ++k) {
        packed[k] = static_cast<uint32_t>(f32_to_bf16_bits(v[2 * k])) |
                    (static_cast<uint32_t>(f32_to_bf16_bits(v[2 * k + 1])) << 16);
      }
      auto* o4 = reinterpret_cast<uint4*>(&tile.v[r][s * kSubBlockValues]);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        o4[k] = make_uint4(packed[4 * k], packed[4 * k + 1], packed[4 * k + 2], packed[4 * k + 3]);
      }
    }
    __syncthreads();
    const int64_t c0 = s0 * kSubBlockValues;
    for (int kk = 0; kk < subs * kSubBlockValues; kk += kFragment) {
      // B (k x n) = the tile's rows as columns: element (k, n) at tile.v[n][k], column-major.
      wmma::fragment<wmma::matrix_b, kFragment, kFragment, kFragment, __nv_bfloat16,
                     wmma::col_major>
          b;
      wmma::load_matrix_sync(b, tb + warp * kFragment * kWeightStride + kk, kWeightStride);
#pragma unroll
      for (int f = 0; f < kMFrags; ++f) {
        wmma::fragment<wmma::matrix_a, kFragment, kFragment, kFragment, __nv_bfloat16,
                       wmma::row_major>
            a;
        wmma::load_matrix_sync(a, xb + static_cast<int64_t>(m0 + f * kFragment) * n_cols + c0 + kk,
                               n_cols);
        wmma::mma_sync(acc[f], a, b, acc[f]);
      }
    }
  }

#pragma unroll
  for (int f = 0; f < kMFrags; ++f) {
    wmma::store_matrix_sync(&out.v[f * kFragment][warp * kFragment], acc[f], kOutStride,
                            wmma::mem_row_major);
  }
  __syncthreads();
  for (int t = tid; t < kMFrags * kFragment * kTileRows; t += kThreads) {
    const int i = t / kTileRows;
    const int c = t - i * kTileRows;
    if (m0 + i < m && r0 + c < n_rows) y[static_cast<int64_t>(m0 + i) * ldy + r0 + c] = out.v[i][c];
  }
}

template <GgmlType T, int kMFrags>
void launch_tiled(const DeviceMatrix& w, int64_t n_subs, const uint16_t* x, int32_t m, float* y,
                  int64_t ldy, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((w.n_rows + kTileRows - 1) / kTileRows),
                  static_cast<unsigned>((m + kFragment * kMFrags - 1) / (kFragment * kMFrags)));
  launch("tiled_gemm_kernel", tiled_gemm_kernel<T, kMFrags>, grid, kThreads, stream,
         static_cast<const uint8_t*>(w.data), w.row_bytes, w.n_rows, n_subs, x, m, y, ldy);
}

}  // namespace

void tiled_gemm(const DeviceMatrix& w, const uint16_t* x_bf16, int32_t m, float* y, int64_t ldy,
                cudaStream_t stream) {
  const int64_t n_subs = sub_blocks(w, "tiled_gemm");
  if (m < 0 || ldy < w.n_rows) {
    throw Error(Error::Kind::kInvalidArgument,
                "CUDA tiled_gemm: " + std::to_string(m) + " rows into an output of stride " +
                    std::to_string(ldy) + " for a matrix of " + std::to_string(w.n_rows) + " rows");
  }
  if (reinterpret_cast<uintptr_t>(x_bf16) % 32 != 0) {
    throw Error(Error::Kind::kInvalidArgument,
                "CUDA tiled_gemm: the activations must start on a 32-byte boundary");
  }
  dispatch_type(w.type, "tiled_gemm", [&](auto tag) {
    constexpr GgmlType T = decltype(tag)::value;
    if (m == 0 || w.n_rows == 0 || n_subs == 0) return;
    // As few 16-row fragments as the step needs: one block row covers m up to 64.
    if (m <= kFragment) {
      launch_tiled<T, 1>(w, n_subs, x_bf16, m, y, ldy, stream);
    } else if (m <= 2 * kFragment) {
      launch_tiled<T, 2>(w, n_subs, x_bf16, m, y, ldy, stream);
    } else {
      launch_tiled<T, kMaxMFrags>(w, n_subs, x_bf16, m, y, ldy, stream);
    }
  });
}

}  // namespace llms::cuda
