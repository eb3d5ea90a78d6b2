// kernels/matmul_legacy_avx2: AVX2 tiles for the 32-element formats Q4_1 and Q5_1 against ActQ8
// activations (Q4_0, Q5_0 and Q8_0 have their own tiles in matmul_q8x8_avx2.cpp; the signed
// path below is kept for a signed format, none uses it now).
//
// Per (weight block, activation block): the 32 weights are unpacked once to bytes (a signed
// format's signed q; unsigned 0..15 / 0..31 for Q4_1/Q5_1, whose min term uses the activation sum)
// and reused for every activation row of the tile; the dot is vpmaddubsw + vpmaddwd into 8 int32
// lanes (exact), scaled by dw * da into f32 accumulators. Every (row, column) pair goes through the
// same operations in any tile shape, so GEMM rows equal GEMV results bit for bit.
#include <cmath>

#include "matmul_kernels.h"
#include "simd_avx2.h"

namespace llms::kernels::detail {
namespace {

using namespace avx2;

// Format policies.
struct Q4_1 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ4_1);
  static constexpr bool kHasMin = true;
  static constexpr bool kSigned = false;
  static __m256i unpack(const uint8_t* b) { return unpack_nibbles(b + 4); }
};

struct Q5_1 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ5_1);
  static constexpr bool kHasMin = true;
  static constexpr bool kSigned = false;
  static __m256i unpack(const uint8_t* b) {
    return _mm256_or_si256(unpack_nibbles(b + 8), bits_to_0x10(load_u32(b + 4)));
  }
};

template <class F, int R, int C>
void tile(const Tile& t) {
  __m256 acc[R][C];
  float min_acc[R][C];
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < C; ++i) {
      acc[r][i] = _mm256_setzero_ps();
      min_acc[r][i] = 0.0f;
    }
  }
  const int64_t n_blocks = t.n_cols / quant::kQK;
  for (int64_t b = 0; b < n_blocks; ++b) {
    __m256i q[R];
    __m256i q_abs[R];  // signed formats: |w|, the unsigned side of vpmaddubsw
    float dw[R];
    float mw[R];
    for (int r = 0; r < R; ++r) {
      const uint8_t* block = t.w + r * t.w_stride + b * F::kBytes;
      _mm_prefetch(reinterpret_cast<const char*>(block + R * t.w_stride), _MM_HINT_T0);
      q[r] = F::unpack(block);
      if constexpr (F::kSigned) q_abs[r] = _mm256_sign_epi8(q[r], q[r]);
      dw[r] = load_f16(block);
      mw[r] = F::kHasMin ? load_f16(block + 2) : 0.0f;
    }
    for (int i = 0; i < C; ++i) {
      const auto* act = reinterpret_cast<const ActQ8*>(t.a + i * t.a_stride) + b;
      const __m256i y = loadu256(act->qs);
      const float da = act->d;
      for (int r = 0; r < R; ++r) {
        __m256i p;
        if constexpr (F::kSigned) {
          // |w| times y carrying w's sign (zero where w is): vpmaddubsw needs an unsigned side.
          p = dot_u8s8(q_abs[r], _mm256_sign_epi8(y, q[r]));
        } else {
          p = dot_u8s8(q[r], y);
        }
        acc[r][i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw[r] * da), acc[r][i]);
        if constexpr (F::kHasMin) {
          min_acc[r][i] = std::fma(mw[r], da * static_cast<float>(act->sum), min_acc[r][i]);
        }
      }
    }
  }
  for (int i = 0; i < C; ++i) {
    for (int r = 0; r < R; ++r) t.y[i * t.y_stride + r] = hsum(acc[r][i]) + min_acc[r][i];
  }
}

constexpr int kGemvRows = 4;
constexpr int kGemmRows = 4;
constexpr int kGemmCols = 2;

template <class F, int kRows, int kCols>
void dispatch(const Tile& t) {
  dispatch_tile<kRows, kCols>(
      t, [&t](auto r, auto c) { tile<F, decltype(r)::value, decltype(c)::value>(t); });
}

template <class F>
void gemv(const Tile& t) {
  dispatch<F, kGemvRows, 1>(t);
}

template <class F>
void gemm(const Tile& t) {
  dispatch<F, kGemmRows, kGemmCols>(t);
}

template <class F>
constexpr Kernel make() {
  return Kernel{ActKind::kQ8, kGemvRows, kGemmRows, kGemmCols, &gemv<F>, &gemm<F>};
}

constexpr Kernel kQ4_1 = make<Q4_1>();
constexpr Kernel kQ5_1 = make<Q5_1>();

}  // namespace

const Kernel* find_legacy_avx2(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kQ4_1:
      return &kQ4_1;
    case gguf::GgmlType::kQ5_1:
      return &kQ5_1;
    default:
      return nullptr;
  }
}

}  // namespace llms::kernels::detail
