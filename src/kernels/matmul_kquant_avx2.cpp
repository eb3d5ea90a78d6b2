// kernels/matmul_kquant_avx2: AVX2 tiles for the K-quants Q4_K, Q5_K and Q6_K against Q8_K
// activations.
//
// A super-block (256 values) is walked in 8 groups of 32. Per group each weight row's values
// are unpacked once to unsigned bytes (0..15, 0..31 or 0..63) with a vector of its sub-block
// scales as int16, and reused for every activation row: vpmaddubsw gives int16 pair sums,
// vpmaddwd against the scales gives scaled int32 sums, accumulated exactly over the
// super-block. The min term (Q4_K/Q5_K: dmin * sum_j m_j * B_j) and Q6_K's -32 offset
// (32 * sum_k sc_k * B_k) come from the activation's bsums. Per pair and super-block the
// integers are then scaled in f32, in the same order in every tile shape.
#include <cmath>

#include "matmul_kernels.h"
#include "simd_avx2.h"

namespace llms::kernels::detail {
namespace {

using namespace avx2;

// The 8 6-bit scales and 8 6-bit mins of a Q4_K/Q5_K block as bytes (k_scale_min, 32 bits at
// a time): scales 0-3 and mins 0-3 are the low 6 bits of bytes 0-3 / 4-7; scales 4-7 take
// their low 4 bits from bytes 8-11 (low nibble) and their top 2 bits from bits 6-7 of bytes
// 0-3; mins 4-7 likewise from the high nibbles and bytes 4-7.
struct ScaleMin {
  uint8_t scale[8];
  uint8_t min[8];
};

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

// Sums of the activation over each 32-group: bsums[2j] + bsums[2j+1], as 8 int16.
inline __m128i act_group_sums(const ActQ8K& a) {
  return _mm_hadd_epi16(loadu128(a.bsums), loadu128(a.bsums + 8));
}

// Q4_K and Q5_K: value = d * scale_j * q - dmin * min_j.
template <bool kFiveBit>
struct Q45K {
  static constexpr size_t kBytes = kFiveBit ? sizeof(quant::BlockQ5_K) : sizeof(quant::BlockQ4_K);
  static constexpr size_t kQsOffset = kFiveBit ? 48 : 16;
  struct Prep {
    const uint8_t* qs;
    __m256i high;  // Q5_K's qh bytes (bit j of byte l: fifth bit of element 32j + l)
    ScaleMin sm;
    __m128i mins;  // 8 int16
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
  // Group g (elements 32g .. 32g+31): unsigned values and the int16 scale vector.
  static void group(const Prep& p, int g, __m256i* q, __m256i* scale) {
    const __m256i raw = loadu256(p.qs + 32 * (g / 2));
    __m256i v = (g % 2 == 0) ? raw : _mm256_srli_epi16(raw, 4);
    v = _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
    if constexpr (kFiveBit) {
      const __m256i bit = _mm256_and_si256(_mm256_srli_epi16(p.high, g), _mm256_set1_epi8(1));
      v = _mm256_or_si256(v, _mm256_slli_epi16(bit, 4));
    }
    *q = v;
    *scale = _mm256_set1_epi16(p.sm.scale[g]);
  }
  static float finish(const Prep& p, const ActQ8K& a, __m256i isum) {
    const int sumi = hsum_i32(isum);
    const int summ = hsum_i32(_mm_madd_epi16(p.mins, act_group_sums(a)));
    // Explicit fma: left to itself the compiler contracts differently per tile shape.
    return std::fma(p.d * a.d, static_cast<float>(sumi),
                    -(p.dmin * a.d) * static_cast<float>(summ));
  }
};

// Q6_K: value = d * sc_k * (q - 32), 16 sub-blocks of 16 with signed 8-bit scales.
struct Q6K {
  static constexpr size_t kBytes = sizeof(quant::BlockQ6_K);
  struct Prep {
    const uint8_t* ql;
    const uint8_t* qh;
    __m128i scales;  // 16 int8
    float d;
  };
  static void prepare(const uint8_t* block, Prep* p) {
    p->ql = block;
    p->qh = block + 128;
    p->scales = loadu128(block + 192);
    p->d = load_f16(block + 208);
  }
  static void group(const Prep& p, int g, __m256i* q, __m256i* scale) {
    const int h = g / 4;  // half of the super-block
    const int s = g % 4;  // 32-group within the half
    const __m256i raw = loadu256(p.ql + 64 * h + 32 * (s % 2));
    const __m256i low =
        _mm256_and_si256(s < 2 ? raw : _mm256_srli_epi16(raw, 4), _mm256_set1_epi8(0x0f));
    const __m256i high =
        _mm256_and_si256(_mm256_srli_epi16(loadu256(p.qh + 32 * h), 2 * s), _mm256_set1_epi8(3));
    *q = _mm256_or_si256(low, _mm256_slli_epi16(high, 4));
    // Sub-blocks 2g and 2g+1 cover the two 16-byte halves of the group.
    const __m128i pick = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m128i two =
        _mm_shuffle_epi8(p.scales, _mm_add_epi8(pick, _mm_set1_epi8(static_cast<char>(2 * g))));
    *scale = _mm256_cvtepi8_epi16(two);
  }
  static float finish(const Prep& p, const ActQ8K& a, __m256i isum) {
    // sum_k sc_k * (q - 32) * y = sum_k sc_k * q * y - 32 * sum_k sc_k * bsums_k
    const __m256i offset = _mm256_madd_epi16(_mm256_cvtepi8_epi16(p.scales), loadu256(a.bsums));
    const int sumi = hsum_i32(_mm256_sub_epi32(isum, _mm256_slli_epi32(offset, 5)));
    return p.d * a.d * static_cast<float>(sumi);
  }
};

template <class F, int R, int C>
void tile(const Tile& t) {
  float out[R][C] = {};
  const int64_t n_blocks = t.n_cols / quant::kQK_K;
  for (int64_t b = 0; b < n_blocks; ++b) {
    typename F::Prep prep[R];
    for (int r = 0; r < R; ++r) {
      const uint8_t* block = t.w + r * t.w_stride + b * F::kBytes;
      prefetch(block + R * t.w_stride, F::kBytes);  // the next tile's rows
      F::prepare(block, &prep[r]);
    }
    const ActQ8K* act[C];
    for (int i = 0; i < C; ++i) act[i] = reinterpret_cast<const ActQ8K*>(t.a + i * t.a_stride) + b;
    __m256i isum[R][C];
    for (int r = 0; r < R; ++r) {
      for (int i = 0; i < C; ++i) isum[r][i] = _mm256_setzero_si256();
    }
    for (int g = 0; g < 8; ++g) {
      __m256i q[R];
      __m256i scale[R];
      for (int r = 0; r < R; ++r) F::group(prep[r], g, &q[r], &scale[r]);
      for (int i = 0; i < C; ++i) {
        const __m256i y = loadu256(act[i]->qs + 32 * g);
        for (int r = 0; r < R; ++r) {
          const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q[r], y), scale[r]);
          isum[r][i] = _mm256_add_epi32(isum[r][i], p);
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
constexpr int kGemmRows = 2;
constexpr int kGemmCols = 3;

template <class F, int kRows, int kCols>
void dispatch(const Tile& t) {
  if constexpr (kRows > 1) {
    if (t.n_w < kRows) return dispatch<F, kRows - 1, kCols>(t);
  }
  if constexpr (kCols > 1) {
    if (t.n_a < kCols) return dispatch<F, kRows, kCols - 1>(t);
  }
  tile<F, kRows, kCols>(t);
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

const Kernel* find_kquant_avx2(gguf::GgmlType type) {
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
