// kernels/act_quant_avx2: AVX2 activation quantizers, byte-identical to the scalar ones for
// finite input (same products x * (1/d), and vcvtps2dq rounds half to even as nearbyint does
// in the default rounding mode).
#include <immintrin.h>

#include <cstring>

#include "matmul_kernels.h"

namespace llms::kernels::detail {
namespace {

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

// Rounds 32 floats (x * scale) to int8 in element order; values past int8 saturate.
inline __m256i round_pack32(const float* x, __m256 scale) {
  const __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), scale));
  const __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), scale));
  const __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), scale));
  const __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), scale));
  // packs work per 128-bit lane: the dwords come out as 0-3 of i0,i1,i2,i3 then 4-7 of each.
  const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
  return _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Sums of bytes 0-15 and 16-31 of q (as signed), in lanes 0 and 4.
inline __m256i half_sums(__m256i q) {
  const __m256i pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q);
  __m256i quads = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
  quads = _mm256_hadd_epi32(quads, quads);
  return _mm256_hadd_epi32(quads, quads);
}

}  // namespace

void quantize_act_q8_avx2(const float* x, int64_t n, ActQ8* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    __m256 amax = abs_ps(_mm256_loadu_ps(xb));
    for (int j = 8; j < 32; j += 8) amax = _mm256_max_ps(amax, abs_ps(_mm256_loadu_ps(xb + j)));
    const float d = hmax(amax) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    __m256i q = round_pack32(xb, _mm256_set1_ps(id));
    // Clamp to [-127, 127]: only non-finite input reaches -128, keep it symmetric anyway.
    q = _mm256_max_epi8(q, _mm256_set1_epi8(-127));
    const __m256i sums = half_sums(q);
    ActQ8& block = out[b];
    block.d = d;
    block.sum = _mm256_extract_epi32(sums, 0) + _mm256_extract_epi32(sums, 4);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(block.qs), q);
  }
}

void quantize_act_q8k_avx2(const float* x, int64_t n, ActQ8K* out) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const float* xb = x + b * 256;
    __m256 amax_v = _mm256_setzero_ps();
    for (int j = 0; j < 256; j += 8)
      amax_v = _mm256_max_ps(amax_v, abs_ps(_mm256_loadu_ps(xb + j)));
    const float amax = hmax(amax_v);
    ActQ8K& block = out[b];
    if (!(amax > 0.0f) || !(amax <= 3.402823466e38f)) {
      std::memset(&block, 0, sizeof(block));
      continue;
    }
    // The sign of the first element of largest magnitude decides the sign of d.
    float max = amax;
    const __m256 target = _mm256_set1_ps(amax);
    for (int j = 0; j < 256; j += 8) {
      const int mask =
          _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(xb + j)), target, _CMP_EQ_OQ));
      if (mask != 0) {
        max = xb[j + __builtin_ctz(static_cast<unsigned>(mask))];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m256 scale = _mm256_set1_ps(iscale);
    for (int j = 0; j < 256; j += 32) {
      const __m256i q = round_pack32(xb + j, scale);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(block.qs + j), q);
      const __m256i sums = half_sums(q);
      block.bsums[j / 16] = static_cast<int16_t>(_mm256_extract_epi32(sums, 0));
      block.bsums[j / 16 + 1] = static_cast<int16_t>(_mm256_extract_epi32(sums, 4));
    }
    block.d = 1.0f / iscale;
  }
}

}  // namespace llms::kernels::detail
