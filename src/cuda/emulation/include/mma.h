// nvcuda::wmma (the warp-level tensor-core API) for the CPU emulation of the device
// (docs/CUDA.md, "The CPU emulation"): the 16 x 16 x 16 shapes with bf16 or f16 inputs and f32
// accumulators that the kernels use.
//
// As on the device a fragment is spread over the warp's 32 lanes: here lane l holds elements
// l, l + 32, ... of the 256 (row-major) and loads, computes and stores only those; mma_sync
// reads the other lanes' operands through a table each lane publishes its fragments in (the
// device's layout is unspecified, and kernels that only fill, load, multiply and store
// fragments cannot tell one layout from another). What the device requires is checked, as a
// fault of the launch: every call is made by the whole warp (a __syncwarp inside), pointers on
// a 32-byte boundary and leading dimensions a multiple of 16 bytes. A product's sum is in k
// order in f32 (the tensor cores' order and rounding are not specified; tests compare by a
// tolerance).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the emulation has the 16 x 16 x 16 shape only");
  float tile[16][16] = {};  // (row, column) of the matrix; this lane's elements only
};

namespace detail {

constexpr int kLanes = 32;
constexpr int kPerLane = 256 / kLanes;

inline int thread_in_block() {
  const auto& t = ::llms::cuda::emulation::current_thread();
  return static_cast<int>((t.thread_idx.z * t.block_dim.y + t.thread_idx.y) * t.block_dim.x +
                          t.thread_idx.x);
}

// Element t (0..7) of this lane: row, column.
inline int owned_row(int lane, int t) { return (lane + kLanes * t) / 16; }
inline int owned_col(int lane, int t) { return (lane + kLanes * t) % 16; }
inline int owner(int row, int col) { return (row * 16 + col) % kLanes; }

inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
inline float to_float(__half v) { return __half2float(v); }
inline float to_float(float v) { return v; }

template <class T>
void check_operand(const char* what, const T* ptr, unsigned ldm) {
  __syncwarp();
  if (reinterpret_cast<uintptr_t>(ptr) % 32 != 0) {
    throw std::runtime_error(std::string(what) + ": the pointer is not on a 32-byte boundary");
  }
  if (ldm * sizeof(T) % 16 != 0) {
    throw std::runtime_error(std::string(what) + ": ldm " + std::to_string(ldm) +
                             " is not a multiple of 16 bytes");
  }
}

// The fragments each thread of the running block hands to mma_sync (one launch runs at a time,
// its blocks one after another).
struct Operands {
  const void* a = nullptr;
  const void* b = nullptr;
};
inline Operands* published() {
  static Operands table[1024];
  return table;
}

}  // namespace detail

template <class Use, class T, class Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const T* ptr, unsigned ldm) {
  detail::check_operand("load_matrix_sync", ptr, ldm);
  // Element (r, c) of the fragment's matrix: row-major at ptr[r * ldm + c], column-major at
  // ptr[c * ldm + r].
  constexpr bool row = std::is_same_v<Layout, row_major>;
  static_assert(row || std::is_same_v<Layout, col_major>, "a matrix_a or matrix_b layout");
  const int lane = detail::thread_in_block() % detail::kLanes;
  for (int t = 0; t < detail::kPerLane; ++t) {
    const int r = detail::owned_row(lane, t);
    const int c = detail::owned_col(lane, t);
    f.tile[r][c] = detail::to_float(row ? ptr[r * ldm + c] : ptr[c * ldm + r]);
  }
}

inline void fill_fragment(fragment<accumulator, 16, 16, 16, float>& f, float v) {
  for (auto& row : f.tile) {
    for (float& x : row) x = v;
  }
}

template <class T, class LayoutA, class LayoutB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
              const fragment<matrix_a, 16, 16, 16, T, LayoutA>& a,
              const fragment<matrix_b, 16, 16, 16, T, LayoutB>& b,
              const fragment<accumulator, 16, 16, 16, float>& c) {
  using A = fragment<matrix_a, 16, 16, 16, T, LayoutA>;
  using B = fragment<matrix_b, 16, 16, 16, T, LayoutB>;
  const int tid = detail::thread_in_block();
  const int lane = tid % detail::kLanes;
  detail::Operands* table = detail::published() + (tid - lane);
  table[lane] = {&a, &b};
  __syncwarp();  // every lane's operands are published
  float out[detail::kPerLane];
  for (int t = 0; t < detail::kPerLane; ++t) {
    const int i = detail::owned_row(lane, t);
    const int j = detail::owned_col(lane, t);
    float sum = c.tile[i][j];
    for (int k = 0; k < 16; ++k) {
      const float av = static_cast<const A*>(table[detail::owner(i, k)].a)->tile[i][k];
      const float bv = static_cast<const B*>(table[detail::owner(k, j)].b)->tile[k][j];
      sum += av * bv;
    }
    out[t] = sum;
  }
  __syncwarp();  // no lane reads another's operands any more
  for (int t = 0; t < detail::kPerLane; ++t) {
    d.tile[detail::owned_row(lane, t)][detail::owned_col(lane, t)] = out[t];
  }
}

inline void store_matrix_sync(float* ptr, const fragment<accumulator, 16, 16, 16, float>& f,
                              unsigned ldm, layout_t layout) {
  detail::check_operand("store_matrix_sync", ptr, ldm);
  const int lane = detail::thread_in_block() % detail::kLanes;
  for (int t = 0; t < detail::kPerLane; ++t) {
    const int r = detail::owned_row(lane, t);
    const int c = detail::owned_col(lane, t);
    (layout == mem_row_major ? ptr[r * ldm + c] : ptr[c * ldm + r]) = f.tile[r][c];
  }
}

}  // namespace nvcuda::wmma
