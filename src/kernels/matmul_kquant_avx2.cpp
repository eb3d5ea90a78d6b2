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
//
// The GEMMs have their own tiles (q6k_gemm_tile, q45k_gemm_tile: 1 weight row x 32 activation
// rows against interleaved ActQ8Kx8 groups, no horizontal sums), with the GEMV's integers and
// final f32 operations, so a GEMM row equals the GEMV of that row bit for bit.
#include <cmath>
#include <cstring>

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

// The 4 bytes at p broadcast to all 8 lanes.
inline __m256i broadcast_u32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
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
  static float accumulate(const Prep& p, const ActQ8K& a, __m256i isum, float acc) {
    const int sumi = hsum_i32(isum);
    const int summ = hsum_i32(_mm_madd_epi16(p.mins, act_group_sums(a)));
    // Explicit fma: left to itself the compiler contracts differently per tile shape.
    return acc + std::fma(p.d * a.d, static_cast<float>(sumi),
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
  static float accumulate(const Prep& p, const ActQ8K& a, __m256i isum, float acc) {
    // sum_k sc_k * (q - 32) * y = sum_k sc_k * q * y - 32 * sum_k sc_k * bsums_k
    const __m256i offset = _mm256_madd_epi16(_mm256_cvtepi8_epi16(p.scales), loadu256(a.bsums));
    const int sumi = hsum_i32(_mm256_sub_epi32(isum, _mm256_slli_epi32(offset, 5)));
    // Explicit fma, the same operation as q6k_gemm_tile's vfmadd (GEMM row == GEMV).
    return std::fma(p.d * a.d, static_cast<float>(sumi), acc);
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
      for (int i = 0; i < C; ++i)
        out[r][i] = F::accumulate(prep[r], *act[i], isum[r][i], out[r][i]);
    }
  }
  for (int i = 0; i < C; ++i) {
    for (int r = 0; r < R; ++r) t.y[i * t.y_stride + r] = out[r][i];
  }
}

constexpr int kGemvRows = 2;

// ---- Q6_K GEMM against interleaved activations (ActQ8Kx8) ----
//
// Tile: R weight rows x NG groups of 8 activation rows. Per super-block each weight row is
// unpacked once to 256 unsigned bytes (0..63) on the stack, with its 16 sub-block scales as
// broadcast int16 vectors. Per group of 8 activation rows and sub-block k (16 values = 4-byte
// groups 4k..4k+3): one vpmaddubsw per 4-byte group multiplies the broadcast weight bytes with
// the same 4 positions of the 8 rows (lanes = rows); two such results are summed in int16
// (2 * 2 * 63 * 128 < 2^15), then vpmaddwd by sc_k gives int32. The -32 offset is
// 32 * sum_k sc_k * bsums_k, 8 vpmaddwd on interleaved bsum pairs. The integer per (row,
// activation row, super-block) is the GEMV's exactly, and the f32 step is the same fma.
constexpr int kQ6GemmRows = 1;
constexpr int kGemmGroups = 4;

template <int R, int NG>
void q6k_gemm_tile(const Tile& t) {
  const int64_t n_blocks = t.n_cols / quant::kQK_K;
  const size_t group_stride = 8 * t.a_stride;
  __m256 acc[R][NG];
  for (int r = 0; r < R; ++r) {
    for (int g = 0; g < NG; ++g) acc[r][g] = _mm256_setzero_ps();
  }
  alignas(32) uint8_t w[R][quant::kQK_K];
  alignas(32) int16_t sc[R][16][16];      // sc[r][k] = sub-block k's scale in all 16 lanes
  alignas(32) int16_t sc_pair[R][8][16];  // (sc[2p], sc[2p+1]) repeated
  for (int64_t b = 0; b < n_blocks; ++b) {
    __m256 dw[R];
    for (int r = 0; r < R; ++r) {
      const uint8_t* block = t.w + r * t.w_stride + b * Q6K::kBytes;
      Q6K::Prep prep;
      Q6K::prepare(block, &prep);
      for (int g = 0; g < 8; ++g) {
        __m256i q;
        __m256i unused;
        Q6K::group(prep, g, &q, &unused);
        _mm256_store_si256(reinterpret_cast<__m256i*>(w[r] + 32 * g), q);
      }
      const auto* scales = reinterpret_cast<const int8_t*>(block + 192);
      for (int k = 0; k < 16; ++k) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(sc[r][k]), _mm256_set1_epi16(scales[k]));
      }
      for (int p = 0; p < 8; ++p) {
        const auto lo = static_cast<uint16_t>(static_cast<int16_t>(scales[2 * p]));
        const auto hi = static_cast<uint16_t>(static_cast<int16_t>(scales[2 * p + 1]));
        _mm256_store_si256(reinterpret_cast<__m256i*>(sc_pair[r][p]),
                           _mm256_set1_epi32(static_cast<int32_t>(lo | (uint32_t{hi} << 16))));
      }
      dw[r] = _mm256_set1_ps(prep.d);
    }
    const ActQ8Kx8* a[NG];
    __m256i isum[R][NG];
    for (int g = 0; g < NG; ++g) {
      a[g] = reinterpret_cast<const ActQ8Kx8*>(t.a + g * group_stride) + b;
      for (int r = 0; r < R; ++r) isum[r][g] = _mm256_setzero_si256();
    }
    for (int k = 0; k < 16; ++k) {
      __m256i wb[R][4];
      __m256i scale[R];
      for (int r = 0; r < R; ++r) {
        for (int u = 0; u < 4; ++u) wb[r][u] = broadcast_u32(w[r] + 16 * k + 4 * u);
        scale[r] = _mm256_load_si256(reinterpret_cast<const __m256i*>(sc[r][k]));
      }
      for (int g = 0; g < NG; ++g) {
        const __m256i* ag = reinterpret_cast<const __m256i*>(a[g]->qs[4 * k]);
        const __m256i a0 = _mm256_load_si256(ag);
        const __m256i a1 = _mm256_load_si256(ag + 1);
        const __m256i a2 = _mm256_load_si256(ag + 2);
        const __m256i a3 = _mm256_load_si256(ag + 3);
        for (int r = 0; r < R; ++r) {
          const __m256i s0 = _mm256_add_epi16(_mm256_maddubs_epi16(wb[r][0], a0),
                                              _mm256_maddubs_epi16(wb[r][1], a1));
          const __m256i s1 = _mm256_add_epi16(_mm256_maddubs_epi16(wb[r][2], a2),
                                              _mm256_maddubs_epi16(wb[r][3], a3));
          isum[r][g] = _mm256_add_epi32(
              isum[r][g],
              _mm256_add_epi32(_mm256_madd_epi16(s0, scale[r]), _mm256_madd_epi16(s1, scale[r])));
        }
      }
    }
    for (int g = 0; g < NG; ++g) {
      __m256i offset[R];
      for (int r = 0; r < R; ++r) offset[r] = _mm256_setzero_si256();
      for (int p = 0; p < 8; ++p) {
        const __m256i bs = _mm256_load_si256(reinterpret_cast<const __m256i*>(a[g]->bsums[p]));
        for (int r = 0; r < R; ++r) {
          offset[r] = _mm256_add_epi32(
              offset[r],
              _mm256_madd_epi16(
                  bs, _mm256_load_si256(reinterpret_cast<const __m256i*>(sc_pair[r][p]))));
        }
      }
      const __m256 da = _mm256_load_ps(a[g]->d);
      for (int r = 0; r < R; ++r) {
        const __m256i sumi = _mm256_sub_epi32(isum[r][g], _mm256_slli_epi32(offset[r], 5));
        acc[r][g] = _mm256_fmadd_ps(_mm256_mul_ps(dw[r], da), _mm256_cvtepi32_ps(sumi), acc[r][g]);
      }
    }
  }
  for (int r = 0; r < R; ++r) store_row_groups(acc[r], t.n_a, t.y + r, t.y_stride);
}

template <int R, int NG>
void q6k_gemm_dispatch(const Tile& t) {
  if constexpr (R > 1) {
    if (t.n_w < R) return q6k_gemm_dispatch<R - 1, NG>(t);
  }
  if constexpr (NG > 1) {
    if (t.n_a <= 8 * (NG - 1)) return q6k_gemm_dispatch<R, NG - 1>(t);
  }
  q6k_gemm_tile<R, NG>(t);
}

void q6k_gemm(const Tile& t) { q6k_gemm_dispatch<kQ6GemmRows, kGemmGroups>(t); }

// ---- Q4_K / Q5_K GEMM against interleaved activations (ActQ8Kx8) ----
//
// Tile: 1 weight row x NG groups of 8 activation rows, as q6k_gemm_tile. Per super-block the
// row is unpacked once to 256 unsigned bytes (0..15 / 0..31) on the stack. Per sub-block j (32
// values = 4-byte groups 8j..8j+7) the 8 broadcast weight groups stay in registers for the NG
// activation groups; vpmaddubsw products are summed in int16 (Q4_K: all 8, 8 * 2 * 15 * 128 <
// 2^15; Q5_K: 4 at a time, 4 * 2 * 31 * 128 < 2^15), then vpmaddwd by scale_j gives int32. The
// min term is sum_j min_j * (bsums[2j] + bsums[2j+1]): one vpmaddwd per j on the interleaved
// bsum pair against (min_j, min_j). Integers and the f32 step are the GEMV's (Q45K::accumulate).
template <bool kFiveBit, int NG>
void q45k_gemm_tile(const Tile& t) {
  using F = Q45K<kFiveBit>;
  constexpr int kSum16 = kFiveBit ? 4 : 8;
  const int64_t n_blocks = t.n_cols / quant::kQK_K;
  const size_t group_stride = 8 * t.a_stride;
  __m256 acc[NG];
  for (int g = 0; g < NG; ++g) acc[g] = _mm256_setzero_ps();
  alignas(32) uint8_t w[quant::kQK_K];
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = t.w + b * F::kBytes;
    typename F::Prep prep;
    F::prepare(block, &prep);
    for (int j = 0; j < 8; ++j) {
      __m256i q;
      __m256i unused;
      F::group(prep, j, &q, &unused);
      _mm256_store_si256(reinterpret_cast<__m256i*>(w + 32 * j), q);
    }
    const ActQ8Kx8* a[NG];
    __m256i isum[NG];
    __m256i summ[NG];
    for (int g = 0; g < NG; ++g) {
      a[g] = reinterpret_cast<const ActQ8Kx8*>(t.a + g * group_stride) + b;
      isum[g] = _mm256_setzero_si256();
      summ[g] = _mm256_setzero_si256();
    }
    for (int j = 0; j < 8; ++j) {
      __m256i wb[8];
      for (int u = 0; u < 8; ++u) wb[u] = broadcast_u32(w + 32 * j + 4 * u);
      const __m256i scale = _mm256_set1_epi16(prep.sm.scale[j]);
      for (int g = 0; g < NG; ++g) {
        const auto* ag = reinterpret_cast<const __m256i*>(a[g]->qs[8 * j]);
        for (int u0 = 0; u0 < 8; u0 += kSum16) {
          __m256i s16 = _mm256_maddubs_epi16(wb[u0], _mm256_load_si256(ag + u0));
          for (int u = u0 + 1; u < u0 + kSum16; ++u) {
            s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(wb[u], _mm256_load_si256(ag + u)));
          }
          isum[g] = _mm256_add_epi32(isum[g], _mm256_madd_epi16(s16, scale));
        }
      }
    }
    // The min terms in a loop of their own: inside the one above they spilled its accumulators.
    for (int j = 0; j < 8; ++j) {
      const __m256i min = _mm256_set1_epi16(prep.sm.min[j]);
      for (int g = 0; g < NG; ++g) {
        const __m256i bs = _mm256_load_si256(reinterpret_cast<const __m256i*>(a[g]->bsums[j]));
        summ[g] = _mm256_add_epi32(summ[g], _mm256_madd_epi16(bs, min));
      }
    }
    const __m256 d = _mm256_set1_ps(prep.d);
    const __m256 dmin = _mm256_set1_ps(prep.dmin);
    for (int g = 0; g < NG; ++g) {
      const __m256 da = _mm256_load_ps(a[g]->d);
      // acc + fma(d * da, sumi, -((dmin * da) * summ)), as Q45K::accumulate.
      const __m256 m = _mm256_xor_ps(
          _mm256_mul_ps(_mm256_mul_ps(dmin, da), _mm256_cvtepi32_ps(summ[g])), sign_bit);
      acc[g] = _mm256_add_ps(acc[g],
                             _mm256_fmadd_ps(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(isum[g]), m));
    }
  }
  store_row_groups(acc, t.n_a, t.y, t.y_stride);
}

template <bool kFiveBit, int NG>
void q45k_gemm_dispatch(const Tile& t) {
  if constexpr (NG > 1) {
    if (t.n_a <= 8 * (NG - 1)) return q45k_gemm_dispatch<kFiveBit, NG - 1>(t);
  }
  q45k_gemm_tile<kFiveBit, NG>(t);
}

template <bool kFiveBit>
void q45k_gemm(const Tile& t) {
  q45k_gemm_dispatch<kFiveBit, kGemmGroups>(t);
}

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

constexpr Kernel kQ4_K{ActKind::kQ8Kx8, kGemvRows,          1,
                       8 * kGemmGroups, &gemv<Q45K<false>>, &q45k_gemm<false>};
constexpr Kernel kQ5_K{ActKind::kQ8Kx8, kGemvRows,         1,
                       8 * kGemmGroups, &gemv<Q45K<true>>, &q45k_gemm<true>};
constexpr Kernel kQ6_K{ActKind::kQ8Kx8, kGemvRows,  kQ6GemmRows,
                       8 * kGemmGroups, &gemv<Q6K>, &q6k_gemm};

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
