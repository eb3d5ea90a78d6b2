// kernels/ops_avx2: AVX2 paths of the row ops (contract in kernels/ops.h).
//
// exp is Cephes' single-precision scheme (range reduction by ln 2 in two parts, a degree-5
// polynomial, scaling by 2^n through the exponent bits), accurate to ~2 ulp on [-87.3, 88];
// inputs below -87.3 give exactly 0, above 88 saturate at exp(88). Sigmoids use a true
// division. Row tails shorter than a vector go through a padded 8-float buffer so every
// element sees the same arithmetic.
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "ops_kernels.h"
#include "simd_avx2.h"

namespace llms::kernels::detail {
namespace {

using avx2::hsum;

inline __m256 exp256(__m256 x) {
  const __m256 too_small = _mm256_cmp_ps(x, _mm256_set1_ps(-87.33654f), _CMP_LT_OQ);
  x = _mm256_min_ps(x, _mm256_set1_ps(88.0f));
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.33654f));
  const __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i exponent =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  const __m256 result = _mm256_mul_ps(y, _mm256_castsi256_ps(exponent));
  return _mm256_andnot_ps(too_small, result);
}

// v / (1 + exp(-k))
inline __m256 times_sigmoid(__m256 v, __m256 k) {
  const __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), k));
  return _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

// Applies an 8-wide elementwise op f(a, b) -> out over n values, tail through a buffer.
template <class F>
inline void binary_map(const float* a, const float* b, float* out, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, f(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  const int64_t tail = n - i;
  if (tail > 0) {
    float ta[8] = {};
    float tb[8] = {};
    float to[8];
    std::memcpy(ta, a + i, static_cast<size_t>(tail) * sizeof(float));
    std::memcpy(tb, b + i, static_cast<size_t>(tail) * sizeof(float));
    _mm256_storeu_ps(to, f(_mm256_loadu_ps(ta), _mm256_loadu_ps(tb)));
    std::memcpy(out + i, to, static_cast<size_t>(tail) * sizeof(float));
  }
}

void rms_norm_avx2(const float* x, const float* weight, float* y, int64_t n, float eps) {
  if (n <= 0) return;
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      const __m256 v = _mm256_loadu_ps(x + i + 8 * k);
      acc[k] = _mm256_fmadd_ps(v, v, acc[k]);
    }
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    acc[0] = _mm256_fmadd_ps(v, v, acc[0]);
  }
  float sum = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum = std::fma(x[i], x[i], sum);
  const float inv = 1.0f / std::sqrt(sum / static_cast<float>(n) + eps);
  const __m256 vinv = _mm256_set1_ps(inv);
  int64_t j = 0;
  if (weight != nullptr) {
    for (; j + 8 <= n; j += 8) {
      const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + j), vinv);
      _mm256_storeu_ps(y + j, _mm256_mul_ps(v, _mm256_loadu_ps(weight + j)));
    }
    for (; j < n; ++j) y[j] = x[j] * inv * weight[j];
  } else {
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_loadu_ps(x + j), vinv));
    for (; j < n; ++j) y[j] = x[j] * inv;
  }
}

void softmax_avx2(float* x, int64_t n) {
  if (n <= 0) return;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  __m256 vmax = _mm256_set1_ps(neg_inf);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
  float max = neg_inf;
  {
    float lanes[8];
    _mm256_storeu_ps(lanes, vmax);
    for (float v : lanes) max = std::fmax(max, v);
    for (int64_t j = i; j < n; ++j) max = std::fmax(max, x[j]);
  }
  if (max == neg_inf) {
    for (int64_t j = 0; j < n; ++j) x[j] = 0.0f;
    return;
  }
  const __m256 vm = _mm256_set1_ps(max);
  // The sum is kept in double, like the reference: a float sum over a vocabulary-sized row
  // drifts by ~sqrt(n / 8) ulps, which scales every probability by the same wrong factor.
  __m256d vsum_lo = _mm256_setzero_pd();
  __m256d vsum_hi = _mm256_setzero_pd();
  i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(x + i, e);
    vsum_lo = _mm256_add_pd(vsum_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    vsum_hi = _mm256_add_pd(vsum_hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  double sum_lanes[4];
  _mm256_storeu_pd(sum_lanes, _mm256_add_pd(vsum_lo, vsum_hi));
  double sum = (sum_lanes[0] + sum_lanes[1]) + (sum_lanes[2] + sum_lanes[3]);
  if (i < n) {
    float t[8];
    for (int k = 0; k < 8; ++k) t[k] = i + k < n ? x[i + k] : neg_inf;
    const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(t), vm));
    _mm256_storeu_ps(t, e);
    for (int64_t k = 0; i + k < n; ++k) {
      x[i + k] = t[k];
      sum += t[k];
    }
  }
  const auto inv = static_cast<float>(1.0 / sum);
  const __m256 vinv = _mm256_set1_ps(inv);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(x + j, _mm256_mul_ps(_mm256_loadu_ps(x + j), vinv));
  for (; j < n; ++j) x[j] *= inv;
}

void silu_mul_avx2(const float* gate, const float* up, float* out, int64_t n) {
  binary_map(gate, up, out, n,
             [](__m256 g, __m256 u) { return _mm256_mul_ps(times_sigmoid(g, g), u); });
}

void gelu_tanh_mul_avx2(const float* gate, const float* up, float* out, int64_t n) {
  binary_map(gate, up, out, n, [](__m256 g, __m256 u) {
    // 0.5 * g * (1 + tanh(v)) = g * sigmoid(2v), v = sqrt(2/pi) * (g + 0.044715 g^3)
    const __m256 g3 = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
    const __m256 inner = _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), g3, g);
    const __m256 k = _mm256_mul_ps(_mm256_set1_ps(1.5957691216057308f), inner);
    return _mm256_mul_ps(times_sigmoid(g, k), u);
  });
}

void add_avx2(const float* a, const float* b, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  }
  for (; i < n; ++i) out[i] = a[i] + b[i];
}

void scale_avx2(float* x, float s, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
  for (; i < n; ++i) x[i] *= s;
}

float dot_avx2(const float* a, const float* b, int64_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      acc[k] =
          _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * k), _mm256_loadu_ps(b + i + 8 * k), acc[k]);
    }
  }
  for (; i + 8 <= n; i += 8)
    acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc[0]);
  float sum = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum = std::fma(a[i], b[i], sum);
  return sum;
}

void axpy_avx2(float a, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] = std::fma(a, x[i], y[i]);
}

void rope_apply_avx2(float* x, int64_t n_heads, int64_t head_dim, const float* cos,
                     const float* sin, RopeMode mode) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    int64_t i = 0;
    if (mode == RopeMode::kNormal) {
      const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
      for (; i + 4 <= half; i += 4) {
        const __m256 c =
            _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(cos + i)), dup);
        const __m256 s =
            _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(sin + i)), dup);
        const __m256 pair = _mm256_loadu_ps(v + 2 * i);
        const __m256 swapped = _mm256_permute_ps(pair, 0xB1);  // (x1, x0) per pair
        // even lanes: x0 c - x1 s; odd lanes: x1 c + x0 s
        _mm256_storeu_ps(v + 2 * i, _mm256_fmaddsub_ps(pair, c, _mm256_mul_ps(swapped, s)));
      }
      for (; i < half; ++i) {
        const float a = v[2 * i];
        const float b = v[2 * i + 1];
        v[2 * i] = std::fma(a, cos[i], -(b * sin[i]));
        v[2 * i + 1] = std::fma(b, cos[i], a * sin[i]);
      }
    } else {
      for (; i + 8 <= half; i += 8) {
        const __m256 c = _mm256_loadu_ps(cos + i);
        const __m256 s = _mm256_loadu_ps(sin + i);
        const __m256 lo = _mm256_loadu_ps(v + i);
        const __m256 hi = _mm256_loadu_ps(v + half + i);
        _mm256_storeu_ps(v + i, _mm256_fmsub_ps(lo, c, _mm256_mul_ps(hi, s)));
        _mm256_storeu_ps(v + half + i, _mm256_fmadd_ps(hi, c, _mm256_mul_ps(lo, s)));
      }
      for (; i < half; ++i) {
        const float a = v[i];
        const float b = v[i + half];
        v[i] = std::fma(a, cos[i], -(b * sin[i]));
        v[i + half] = std::fma(b, cos[i], a * sin[i]);
      }
    }
  }
}

}  // namespace

const OpTable& ops_avx2() {
  static const OpTable table{rms_norm_avx2,      softmax_avx2, silu_mul_avx2,
                             gelu_tanh_mul_avx2, add_avx2,     scale_avx2,
                             dot_avx2,           axpy_avx2,    rope_apply_avx2};
  return table;
}

}  // namespace llms::kernels::detail
