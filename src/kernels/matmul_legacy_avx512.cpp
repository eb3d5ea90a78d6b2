// kernels/matmul_legacy_avx512: AVX-512 VNNI tiles for Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0
// against ActQ8 activations.
//
// Two consecutive blocks share one 512-bit register (block b in the low half, b + 1 in the
// high half), so one vpdpbusd does 64 multiply-adds into 16 int32 lanes (8 per block). Q8_0's
// signed weights go in as |w| with the activation's sign flipped where w < 0 (vpdpbusd needs
// one unsigned side; |-128| = 128 fits as unsigned). The per-block offset and scale are laid
// out as [block b x 8 | block b+1 x 8]. An odd last block runs with an all-zero high half,
// which adds exactly zero. Each (row, column) pair sees the same operations in any tile shape.
// clang-format off
#include "simd_avx512.h"  // first: see the note there on <immintrin.h>
// clang-format on

#include <cmath>

#include "matmul_kernels.h"

namespace llms::kernels::detail {
namespace {

using namespace avx2;
using avx512::join;

struct Q4_0 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ4_0);
  static constexpr int kLaneOffset = 1;
  static constexpr bool kHasMin = false;
  static constexpr bool kSigned = false;
  static __m256i unpack(const uint8_t* b) { return unpack_nibbles(b + 2); }
};

struct Q5_0 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ5_0);
  static constexpr int kLaneOffset = 2;
  static constexpr bool kHasMin = false;
  static constexpr bool kSigned = false;
  static __m256i unpack(const uint8_t* b) {
    return _mm256_or_si256(unpack_nibbles(b + 6), bits_to_0x10(load_u32(b + 2)));
  }
};

struct Q4_1 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ4_1);
  static constexpr int kLaneOffset = 0;
  static constexpr bool kHasMin = true;
  static constexpr bool kSigned = false;
  static __m256i unpack(const uint8_t* b) { return unpack_nibbles(b + 4); }
};

struct Q5_1 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ5_1);
  static constexpr int kLaneOffset = 0;
  static constexpr bool kHasMin = true;
  static constexpr bool kSigned = false;
  static __m256i unpack(const uint8_t* b) {
    return _mm256_or_si256(unpack_nibbles(b + 8), bits_to_0x10(load_u32(b + 4)));
  }
};

struct Q8_0 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ8_0);
  static constexpr int kLaneOffset = 0;
  static constexpr bool kHasMin = false;
  static constexpr bool kSigned = true;
  static __m256i unpack(const uint8_t* b) { return loadu256(b + 2); }
};

// One weight row's two blocks, unpacked.
struct WeightPair {
  __m512i q;      // unsigned values, or |w| for Q8_0
  __mmask64 neg;  // Q8_0: lanes where w < 0
  float d0, d1;   // block scales (d1 = 0 when there is no second block)
  float m0, m1;   // Q4_1/Q5_1 mins
};

template <class F>
inline WeightPair load_pair(const uint8_t* block, bool has_second) {
  WeightPair p;
  const __m256i q0 = F::unpack(block);
  const __m256i q1 = has_second ? F::unpack(block + F::kBytes) : _mm256_setzero_si256();
  const __m512i q = join(q0, q1);
  if constexpr (F::kSigned) {
    p.neg = _mm512_movepi8_mask(q);
    p.q = _mm512_abs_epi8(q);
  } else {
    p.neg = 0;
    p.q = q;
  }
  p.d0 = load_f16(block);
  p.d1 = has_second ? load_f16(block + F::kBytes) : 0.0f;
  p.m0 = F::kHasMin ? load_f16(block + 2) : 0.0f;
  p.m1 = F::kHasMin && has_second ? load_f16(block + F::kBytes + 2) : 0.0f;
  return p;
}

template <class F, int R, int C>
void tile(const Tile& t) {
  __m512 acc[R][C];
  float min_acc[R][C];
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < C; ++i) {
      acc[r][i] = _mm512_setzero_ps();
      min_acc[r][i] = 0.0f;
    }
  }
  const int64_t n_blocks = t.n_cols / quant::kQK;
  for (int64_t b = 0; b < n_blocks; b += 2) {
    const bool has_second = b + 1 < n_blocks;
    WeightPair w[R];
    for (int r = 0; r < R; ++r) {
      w[r] = load_pair<F>(t.w + r * t.w_stride + b * F::kBytes, has_second);
    }
    for (int i = 0; i < C; ++i) {
      const auto* a0 = reinterpret_cast<const ActQ8*>(t.a + i * t.a_stride) + b;
      const ActQ8 zero{};
      const ActQ8* a1 = has_second ? a0 + 1 : &zero;
      const __m512i y = join(loadu256(a0->qs), loadu256(a1->qs));
      __m512i offset = _mm512_setzero_si512();
      if constexpr (F::kLaneOffset != 0) {
        offset = join(_mm256_set1_epi32(F::kLaneOffset * a0->sum),
                      _mm256_set1_epi32(F::kLaneOffset * a1->sum));
      }
      for (int r = 0; r < R; ++r) {
        __m512i p;
        if constexpr (F::kSigned) {
          const __m512i signed_y = _mm512_mask_sub_epi8(y, w[r].neg, _mm512_setzero_si512(), y);
          p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[r].q, signed_y);
        } else {
          p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[r].q, y);
        }
        if constexpr (F::kLaneOffset != 0) p = _mm512_sub_epi32(p, offset);
        const __m512 scale = join(_mm256_set1_ps(w[r].d0 * a0->d), _mm256_set1_ps(w[r].d1 * a1->d));
        acc[r][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), scale, acc[r][i]);
        if constexpr (F::kHasMin) {
          min_acc[r][i] = std::fma(w[r].m0, a0->d * static_cast<float>(a0->sum), min_acc[r][i]);
          min_acc[r][i] = std::fma(w[r].m1, a1->d * static_cast<float>(a1->sum), min_acc[r][i]);
        }
      }
    }
  }
  for (int i = 0; i < C; ++i) {
    for (int r = 0; r < R; ++r) t.y[i * t.y_stride + r] = avx512::hsum(acc[r][i]) + min_acc[r][i];
  }
}

constexpr int kGemvRows = 4;
constexpr int kGemmRows = 4;
constexpr int kGemmCols = 4;

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

constexpr Kernel kQ4_0 = make<Q4_0>();
constexpr Kernel kQ4_1 = make<Q4_1>();
constexpr Kernel kQ5_0 = make<Q5_0>();
constexpr Kernel kQ5_1 = make<Q5_1>();
constexpr Kernel kQ8_0 = make<Q8_0>();

}  // namespace

const Kernel* find_legacy_avx512(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kQ4_0:
      return &kQ4_0;
    case gguf::GgmlType::kQ4_1:
      return &kQ4_1;
    case gguf::GgmlType::kQ5_0:
      return &kQ5_0;
    case gguf::GgmlType::kQ5_1:
      return &kQ5_1;
    case gguf::GgmlType::kQ8_0:
      return &kQ8_0;
    default:
      return nullptr;
  }
}

}  // namespace llms::kernels::detail
