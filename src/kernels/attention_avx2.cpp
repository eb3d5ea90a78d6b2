// kernels/attention_avx2: AVX2 path of the attention block step (contract in
// kernels/attention.h).
//
// Scores: keys are stored dim-major, so for up to 4 rows and 16 keys at a time (for fp8, 5 to 8
// rows and 8 keys, see scores_wide) the kernel runs one fma chain per row and 8 keys over the
// dims (a key vector loaded, widened from f16 or 8 bits if need be, once for all the rows; the
// query element broadcast), and the scores come out in lanes with no horizontal sum. An 8-bit
// cache's per-slot scales are applied once per key: to the scores before the max, and to the
// softmax weights before the value sums. Then per row: the block max over its visible keys
// (others masked to -inf), one vectorised exp, one rescale of the accumulator, and the values
// accumulated 16 (or 8) dims at a time for up to 4 rows that see the same keys (the heads of one
// position; for fp8, 8 dims for up to 8 rows), each key's values loaded and widened once for
// them all. A row's arithmetic is fixed by its own key range and the block: which rows share a
// call, and how they are grouped, never changes its operations or their order.
//
// exp: x = n ln2 + r with n = round(x / ln2), |r| <= ln2 / 2 (ln2 split in two for an exact
// product), e^r by its Taylor series to r^7 (truncation below 6e-9 relative), scaled by 2^n
// through the exponent bits. Inputs below -87.33654 give exactly 0 (so a masked score of -inf
// weighs nothing), above 88.37 they saturate, NaN stays NaN.
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
  // MINPS/MAXPS return their second operand when either is NaN: x goes second, so a NaN score
  // stays NaN (and so does the row's output) instead of clamping to a finite e^88.
  x = _mm256_max_ps(_mm256_set1_ps(kExpMin), _mm256_min_ps(_mm256_set1_ps(kExpMax), x));
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

constexpr bool quantized(KvElement e) { return e == KvElement::kInt8 || e == KvElement::kFp8; }

// Whether a GQA group's 5-8 rows take one pass (scores_wide, accumulate_wide): fp8 only.
template <KvElement E>
constexpr bool kWideRows = E == KvElement::kFp8;

// Elements i..i+7 as stored, widened to f32 (before their slots' scales). An fp8 byte comes out
// as its E4M3 value times 2^-8: S.EEEE.MMM moved to S.0EEEE.MMM0000000 is an IEEE half with the
// same mantissa and an exponent biased by 15 instead of 7 (subnormals included), which F16C
// widens exactly; scale8 puts the 2^8 back. The move is three operations: the byte into the high
// half of a 16-bit lane, an arithmetic shift right by one (the sign lands on bits 15 and 14), and
// bit 14 cleared. E4M3's NaN bytes (0x7f, 0xff) would widen to +-480: quantize_kv_vector never
// writes them (a non-finite vector gets zero bytes and a NaN scale).
template <KvElement E>
inline __m256 load8(const void* base, int64_t i) {
  if constexpr (E == KvElement::kF16) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + i)));
  } else if constexpr (E == KvElement::kInt8) {
    const __m128i b =
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const int8_t*>(base) + i));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
  } else if constexpr (E == KvElement::kFp8) {
    const __m128i b =
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const uint8_t*>(base) + i));
    const __m128i high = _mm_unpacklo_epi8(_mm_setzero_si128(), b);
    const __m128i half =
        _mm_and_si128(_mm_srai_epi16(high, 1), _mm_set1_epi16(static_cast<int16_t>(0xbfff)));
    return _mm256_cvtph_ps(half);
  } else {
    return _mm256_loadu_ps(static_cast<const float*>(base) + i);
  }
}

// The scales of slots j..j+7 of an 8-bit block (bf16 -> f32 is a shift), times 2^8 for fp8 (see
// load8).
template <KvElement E>
inline __m256 scale8(const uint16_t* scales, int64_t j) {
  const __m256 s = _mm256_castsi256_ps(_mm256_slli_epi32(
      _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + j))), 16));
  if constexpr (E == KvElement::kFp8) return _mm256_mul_ps(s, _mm256_set1_ps(256.0f));
  return s;
}

// Scores of NR rows (q rows of hdk floats) against NG groups of 8 keys from key j0: lane i of
// group g is row r's dot with key j0 + 8g + i, one fma chain over the dims in order. Written to
// s + r * s_stride + j0 + 8g.
template <KvElement E, int NR, int NG>
inline void scores_tile(const float* q, int64_t hdk, const void* k, int64_t k_stride, int32_t j0,
                        float* s, int64_t s_stride) {
  __m256 a[NR][NG];
  for (auto& row : a) {
    for (auto& x : row) x = _mm256_setzero_ps();
  }
  for (int64_t e = 0; e < hdk; ++e) {
    __m256 kv[NG];
    for (int g = 0; g < NG; ++g) kv[g] = load8<E>(k, e * k_stride + j0 + 8 * g);
    for (int r = 0; r < NR; ++r) {
      const __m256 qe = _mm256_broadcast_ss(q + r * hdk + e);
      for (int g = 0; g < NG; ++g) a[r][g] = _mm256_fmadd_ps(qe, kv[g], a[r][g]);
    }
  }
  for (int r = 0; r < NR; ++r) {
    for (int g = 0; g < NG; ++g) _mm256_storeu_ps(s + r * s_stride + j0 + 8 * g, a[r][g]);
  }
}

template <KvElement E, int NR>
inline void scores_rows(const float* q, int64_t hdk, const void* k, int64_t k_stride,
                        int32_t g_begin, int32_t g_end, float* s, int64_t s_stride) {
  int32_t g = g_begin;
  for (; g + 2 <= g_end; g += 2) scores_tile<E, NR, 2>(q, hdk, k, k_stride, 8 * g, s, s_stride);
  if (g < g_end) scores_tile<E, NR, 1>(q, hdk, k, k_stride, 8 * g, s, s_stride);
}

// 5 to 8 rows in one pass, one group of 8 keys at a time (NR accumulators, one key vector and
// one broadcast fit the 16 registers): each key vector is loaded and widened once for all the
// rows, where a 4 + 3 split does it twice. This is the decode shape of GQA groups of 5 to 8
// query heads. Taken for fp8 only, whose widening is the costliest: at 32 sequences x 2k
// context on Qwen2.5 0.5B (7 heads per KV head, Zen 4) it made fp8 attention 1.28x faster but
// f16 ~5 % and int8 ~2 % slower (one broadcast per FMA instead of one per two).
template <KvElement E, int NR>
inline void scores_wide(const float* q, int64_t hdk, const void* k, int64_t k_stride,
                        int32_t g_begin, int32_t g_end, float* s, int64_t s_stride) {
  for (int32_t g = g_begin; g < g_end; ++g) {
    scores_tile<E, NR, 1>(q, hdk, k, k_stride, 8 * g, s, s_stride);
  }
}

// Raw scores (before the keys' scales) of n_rows rows (any number) for key groups
// [g_begin, g_end): for fp8, 5 to 8 rows in one pass; else 4 rows at a time.
template <KvElement E>
void scores(const float* q, int32_t n_rows, int64_t hdk, const void* k, int64_t k_stride,
            int32_t g_begin, int32_t g_end, float* s, int64_t s_stride) {
  switch (kWideRows<E> ? n_rows : 0) {
    case 5:
      return scores_wide<E, 5>(q, hdk, k, k_stride, g_begin, g_end, s, s_stride);
    case 6:
      return scores_wide<E, 6>(q, hdk, k, k_stride, g_begin, g_end, s, s_stride);
    case 7:
      return scores_wide<E, 7>(q, hdk, k, k_stride, g_begin, g_end, s, s_stride);
    case 8:
      return scores_wide<E, 8>(q, hdk, k, k_stride, g_begin, g_end, s, s_stride);
    default:
      break;
  }
  int32_t r = 0;
  for (; r + 4 <= n_rows; r += 4) {
    scores_rows<E, 4>(q + r * hdk, hdk, k, k_stride, g_begin, g_end, s + r * s_stride, s_stride);
  }
  const float* qr = q + r * hdk;
  float* sr = s + r * s_stride;
  switch (n_rows - r) {
    case 3:
      scores_rows<E, 3>(qr, hdk, k, k_stride, g_begin, g_end, sr, s_stride);
      break;
    case 2:
      scores_rows<E, 2>(qr, hdk, k, k_stride, g_begin, g_end, sr, s_stride);
      break;
    case 1:
      scores_rows<E, 1>(qr, hdk, k, k_stride, g_begin, g_end, sr, s_stride);
      break;
    default:
      break;
  }
}

// The values of NR rows that see the same keys [begin, end): per row and element, acc * correction
// and then one fma per key in key order (the same arithmetic for a row alone or among others),
// 16 dims at a time (8 for a last odd 8), each key's values loaded, and widened from f16 if need
// be, once for all NR rows.
template <KvElement E, int NR, int NV>
inline void accumulate_dims(float* const* acc, const float* const* p, const float* correction,
                            const void* v, int64_t hdv, int64_t e, int32_t begin, int32_t end) {
  __m256 a[NR][NV];
  for (int r = 0; r < NR; ++r) {
    const __m256 c = _mm256_set1_ps(correction[r]);
    for (int u = 0; u < NV; ++u) a[r][u] = _mm256_mul_ps(_mm256_loadu_ps(acc[r] + e + 8 * u), c);
  }
  for (int32_t j = begin; j < end; ++j) {
    __m256 vj[NV];
    for (int u = 0; u < NV; ++u) vj[u] = load8<E>(v, j * hdv + e + 8 * u);
    for (int r = 0; r < NR; ++r) {
      const __m256 pj = _mm256_broadcast_ss(p[r] + j);
      for (int u = 0; u < NV; ++u) a[r][u] = _mm256_fmadd_ps(pj, vj[u], a[r][u]);
    }
  }
  for (int r = 0; r < NR; ++r) {
    for (int u = 0; u < NV; ++u) _mm256_storeu_ps(acc[r] + e + 8 * u, a[r][u]);
  }
}

template <KvElement E, int NR>
inline void accumulate_rows(float* const* acc, const float* const* p, const float* correction,
                            const void* v, int64_t hdv, int32_t begin, int32_t end) {
  int64_t e = 0;
  for (; e + 16 <= hdv; e += 16) {
    accumulate_dims<E, NR, 2>(acc, p, correction, v, hdv, e, begin, end);
  }
  if (e < hdv) accumulate_dims<E, NR, 1>(acc, p, correction, v, hdv, e, begin, end);
}

// 5 to 8 rows (fp8, see scores_wide): 8 dims at a time (NR accumulators, one value vector and
// one broadcast fit the registers), each key's values widened once for all the rows.
template <KvElement E, int NR>
inline void accumulate_wide(float* const* acc, const float* const* p, const float* correction,
                            const void* v, int64_t hdv, int32_t begin, int32_t end) {
  for (int64_t e = 0; e < hdv; e += 8) {
    accumulate_dims<E, NR, 1>(acc, p, correction, v, hdv, e, begin, end);
  }
}

template <KvElement E>
void accumulate(int nr, float* const* acc, const float* const* p, const float* correction,
                const void* v, int64_t hdv, int32_t begin, int32_t end) {
  if constexpr (kWideRows<E>) {
    switch (nr) {
      case 8:
        return accumulate_wide<E, 8>(acc, p, correction, v, hdv, begin, end);
      case 7:
        return accumulate_wide<E, 7>(acc, p, correction, v, hdv, begin, end);
      case 6:
        return accumulate_wide<E, 6>(acc, p, correction, v, hdv, begin, end);
      case 5:
        return accumulate_wide<E, 5>(acc, p, correction, v, hdv, begin, end);
      default:
        break;
    }
  }
  switch (nr) {
    case 4:
      accumulate_rows<E, 4>(acc, p, correction, v, hdv, begin, end);
      break;
    case 3:
      accumulate_rows<E, 3>(acc, p, correction, v, hdv, begin, end);
      break;
    case 2:
      accumulate_rows<E, 2>(acc, p, correction, v, hdv, begin, end);
      break;
    default:
      accumulate_rows<E, 1>(acc, p, correction, v, hdv, begin, end);
      break;
  }
}

template <KvElement E>
void block_typed(const AttentionTile& t, const KvBlock& kv, int32_t n_keys) {
  const int64_t hdk = t.head_dim_k;
  const int64_t hdv = t.head_dim_v;
  const int64_t ks = kv.k_stride;
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
    scores<E>(t.q + r0 * hdk, n_here, hdk, kv.k, ks, g_begin, g_end, s0, ks);
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
        __m256 raw = _mm256_loadu_ps(s + j);
        if constexpr (quantized(E)) raw = _mm256_mul_ps(raw, scale8<E>(kv.k_scale, j));
        const __m256 s8 =
            _mm256_blendv_ps(_mm256_set1_ps(kNegInf), raw, _mm256_castsi256_ps(inside));
        _mm256_storeu_ps(s + j, s8);
        vmax = _mm256_max_ps(s8, vmax);  // a NaN score is skipped, as std::max does
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
        vsum = _mm256_add_ps(vsum, p);
        // The values' scales go with the weights: sum_j p_j (scale_j v_j) = sum_j (p_j scale_j)
        // v_j, one multiply per key instead of one per element.
        if constexpr (quantized(E)) {
          _mm256_storeu_ps(s + j, _mm256_mul_ps(p, scale8<E>(kv.v_scale, j)));
        } else {
          _mm256_storeu_ps(s + j, p);
        }
      }
      rs.block_sum = hsum(vsum);
    }
    // Values: runs of consecutive rows with the same key range (the heads of one position) in
    // balanced chunks of up to 4 (7 rows: 4 + 3); for fp8, runs of up to 8 in one chunk.
    for (int32_t i = 0; i < n_here;) {
      const RowState& first = st[i];
      int32_t run = 1;
      while (i + run < n_here && st[i + run].begin == first.begin && st[i + run].end == first.end) {
        ++run;
      }
      if (first.begin < first.end) {
        const int32_t n_chunks = kWideRows<E> && run <= 8 ? 1 : (run + 3) / 4;
        for (int32_t c = 0, done = 0; c < n_chunks; ++c) {
          const int32_t nr = (run - done + (n_chunks - c) - 1) / (n_chunks - c);
          float* acc[8];
          const float* p[8];
          float correction[8];
          for (int32_t k = 0; k < nr; ++k) {
            const int32_t r = r0 + i + done + k;
            acc[k] = t.acc + r * hdv;
            p[k] = t.scores + static_cast<int64_t>(r) * ks;
            correction[k] = st[i + done + k].correction;
          }
          accumulate<E>(nr, acc, p, correction, kv.v, hdv, first.begin, first.end);
          done += nr;
        }
        for (int32_t k = 0; k < run; ++k) {
          const int32_t r = r0 + i + k;
          const RowState& rs = st[i + k];
          t.sum[r] = t.sum[r] * rs.correction + rs.block_sum;
          t.max[r] = rs.new_max;
        }
      }
      i += run;
    }
  }
}

void block_avx2(const AttentionTile& t, const KvBlock& kv, int32_t n_keys) {
  if (kv.k_stride % 8 != 0 || t.head_dim_v % 8 != 0) {
    attention_scalar().block(t, kv, n_keys);
    return;
  }
  switch (kv.element) {
    case KvElement::kF32:
      block_typed<KvElement::kF32>(t, kv, n_keys);
      break;
    case KvElement::kF16:
      block_typed<KvElement::kF16>(t, kv, n_keys);
      break;
    case KvElement::kInt8:
      block_typed<KvElement::kInt8>(t, kv, n_keys);
      break;
    case KvElement::kFp8:
      block_typed<KvElement::kFp8>(t, kv, n_keys);
      break;
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

}  // namespace

const AttentionTable& attention_avx2() {
  static const AttentionTable table{block_avx2, exp_avx2, to_f16_avx2};
  return table;
}

}  // namespace llms::kernels::detail
