// quant/k_quantize: reference quantizers of the K-quant super-blocks (contract in k_blocks.h).
//
// Two steps per super-block. (1) Each sub-block gets its own float scale (and, for the affine
// formats, an offset) from a small grid search over the scale with a least-squares refit of
// every candidate, keeping the one with the smallest squared error. (2) Those scales are
// quantized against one f16 super-block scale (the layout's 4-, 6- or 8-bit fields), and every
// value is rounded against the scale it will really be decoded with, so the stored bits are the
// best choice for the stored scales. Deterministic; no data-dependent allocation.
#include <algorithm>
#include <cmath>

#include "block_io.h"
#include "k_layout.h"
#include "quant/blocks.h"
#include "quant/float_convert.h"
#include "quant/k_blocks.h"

namespace llms::quant {

using detail::round_even_clamped;
using detail::store_block;

namespace {

constexpr int kGridSteps = 10;  // candidate scales tried on each side of the plain range fit

// x ~= scale * q - offset with q in [0, nmax]; scale >= 0, offset >= 0 (layouts store both
// unsigned, so the represented range always contains 0).
struct AffineFit {
  float scale = 0.0f;
  float offset = 0.0f;
};

float affine_error(const float* x, int n, int nmax, AffineFit fit) {
  const float inverse = fit.scale > 0.0f ? 1.0f / fit.scale : 0.0f;
  float error = 0.0f;
  for (int j = 0; j < n; ++j) {
    const int q = round_even_clamped((x[j] + fit.offset) * inverse, 0, nmax);
    const float diff = fit.scale * static_cast<float>(q) - fit.offset - x[j];
    error += diff * diff;
  }
  return error;
}

// Least-squares (scale, offset) for fixed levels q; offset clamped at 0.
bool refit_affine(const float* x, const int* q, int n, AffineFit* fit) {
  double sum_q = 0;
  double sum_qq = 0;
  double sum_x = 0;
  double sum_qx = 0;
  for (int j = 0; j < n; ++j) {
    sum_q += q[j];
    sum_qq += static_cast<double>(q[j]) * q[j];
    sum_x += x[j];
    sum_qx += q[j] * static_cast<double>(x[j]);
  }
  const double det = n * sum_qq - sum_q * sum_q;
  if (!(det > 0.0)) return false;
  double scale = (n * sum_qx - sum_q * sum_x) / det;
  double bias = (sum_qq * sum_x - sum_q * sum_qx) / det;  // x ~= scale * q + bias
  if (bias > 0.0) {  // the offset must stay >= 0: refit the scale alone with bias 0
    bias = 0.0;
    scale = sum_qx / sum_qq;
  }
  if (!(scale > 0.0)) return false;
  fit->scale = static_cast<float>(scale);
  fit->offset = static_cast<float>(-bias);
  return true;
}

AffineFit fit_affine(const float* x, int n, int nmax) {
  float min = 0.0f;  // 0 belongs to the range, see AffineFit
  float max = 0.0f;
  for (int j = 0; j < n; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
  AffineFit best{0.0f, -min};
  if (!(max > min)) return best;  // all zero (or non-finite input)
  best.scale = (max - min) / static_cast<float>(nmax);
  float best_error = affine_error(x, n, nmax, best);
  int q[kQK];
  for (int step = -kGridSteps; step <= kGridSteps; ++step) {
    const float inverse =
        (static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / (max - min);
    for (int j = 0; j < n; ++j) q[j] = round_even_clamped((x[j] - min) * inverse, 0, nmax);
    AffineFit candidate;
    if (!refit_affine(x, q, n, &candidate)) continue;
    const float error = affine_error(x, n, nmax, candidate);
    if (error < best_error) {
      best_error = error;
      best = candidate;
    }
  }
  return best;
}

// x ~= scale * q with q in [-n_neg, n_neg - 1]; the scale may be negative so that the value of
// largest magnitude can use the extra negative level.
float symmetric_error(const float* x, int n, int n_neg, float scale) {
  const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
  float error = 0.0f;
  for (int j = 0; j < n; ++j) {
    const int q = round_even_clamped(x[j] * inverse, -n_neg, n_neg - 1);
    const float diff = scale * static_cast<float>(q) - x[j];
    error += diff * diff;
  }
  return error;
}

float fit_symmetric(const float* x, int n, int n_neg) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  if (!(amax > 0.0f) || !std::isfinite(amax)) return 0.0f;
  float best = max / static_cast<float>(-n_neg);
  float best_error = symmetric_error(x, n, n_neg, best);
  for (int step = -kGridSteps; step <= kGridSteps; ++step) {
    const float inverse = -(static_cast<float>(n_neg) + 0.1f * static_cast<float>(step)) / max;
    double sum_qx = 0;
    double sum_qq = 0;
    for (int j = 0; j < n; ++j) {
      const int q = round_even_clamped(x[j] * inverse, -n_neg, n_neg - 1);
      sum_qx += q * static_cast<double>(x[j]);
      sum_qq += static_cast<double>(q) * q;
    }
    if (!(sum_qq > 0.0)) continue;
    const auto candidate = static_cast<float>(sum_qx / sum_qq);
    const float error = symmetric_error(x, n, n_neg, candidate);
    if (error < best_error) {
      best_error = error;
      best = candidate;
    }
  }
  return best;
}

// Quantizes unsigned sub-block factors (scales or offsets) against one f16 super-block step
// so that the largest lands on max_field; returns the step's f16 bits and writes the fields,
// each rounded against the step as it will be decoded (after f16 rounding).
uint16_t quantize_factors(const float* factors, int n, int max_field, uint8_t* fields) {
  float max = 0.0f;
  for (int j = 0; j < n; ++j) max = std::max(max, factors[j]);
  const uint16_t bits = fp32_to_fp16(max / static_cast<float>(max_field));
  const float step = fp16_to_fp32(bits);
  const float inverse = step > 0.0f && std::isfinite(step) ? 1.0f / step : 0.0f;
  for (int j = 0; j < n; ++j) {
    fields[j] = static_cast<uint8_t>(round_even_clamped(factors[j] * inverse, 0, max_field));
  }
  return bits;
}

// As quantize_factors for signed factors and signed fields in [-max_field - 1, max_field].
uint16_t quantize_signed_factors(const float* factors, int n, int max_field, int* fields) {
  float max = 0.0f;
  for (int j = 0; j < n; ++j) max = std::max(max, std::fabs(factors[j]));
  const uint16_t bits = fp32_to_fp16(max / static_cast<float>(max_field));
  const float step = fp16_to_fp32(bits);
  const float inverse = step > 0.0f && std::isfinite(step) ? 1.0f / step : 0.0f;
  for (int j = 0; j < n; ++j) {
    fields[j] = round_even_clamped(factors[j] * inverse, -max_field - 1, max_field);
  }
  return bits;
}

// The affine super-blocks Q2_K, Q4_K, Q5_K: n_sub sub-blocks of sub_size values with levels
// [0, nmax] and scale/min fields in [0, max_field]. Writes d/dmin bits, the fields and the
// levels q[256].
struct AffineSuperBlock {
  uint16_t d = 0;
  uint16_t dmin = 0;
  uint8_t scale[16] = {};
  uint8_t min[16] = {};
  int q[kQK_K] = {};
};

void quantize_affine_super(const float* x, int n_sub, int nmax, int max_field,
                           AffineSuperBlock* out) {
  const int sub_size = kQK_K / n_sub;
  float scales[16];
  float offsets[16];
  for (int s = 0; s < n_sub; ++s) {
    const AffineFit fit = fit_affine(x + s * sub_size, sub_size, nmax);
    scales[s] = fit.scale;
    offsets[s] = fit.offset;
  }
  out->d = quantize_factors(scales, n_sub, max_field, out->scale);
  out->dmin = quantize_factors(offsets, n_sub, max_field, out->min);
  const float d = fp16_to_fp32(out->d);
  const float dmin = fp16_to_fp32(out->dmin);
  for (int s = 0; s < n_sub; ++s) {
    const float dl = d * static_cast<float>(out->scale[s]);
    const float ml = dmin * static_cast<float>(out->min[s]);
    const float inverse = dl > 0.0f && std::isfinite(dl) ? 1.0f / dl : 0.0f;
    for (int e = s * sub_size; e < (s + 1) * sub_size; ++e) {
      out->q[e] = round_even_clamped((x[e] + ml) * inverse, 0, nmax);
    }
  }
}

// The symmetric super-blocks Q3_K, Q6_K: 16 sub-blocks of 16 with levels [-n_neg, n_neg - 1]
// and signed scale fields in [-max_field - 1, max_field]. q[] holds the biased level q + n_neg.
struct SymmetricSuperBlock {
  uint16_t d = 0;
  int scale[16] = {};
  int q[kQK_K] = {};
};

void quantize_symmetric_super(const float* x, int n_neg, int max_field, SymmetricSuperBlock* out) {
  constexpr int kSub = 16;
  float scales[kSub];
  for (int s = 0; s < kSub; ++s) scales[s] = fit_symmetric(x + s * 16, 16, n_neg);
  out->d = quantize_signed_factors(scales, kSub, max_field, out->scale);
  const float d = fp16_to_fp32(out->d);
  for (int s = 0; s < kSub; ++s) {
    const float dl = d * static_cast<float>(out->scale[s]);
    const float inverse = dl != 0.0f && std::isfinite(dl) ? 1.0f / dl : 0.0f;
    for (int e = s * 16; e < s * 16 + 16; ++e) {
      out->q[e] = round_even_clamped(x[e] * inverse, -n_neg, n_neg - 1) + n_neg;
    }
  }
}

}  // namespace

void quantize_q2_K(const float* src, void* dst, int64_t n_blocks) {
  AffineSuperBlock sb;
  for (int64_t i = 0; i < n_blocks; ++i) {
    quantize_affine_super(src + i * kQK_K, 16, 3, 15, &sb);
    BlockQ2_K block{};
    block.d = sb.d;
    block.dmin = sb.dmin;
    for (int s = 0; s < 16; ++s)
      block.scales[s] = static_cast<uint8_t>(sb.scale[s] | sb.min[s] << 4);
    for (int e = 0; e < kQK_K; ++e) detail::set_crumb(block.qs, e, sb.q[e]);
    store_block(dst, i, block);
  }
}

void quantize_q3_K(const float* src, void* dst, int64_t n_blocks) {
  SymmetricSuperBlock sb;
  for (int64_t i = 0; i < n_blocks; ++i) {
    quantize_symmetric_super(src + i * kQK_K, 4, 31, &sb);
    BlockQ3_K block{};
    block.d = sb.d;
    for (int s = 0; s < 16; ++s) detail::set_q3_scale(block.scales, s, sb.scale[s]);
    for (int e = 0; e < kQK_K; ++e) {
      detail::set_crumb(block.qs, e, sb.q[e] & 3);
      detail::set_bit(block.hmask, e, sb.q[e] >> 2);
    }
    store_block(dst, i, block);
  }
}

void quantize_q4_K(const float* src, void* dst, int64_t n_blocks) {
  AffineSuperBlock sb;
  for (int64_t i = 0; i < n_blocks; ++i) {
    quantize_affine_super(src + i * kQK_K, 8, 15, 63, &sb);
    BlockQ4_K block{};
    block.d = sb.d;
    block.dmin = sb.dmin;
    k_pack_scale_min(sb.scale, sb.min, block.scales);
    for (int e = 0; e < kQK_K; ++e) detail::set_k4(block.qs, e, sb.q[e]);
    store_block(dst, i, block);
  }
}

void quantize_q5_K(const float* src, void* dst, int64_t n_blocks) {
  AffineSuperBlock sb;
  for (int64_t i = 0; i < n_blocks; ++i) {
    quantize_affine_super(src + i * kQK_K, 8, 31, 63, &sb);
    BlockQ5_K block{};
    block.d = sb.d;
    block.dmin = sb.dmin;
    k_pack_scale_min(sb.scale, sb.min, block.scales);
    for (int e = 0; e < kQK_K; ++e) {
      detail::set_k4(block.qs, e, sb.q[e]);
      detail::set_bit(block.qh, e, sb.q[e] >> 4);
    }
    store_block(dst, i, block);
  }
}

void quantize_q6_K(const float* src, void* dst, int64_t n_blocks) {
  SymmetricSuperBlock sb;
  for (int64_t i = 0; i < n_blocks; ++i) {
    quantize_symmetric_super(src + i * kQK_K, 32, 127, &sb);
    BlockQ6_K block{};
    block.d = sb.d;
    // Fields are in [-128, 127]; with max_field 127 the extreme lands on +-127.
    for (int s = 0; s < 16; ++s) block.scales[s] = static_cast<int8_t>(sb.scale[s]);
    for (int e = 0; e < kQK_K; ++e) {
      detail::set_k6_low(block.ql, e, sb.q[e]);
      detail::set_crumb(block.qh, e, sb.q[e] >> 4);
    }
    store_block(dst, i, block);
  }
}

void quantize_q8_K(const float* src, void* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    const float* x = src + i * kQK_K;
    float amax = 0.0f;
    float max = 0.0f;
    for (int e = 0; e < kQK_K; ++e) {
      if (amax < std::fabs(x[e])) {
        amax = std::fabs(x[e]);
        max = x[e];
      }
    }
    BlockQ8_K block{};
    if (amax > 0.0f && std::isfinite(amax)) {
      const float inverse = -127.0f / max;
      for (int e = 0; e < kQK_K; ++e) {
        block.qs[e] = static_cast<int8_t>(round_even_clamped(inverse * x[e], -128, 127));
      }
      block.d = 1.0f / inverse;
    }
    for (int s = 0; s < kQK_K / 16; ++s) {
      int sum = 0;
      for (int e = 16 * s; e < 16 * s + 16; ++e) sum += block.qs[e];
      block.bsums[s] = static_cast<int16_t>(sum);
    }
    store_block(dst, i, block);
  }
}

}  // namespace llms::quant
