// kernels/attention_avx2: AVX2 path of the attention block step (contract in
// kernels/attention.h).
//
// Scores: keys are stored dim-major, so for up to 4 rows and 16 keys at a time the kernel runs
// one fma chain per row and 8 keys over the dims (a key vector loaded, widened from f16 if need
// be, once for all the rows; the query element broadcast), and the scores come out in lanes with
// no horizontal sum. Then per row: the block max over its visible keys (others masked to -inf),
// one vectorised exp, one rescale of the accumulator, and the values accumulated 64 (or 8) dims
// at a time (an f16 block's values widened once per call for every row). A row's arithmetic is
// fixed by its own key range and the block: which rows share a call, and how they are grouped,
// never changes its operations or their order.
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

void from_f16_avx2(const uint16_t* x, float* y, int64_t n);

inline float exp1(float x) { return _mm256_cvtss_f32(exp8(_mm256_set1_ps(x))); }

template <bool kF16>
inline __m256 load8(const void* base, int64_t i) {
  if constexpr (kF16) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + i)));
  } else {
    return _mm256_loadu_ps(static_cast<const float*>(base) + i);
  }
}

// Scores of NR rows (q rows of hdk floats) against NG groups of 8 keys from key j0: lane i of
// group g is row r's dot with key j0 + 8g + i, one fma chain over the dims in order. Written to
// s + r * s_stride + j0 + 8g.
template <bool kF16, int NR, int NG>
inline void scores_tile(const float* q, int64_t hdk, const void* k, int64_t k_stride, int32_t j0,
                        float* s, int64_t s_stride) {
  __m256 a[NR][NG];
  for (auto& row : a) {
    for (auto& x : row) x = _mm256_setzero_ps();
  }
  for (int64_t e = 0; e < hdk; ++e) {
    __m256 kv[NG];
    for (int g = 0; g < NG; ++g) kv[g] = load8<kF16>(k, e * k_stride + j0 + 8 * g);
    for (int r = 0; r < NR; ++r) {
      const __m256 qe = _mm256_broadcast_ss(q + r * hdk + e);
      for (int g = 0; g < NG; ++g) a[r][g] = _mm256_fmadd_ps(qe, kv[g], a[r][g]);
    }
  }
  for (int r = 0; r < NR; ++r) {
    for (int g = 0; g < NG; ++g) _mm256_storeu_ps(s + r * s_stride + j0 + 8 * g, a[r][g]);
  }
}

template <bool kF16, int NR>
inline void scores_rows(const float* q, int64_t hdk, const void* k, int64_t k_stride,
                        int32_t g_begin, int32_t g_end, float* s, int64_t s_stride) {
  int32_t g = g_begin;
  for (; g + 2 <= g_end; g += 2) scores_tile<kF16, NR, 2>(q, hdk, k, k_stride, 8 * g, s, s_stride);
  if (g < g_end) scores_tile<kF16, NR, 1>(q, hdk, k, k_stride, 8 * g, s, s_stride);
}

// Scores of n_rows rows (any number) for key groups [g_begin, g_end), 4 rows at a time.
template <bool kF16>
void scores(const float* q, int32_t n_rows, int64_t hdk, const void* k, int64_t k_stride,
            int32_t g_begin, int32_t g_end, float* s, int64_t s_stride) {
  int32_t r = 0;
  for (; r + 4 <= n_rows; r += 4) {
    scores_rows<kF16, 4>(q + r * hdk, hdk, k, k_stride, g_begin, g_end, s + r * s_stride, s_stride);
  }
  const float* qr = q + r * hdk;
  float* sr = s + r * s_stride;
  switch (n_rows - r) {
    case 3:
      scores_rows<kF16, 3>(qr, hdk, k, k_stride, g_begin, g_end, sr, s_stride);
      break;
    case 2:
      scores_rows<kF16, 2>(qr, hdk, k, k_stride, g_begin, g_end, sr, s_stride);
      break;
    case 1:
      scores_rows<kF16, 1>(qr, hdk, k, k_stride, g_begin, g_end, sr, s_stride);
      break;
    default:
      break;
  }
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

void block_avx2(const AttentionTile& t, const KvBlock& kv, int32_t n_keys) {
  const int64_t hdk = t.head_dim_k;
  const int64_t hdv = t.head_dim_v;
  const int64_t ks = kv.k_stride;
  if (ks % 8 != 0 || hdv % 8 != 0) {
    attention_scalar().block(t, kv, n_keys);
    return;
  }
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  // Rows are taken 8 at a time and each phase (scores, then max and exp, then the value sums)
  // runs for all of them before the next: one row's phases form a dependency chain that left
  // the FMA units idle when rows went one after another.
  constexpr int32_t kRowsAtOnce = 8;
  struct RowState {
    int32_t begin, end, vec_begin, vec_end;
    float new_max, correction, block_sum;
  };
  RowState st[kRowsAtOnce];
  const float* values = static_cast<const float*>(kv.v);
  if (kv.f16) {
    // Widen the values every row of the tile may use, once.
    int32_t lo = n_keys;
    int32_t hi = 0;
    for (int32_t r = 0; r < t.n_rows; ++r) {
      const int32_t b = std::max(t.key_begin[r], 0);
      const int32_t e = std::min(t.key_end[r], n_keys);
      if (b >= e) continue;
      lo = std::min(lo, b);
      hi = std::max(hi, e);
    }
    if (lo < hi) {
      from_f16_avx2(static_cast<const uint16_t*>(kv.v) + lo * hdv, t.values + lo * hdv,
                    (hi - lo) * hdv);
    }
    values = t.values;
  }
  for (int32_t r0 = 0; r0 < t.n_rows; r0 += kRowsAtOnce) {
    const int32_t n_here = std::min(kRowsAtOnce, t.n_rows - r0);
    // Key groups of 8 (aligned to the block start) that meet some row's [begin, end).
    int32_t g_begin = static_cast<int32_t>(ks / 8);
    int32_t g_end = 0;
    for (int32_t i = 0; i < n_here; ++i) {
      const int32_t r = r0 + i;
      RowState& rs = st[i];
      rs.begin = std::max(t.key_begin[r], 0);
      rs.end = std::min(t.key_end[r], n_keys);
      if (rs.begin >= rs.end) continue;
      rs.vec_begin = rs.begin / 8 * 8;
      rs.vec_end = (rs.end + 7) / 8 * 8;
      g_begin = std::min(g_begin, rs.vec_begin / 8);
      g_end = std::max(g_end, rs.vec_end / 8);
    }
    if (g_begin >= g_end) continue;
    float* s0 = t.scores + static_cast<int64_t>(r0) * ks;
    if (kv.f16) {
      scores<true>(t.q + r0 * hdk, n_here, hdk, kv.k, ks, g_begin, g_end, s0, ks);
    } else {
      scores<false>(t.q + r0 * hdk, n_here, hdk, kv.k, ks, g_begin, g_end, s0, ks);
    }
    for (int32_t i = 0; i < n_here; ++i) {
      const int32_t r = r0 + i;
      RowState& rs = st[i];
      if (rs.begin >= rs.end) continue;
      float* s = t.scores + static_cast<int64_t>(r) * ks;
      const __m256i vb = _mm256_set1_epi32(rs.begin);
      const __m256i ve = _mm256_set1_epi32(rs.end);
      __m256 vmax = _mm256_set1_ps(kNegInf);
      for (int32_t j = rs.vec_begin; j < rs.vec_end; j += 8) {
        const __m256i idx =
            _mm256_add_epi32(_mm256_set1_epi32(j), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        const __m256i inside =
            _mm256_andnot_si256(_mm256_cmpgt_epi32(vb, idx), _mm256_cmpgt_epi32(ve, idx));
        const __m256 s8 = _mm256_blendv_ps(_mm256_set1_ps(kNegInf), _mm256_loadu_ps(s + j),
                                           _mm256_castsi256_ps(inside));
        _mm256_storeu_ps(s + j, s8);
        vmax = _mm256_max_ps(vmax, s8);
      }
      rs.new_max = std::max(t.max[r], hmax(vmax));
    }
    for (int32_t i = 0; i < n_here; ++i) {
      const int32_t r = r0 + i;
      RowState& rs = st[i];
      if (rs.begin >= rs.end) continue;
      float* s = t.scores + static_cast<int64_t>(r) * ks;
      rs.correction = exp1(t.max[r] - rs.new_max);
      const __m256 vnew = _mm256_set1_ps(rs.new_max);
      __m256 vsum = _mm256_setzero_ps();
      for (int32_t j = rs.vec_begin; j < rs.vec_end; j += 8) {
        const __m256 p = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), vnew));  // masked: 0
        _mm256_storeu_ps(s + j, p);
        vsum = _mm256_add_ps(vsum, p);
      }
      rs.block_sum = hsum(vsum);
    }
    for (int32_t i = 0; i < n_here; ++i) {
      const int32_t r = r0 + i;
      const RowState& rs = st[i];
      if (rs.begin >= rs.end) continue;
      const float* s = t.scores + static_cast<int64_t>(r) * ks;
      float* acc = t.acc + r * hdv;
      int64_t e = 0;
      for (; e + 64 <= hdv; e += 64) {
        accumulate64(acc + e, s, values + e, hdv, rs.begin, rs.end, rs.correction);
      }
      for (; e < hdv; e += 8) {
        accumulate8(acc + e, s, values + e, hdv, rs.begin, rs.end, rs.correction);
      }
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
