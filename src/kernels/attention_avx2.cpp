// kernels/attention_avx2: AVX2 path of the attention block step (contract in
// kernels/attention.h).
//
// Per row: scores of 8 keys at a time (8 dot products accumulated lane-wise over head_dim, then
// one transposing reduction), the row's block max, one vectorised exp, one rescale of the
// accumulator, and the values accumulated 64 (or 8) dims at a time. Every step of a row's
// arithmetic is fixed by its own key range and the block's n_keys, so rows never influence one
// another. A key is reduced in the same order (lanes ((0+1)+(2+3)) + ((4+5)+(6+7))) whether it
// goes through the 8-key or the single-key path.
//
// exp: x = n ln2 + r with n = round(x / ln2), |r| <= ln2 / 2 (ln2 split in two for an exact
// product), e^r by its Taylor series to r^7 (truncation below 6e-9 relative), scaled by 2^n
// through the exponent bits. Inputs below -87.33654 give exactly 0 (so a masked score of -inf
// weighs nothing), above 88.37 they saturate.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "attention_kernels.h"
#include "simd_avx2.h"

namespace llms::kernels::detail {
namespace {

using avx2::hmax;
using avx2::hsum;

constexpr float kExpMin = -87.33654f;
constexpr float kExpMax = 88.37626f;

inline __m256 exp8(__m256 x) {
  const __m256 underflow = _mm256_cmp_ps(x, _mm256_set1_ps(kExpMin), _CMP_LT_OQ);
  x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(kExpMax)), _mm256_set1_ps(kExpMin));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-6f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  // n in [-126, 127] after the clamp, so 2^n is a normal float.
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(underflow, _mm256_mul_ps(p, _mm256_castsi256_ps(bits)));
}

inline float exp1(float x) { return _mm256_cvtss_f32(exp8(_mm256_set1_ps(x))); }

// Lane j of the result is the sum of the 8 lanes of a[j], in the order
// ((0+1)+(2+3)) + ((4+5)+(6+7)).
inline __m256 reduce8(const __m256* a) {
  const __m256 t0 = _mm256_hadd_ps(a[0], a[1]);
  const __m256 t1 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 t2 = _mm256_hadd_ps(a[4], a[5]);
  const __m256 t3 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1);
  const __m256 u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// The same reduction for one vector.
inline float reduce1(__m256 a) {
  const __m256 t = _mm256_hadd_ps(a, a);
  const __m256 u = _mm256_hadd_ps(t, t);
  return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)));
}

// Scores of keys [j0, j0 + 8) for one query row, -inf outside [begin, end).
inline __m256 scores8(const float* q, const float* k, int64_t hd, int32_t j0, int32_t begin,
                      int32_t end) {
  __m256 a[8];
  for (auto& x : a) x = _mm256_setzero_ps();
  const float* kj = k + j0 * hd;
  for (int64_t e = 0; e < hd; e += 8) {
    const __m256 qv = _mm256_loadu_ps(q + e);
    for (int jj = 0; jj < 8; ++jj) {
      a[jj] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kj + jj * hd + e), a[jj]);
    }
  }
  const __m256 s = reduce8(a);
  const __m256i idx =
      _mm256_add_epi32(_mm256_set1_epi32(j0), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i inside = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(begin), idx),
                                             _mm256_cmpgt_epi32(_mm256_set1_epi32(end), idx));
  return _mm256_blendv_ps(_mm256_set1_ps(-std::numeric_limits<float>::infinity()), s,
                          _mm256_castsi256_ps(inside));
}

inline float score1(const float* q, const float* kj, int64_t hd) {
  __m256 a = _mm256_setzero_ps();
  for (int64_t e = 0; e < hd; e += 8) {
    a = _mm256_fmadd_ps(_mm256_loadu_ps(q + e), _mm256_loadu_ps(kj + e), a);
  }
  return reduce1(a);
}

// acc[0, 64) = acc * correction + sum_{j in [begin, end)} p[j] * v_j[0, 64). Named registers,
// not an array: GCC keeps an array of __m256 in memory and stores it back on every key.
inline void accumulate64(float* acc, const float* p, const float* v, int64_t hdv, int32_t begin,
                         int32_t end, float correction) {
  const __m256 c = _mm256_set1_ps(correction);
  __m256 a0 = _mm256_mul_ps(_mm256_loadu_ps(acc + 0), c);
  __m256 a1 = _mm256_mul_ps(_mm256_loadu_ps(acc + 8), c);
  __m256 a2 = _mm256_mul_ps(_mm256_loadu_ps(acc + 16), c);
  __m256 a3 = _mm256_mul_ps(_mm256_loadu_ps(acc + 24), c);
  __m256 a4 = _mm256_mul_ps(_mm256_loadu_ps(acc + 32), c);
  __m256 a5 = _mm256_mul_ps(_mm256_loadu_ps(acc + 40), c);
  __m256 a6 = _mm256_mul_ps(_mm256_loadu_ps(acc + 48), c);
  __m256 a7 = _mm256_mul_ps(_mm256_loadu_ps(acc + 56), c);
  for (int32_t j = begin; j < end; ++j) {
    const __m256 pj = _mm256_broadcast_ss(p + j);
    const float* vj = v + j * hdv;
    a0 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 0), a0);
    a1 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 8), a1);
    a2 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 16), a2);
    a3 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 24), a3);
    a4 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 32), a4);
    a5 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 40), a5);
    a6 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 48), a6);
    a7 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 56), a7);
  }
  _mm256_storeu_ps(acc + 0, a0);
  _mm256_storeu_ps(acc + 8, a1);
  _mm256_storeu_ps(acc + 16, a2);
  _mm256_storeu_ps(acc + 24, a3);
  _mm256_storeu_ps(acc + 32, a4);
  _mm256_storeu_ps(acc + 40, a5);
  _mm256_storeu_ps(acc + 48, a6);
  _mm256_storeu_ps(acc + 56, a7);
}

// The same for 8 dims (the same per-element arithmetic).
inline void accumulate8(float* acc, const float* p, const float* v, int64_t hdv, int32_t begin,
                        int32_t end, float correction) {
  __m256 a = _mm256_mul_ps(_mm256_loadu_ps(acc), _mm256_set1_ps(correction));
  for (int32_t j = begin; j < end; ++j) {
    a = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j), _mm256_loadu_ps(v + j * hdv), a);
  }
  _mm256_storeu_ps(acc, a);
}

void block_avx2(const AttentionTile& t, const float* k, const float* v, int32_t n_keys) {
  const int64_t hdk = t.head_dim_k;
  const int64_t hdv = t.head_dim_v;
  if (hdk % 8 != 0 || hdv % 8 != 0) {
    attention_scalar().block(t, k, v, n_keys);
    return;
  }
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int32_t n_full = n_keys / 8 * 8;
  // Rows are taken a few at a time and each phase (scores, then exp, then the values) runs for
  // all of them before the next: one row's phases form a dependency chain (scores -> max -> exp
  // -> rescale -> value sums) that left the FMA units idle when rows went one after another;
  // interleaving rows gives the core independent work. Each row's own operations and their order
  // are unchanged.
  constexpr int32_t kRowsAtOnce = 8;
  struct RowState {
    int32_t begin, end, vec_begin, vec_end;
    float new_max, correction, block_sum;
  };
  RowState st[kRowsAtOnce];
  for (int32_t r0 = 0; r0 < t.n_rows; r0 += kRowsAtOnce) {
    const int32_t n_here = std::min(kRowsAtOnce, t.n_rows - r0);
    // Scores: whole groups of 8 (aligned to the block start) that meet [begin, end), then the
    // keys past the last whole group one at a time.
    for (int32_t i = 0; i < n_here; ++i) {
      const int32_t r = r0 + i;
      RowState& rs = st[i];
      rs.begin = std::max(t.key_begin[r], 0);
      rs.end = std::min(t.key_end[r], n_keys);
      if (rs.begin >= rs.end) continue;
      const float* q = t.q + r * hdk;
      float* s = t.scores + static_cast<int64_t>(r) * n_keys;
      rs.vec_begin = rs.begin / 8 * 8;
      rs.vec_end = rs.vec_begin;
      __m256 vmax = _mm256_set1_ps(kNegInf);
      for (; rs.vec_end < rs.end && rs.vec_end < n_full; rs.vec_end += 8) {
        const __m256 s8 = scores8(q, k, hdk, rs.vec_end, rs.begin, rs.end);
        _mm256_storeu_ps(s + rs.vec_end, s8);
        vmax = _mm256_max_ps(vmax, s8);
      }
      float block_max = hmax(vmax);
      for (int32_t j = std::max(rs.vec_end, rs.begin); j < rs.end; ++j) {
        s[j] = score1(q, k + j * hdk, hdk);
        block_max = std::max(block_max, s[j]);
      }
      rs.new_max = std::max(t.max[r], block_max);
    }
    for (int32_t i = 0; i < n_here; ++i) {
      const int32_t r = r0 + i;
      RowState& rs = st[i];
      if (rs.begin >= rs.end) continue;
      float* s = t.scores + static_cast<int64_t>(r) * n_keys;
      rs.correction = exp1(t.max[r] - rs.new_max);
      const __m256 vnew = _mm256_set1_ps(rs.new_max);
      __m256 vsum = _mm256_setzero_ps();
      for (int32_t j = rs.vec_begin; j < rs.vec_end; j += 8) {
        const __m256 p = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), vnew));
        _mm256_storeu_ps(s + j, p);
        vsum = _mm256_add_ps(vsum, p);
      }
      rs.block_sum = hsum(vsum);
      for (int32_t j = std::max(rs.vec_end, rs.begin); j < rs.end; ++j) {
        s[j] = exp1(s[j] - rs.new_max);
        rs.block_sum += s[j];
      }
    }
    for (int32_t i = 0; i < n_here; ++i) {
      const int32_t r = r0 + i;
      const RowState& rs = st[i];
      if (rs.begin >= rs.end) continue;
      const float* s = t.scores + static_cast<int64_t>(r) * n_keys;
      float* acc = t.acc + r * hdv;
      int64_t e = 0;
      for (; e + 64 <= hdv; e += 64) {
        accumulate64(acc + e, s, v + e, hdv, rs.begin, rs.end, rs.correction);
      }
      for (; e < hdv; e += 8) accumulate8(acc + e, s, v + e, hdv, rs.begin, rs.end, rs.correction);
      t.sum[r] = t.sum[r] * rs.correction + rs.block_sum;
      t.max[r] = rs.new_max;
    }
  }
}

void exp_avx2(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] = exp1(x[i]);
}

void to_f16_avx2(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
  }
  for (; i < n; ++i) {
    y[i] = static_cast<uint16_t>(
        _mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(x[i]), _MM_FROUND_TO_NEAREST_INT), 0));
  }
}

void from_f16_avx2(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  }
  for (; i < n; ++i) y[i] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(x[i])));
}

}  // namespace

const AttentionTable& attention_avx2() {
  static const AttentionTable table{block_avx2, exp_avx2, to_f16_avx2, from_f16_avx2};
  return table;
}

}  // namespace llms::kernels::detail
