// kernels/matmul_kquant_avx512: AVX-512 VNNI tiles for Q4_K, Q5_K and Q6_K against Q8_K.
//
// A super-block is walked in 4 pieces of 64 values, which are contiguous in the activation
// (one 512-bit load) and come out of each format's packing as one register: Q4_K/Q5_K's 32
// bytes of nibbles give groups 2p (low nibbles) and 2p + 1 (high); Q6_K's 64 bytes of ql give
// elements 64p .. 64p + 63 as low (p even) or high (p odd) nibbles, with the matching qh bit
// pairs. vpmaddubsw makes int16 pair sums and vpdpwssd multiplies them by the int16 sub-block
// scales and accumulates in int32, exactly. The min / -32 terms and the f32 scaling are as in
// the AVX2 kernels (matmul_kquant_avx2.cpp), in the same order for every tile shape.
// clang-format off
#include "simd_avx512.h"  // first: see the note there on <immintrin.h>
// clang-format on

#include <cmath>

#include "matmul_kernels.h"

namespace llms::kernels::detail {
namespace {

using namespace avx2;
using avx512::join;
using avx512::loadu512;

struct ScaleMin {
  uint8_t scale[8];
  uint8_t min[8];
};

// As unpack_scale_min in matmul_kquant_avx2.cpp (k_scale_min, 32 bits at a time).
inline ScaleMin unpack_scale_min(const uint8_t* packed) {
  const uint32_t u0 = load_u32(packed);
  const uint32_t u1 = load_u32(packed + 4);
  const uint32_t u2 = load_u32(packed + 8);
  const uint32_t words[4] = {u0 & 0x3f3f3f3fu, (u2 & 0x0f0f0f0fu) | ((u0 >> 2) & 0x30303030u),
                             u1 & 0x3f3f3f3fu,
                             ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 2) & 0x30303030u)};
  ScaleMin out;
  std::memcpy(out.scale, words, 8);
  std::memcpy(out.min, words + 2, 8);
  return out;
}

template <bool kFiveBit>
struct Q45K {
  static constexpr size_t kBytes = kFiveBit ? sizeof(quant::BlockQ5_K) : sizeof(quant::BlockQ4_K);
  static constexpr size_t kQsOffset = kFiveBit ? 48 : 16;
  struct Prep {
    const uint8_t* qs;
    __m256i high;
    ScaleMin sm;
    __m128i mins;
    float d;
    float dmin;
  };
  static void prepare(const uint8_t* block, Prep* p) {
    p->d = load_f16(block);
    p->dmin = load_f16(block + 2);
    p->sm = unpack_scale_min(block + 4);
    p->mins = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p->sm.min)));
    p->qs = block + kQsOffset;
    if constexpr (kFiveBit) p->high = loadu256(block + 16);
  }
  // Piece p: groups 2p and 2p + 1 (elements 64p .. 64p + 63).
  static void piece(const Prep& prep, int p, __m512i* q, __m512i* scale) {
    const __m256i raw = loadu256(prep.qs + 32 * p);
    const __m256i nib = _mm256_set1_epi8(0x0f);
    __m256i lo = _mm256_and_si256(raw, nib);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), nib);
    if constexpr (kFiveBit) {
      const __m256i one = _mm256_set1_epi8(1);
      lo = _mm256_or_si256(
          lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(prep.high, 2 * p), one), 4));
      hi = _mm256_or_si256(
          hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(prep.high, 2 * p + 1), one), 4));
    }
    *q = join(lo, hi);
    *scale =
        join(_mm256_set1_epi16(prep.sm.scale[2 * p]), _mm256_set1_epi16(prep.sm.scale[2 * p + 1]));
  }
  static float finish(const Prep& prep, const ActQ8K& a, __m512i isum) {
    const int sumi = avx512::hsum_i32(isum);
    const __m128i group_sums = _mm_hadd_epi16(loadu128(a.bsums), loadu128(a.bsums + 8));
    const int summ = hsum_i32(_mm_madd_epi16(prep.mins, group_sums));
    return std::fma(prep.d * a.d, static_cast<float>(sumi),
                    -(prep.dmin * a.d) * static_cast<float>(summ));
  }
};

struct Q6K {
  static constexpr size_t kBytes = sizeof(quant::BlockQ6_K);
  struct Prep {
    const uint8_t* ql;
    const uint8_t* qh;
    __m128i scales;
    float d;
  };
  static void prepare(const uint8_t* block, Prep* p) {
    p->ql = block;
    p->qh = block + 128;
    p->scales = loadu128(block + 192);
    p->d = load_f16(block + 208);
  }
  // Piece p = 2h + which: elements 128h + 64 which + (0 .. 63).
  static void piece(const Prep& prep, int p, __m512i* q, __m512i* scale) {
    const int h = p / 2;
    const int which = p % 2;
    const __m512i ql = loadu512(prep.ql + 64 * h);
    const __m512i low =
        _mm512_and_si512(which == 0 ? ql : _mm512_srli_epi16(ql, 4), _mm512_set1_epi8(0x0f));
    const __m256i qh = loadu256(prep.qh + 32 * h);
    const __m256i three = _mm256_set1_epi8(3);
    const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(qh, 4 * which), three);
    const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(qh, 4 * which + 2), three);
    *q = _mm512_or_si512(low, _mm512_slli_epi16(join(h0, h1), 4));
    // Sub-blocks 4p .. 4p+3, 16 values (8 int16 pair sums) each.
    const __m256i both = _mm256_broadcastsi128_si256(prep.scales);
    const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                          2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bytes = _mm256_shuffle_epi8(
        both, _mm256_add_epi8(pick, _mm256_set1_epi8(static_cast<char>(4 * p))));
    *scale = _mm512_cvtepi8_epi16(bytes);
  }
  static float finish(const Prep& prep, const ActQ8K& a, __m512i isum) {
    const __m256i offset = _mm256_madd_epi16(_mm256_cvtepi8_epi16(prep.scales), loadu256(a.bsums));
    const int sumi = avx512::hsum_i32(isum) - 32 * hsum_i32(offset);
    return prep.d * a.d * static_cast<float>(sumi);
  }
};

template <class F, int R, int C>
void tile(const Tile& t) {
  float out[R][C] = {};
  const int64_t n_blocks = t.n_cols / quant::kQK_K;
  for (int64_t b = 0; b < n_blocks; ++b) {
    typename F::Prep prep[R];
    for (int r = 0; r < R; ++r) F::prepare(t.w + r * t.w_stride + b * F::kBytes, &prep[r]);
    const ActQ8K* act[C];
    for (int i = 0; i < C; ++i) act[i] = reinterpret_cast<const ActQ8K*>(t.a + i * t.a_stride) + b;
    __m512i isum[R][C];
    for (int r = 0; r < R; ++r) {
      for (int i = 0; i < C; ++i) isum[r][i] = _mm512_setzero_si512();
    }
    for (int p = 0; p < 4; ++p) {
      __m512i q[R];
      __m512i scale[R];
      for (int r = 0; r < R; ++r) F::piece(prep[r], p, &q[r], &scale[r]);
      for (int i = 0; i < C; ++i) {
        const __m512i y = loadu512(act[i]->qs + 64 * p);
        for (int r = 0; r < R; ++r) {
          isum[r][i] = _mm512_dpwssd_epi32(isum[r][i], _mm512_maddubs_epi16(q[r], y), scale[r]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int i = 0; i < C; ++i) out[r][i] += F::finish(prep[r], *act[i], isum[r][i]);
    }
  }
  for (int i = 0; i < C; ++i) {
    for (int r = 0; r < R; ++r) t.y[i * t.y_stride + r] = out[r][i];
  }
}

constexpr int kGemvRows = 2;
constexpr int kGemmRows = 4;
constexpr int kGemmCols = 3;

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
  return Kernel{ActKind::kQ8K, kGemvRows, kGemmRows, kGemmCols, &gemv<F>, &gemm<F>};
}

constexpr Kernel kQ4_K = make<Q45K<false>>();
constexpr Kernel kQ5_K = make<Q45K<true>>();
constexpr Kernel kQ6_K = make<Q6K>();

}  // namespace

const Kernel* find_kquant_avx512(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kQ4_K:
      return &kQ4_K;
    case gguf::GgmlType::kQ5_K:
      return &kQ5_K;
    case gguf::GgmlType::kQ6_K:
      return &kQ6_K;
    default:
      return nullptr;
  }
}

}  // namespace llms::kernels::detail
