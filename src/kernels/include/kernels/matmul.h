// kernels/matmul: y = x W^T for a weight matrix kept in its GGUF block format.
//
// Contract:
//   - W has n_rows rows of n_cols values; in the row layout (WeightLayout::kRows) row r starts
//     at data + r * row_bytes and is stored as whole blocks of `type` (a GGUF tensor with ne[0] =
//     n_cols, ne[1] = n_rows); kRowGroups16 is described in kernels/row_groups.h, kRowPairs in
//     kernels/row_pairs.h. Blocks need no alignment.
//   - matmul computes y[i * y_stride + r] = sum_c W[r][c] * x[i * x_stride + c] for i < m and
//     r < n_rows, over the whole of y's rows (other entries of y are not touched).
//   - For the quantized types the activations are first quantized (once per call, into the
//     scratch): to 8-bit blocks of 32 with an f32 scale for Q4_0/Q4_1/Q5_0/Q5_1/Q8_0, to Q8_K
//     (256 with bsums) for Q4_K/Q5_K/Q6_K, so the inner products are exact integer sums. The
//     result therefore differs from the f32 dot of the dequantized weights by the activation
//     rounding; docs/KERNELS.md states the measured error per type. F32/F16/BF16 weights use
//     the f32 activations directly.
//   - m == 1 runs the GEMV path (decode); m > 1 the GEMM path, which reuses each decoded
//     weight block across a tile of activation rows (a few rows, on kernels with small-call
//     tiles, a tile of the GEMV's activation form with the GEMV's results). Work is split over
//     weight rows on the pool (over activation rows when there are too few weight rows to go
//     round).
//   - Invalid shapes, strides, an unsupported type, or an Isa this CPU cannot run throw
//     llms::Error(kInvalidArgument / kUnsupported) naming the field; nothing runs then.
//   - The same scalar reference underlies every Isa, and the SIMD paths differ from it only by
//     f32 summation order (tested by tests/unit/kernels).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "gguf/ggml_type.h"
#include "kernels/cpu_features.h"
#include "util/thread_pool.h"

namespace llms::kernels {

// How a matrix's blocks are laid out: kRows as in the GGUF file (above), kRowGroups16 repacked
// into groups of 16 interleaved rows (kernels/row_groups.h; Q4_0, Q5_0, Q8_0, Q4_K, Q6_K),
// kRowPairs with the super-blocks of each row pair alternating (kernels/row_pairs.h; Q4_K,
// Q5_K, Q6_K).
enum class WeightLayout { kRows, kRowGroups16, kRowPairs };

struct QuantMatrix {
  gguf::GgmlType type = gguf::GgmlType::kF32;
  const void* data = nullptr;
  int64_t n_rows = 0;
  int64_t n_cols = 0;
  size_t row_bytes = 0;  // >= the bytes of n_cols values of `type` (== for the repacked layouts)
  WeightLayout layout = WeightLayout::kRows;
};

// Types matmul can take as weights: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K,
// Q6_K.
bool matmul_supports(gguf::GgmlType type);

// Holds the quantized activations of one matmul call. reserve() sizes it for the largest call
// (at model load); matmul then allocates nothing. A call larger than the reservation grows the
// buffer (one allocation) rather than failing. Not thread-safe: one scratch per concurrent
// caller.
class MatmulScratch {
 public:
  MatmulScratch();
  ~MatmulScratch();
  MatmulScratch(MatmulScratch&&) noexcept;
  MatmulScratch& operator=(MatmulScratch&&) noexcept;

  // Room for m <= max_m activation rows of n_cols <= max_cols values, any weight type.
  void reserve(int64_t max_m, int64_t max_cols);
  size_t capacity_bytes() const { return capacity_; }

  // Internal: a 64-byte aligned buffer of at least `bytes`, grown if needed.
  void* ensure(size_t bytes);

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> buffer_;
  size_t capacity_ = 0;
};

void matmul(const QuantMatrix& w, const float* x, int64_t m, int64_t x_stride, float* y,
            int64_t y_stride, ThreadPool& pool, MatmulScratch& scratch, Isa isa = best_isa());

// One matrix of a matmul_many call and where its product goes (y, y_stride as in matmul).
struct MatmulTarget {
  QuantMatrix w;
  float* y = nullptr;
  int64_t y_stride = 0;
};

// Most targets one matmul_many call fuses; more are run one matmul at a time.
inline constexpr size_t kMaxFusedTargets = 8;

// Several matrices with the same n_cols against the same activations (a layer's q/k/v, or its
// gate and up projections): every target gets exactly the values matmul would give it. When
// all the matrices' kernels read the same activation form (up to the interleaving some GEMMs
// read, prepared once next to the rows), the activations are quantized once
// and the row tiles of all the matrices are shared out in one pass over the pool, so the call
// costs one wait for the threads instead of one per matrix; otherwise it is one matmul per
// target. Targets whose n_cols differ from target 0's are refused (llms::Error naming the
// target), as is anything matmul refuses; nothing runs then.
void matmul_many(std::span<const MatmulTarget> targets, const float* x, int64_t m, int64_t x_stride,
                 ThreadPool& pool, MatmulScratch& scratch, Isa isa = best_isa());

}  // namespace llms::kernels
