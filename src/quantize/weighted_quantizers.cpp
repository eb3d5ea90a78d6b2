// quantize/weighted_quantizers: see weighted_quantizers.h for the method. Every block is built
// in a stack buffer, checked against round-to-nearest's block of the same values under the same
// weights, and the better one is copied out.
#include "quantize/weighted_quantizers.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "quant/blocks.h"
#include "quant/float_convert.h"
#include "quant/k_blocks.h"
#include "quant/quant.h"
#include "util/error.h"

namespace llms::quantize {

namespace {

using gguf::GgmlType;
using quant::fp16_to_fp32;
using quant::fp32_to_fp16;
using quant::kQK;
using quant::kQK_K;

// Grid of the scale searches: inverse scales (q_max + kGridStep * i) / range for |i| <= kGridSteps,
// i.e. from one level short of the range fit to one level past it.
constexpr int kGridSteps = 10;
constexpr float kGridStep = 0.1f;
constexpr int kRefits = 4;              // refits of the best symmetric scale while they help
constexpr size_t kMaxBlockBytes = 256;  // > sizeof of every block below

// The level nearest to v in [lo, hi]; NaN gives lo (input is hostile, behaviour stays defined).
int nearest_level(float v, int lo, int hi) {
  if (!(v >= static_cast<float>(lo))) return lo;
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int>(std::nearbyint(v));
}

float stored_f16(float v) { return fp16_to_fp32(fp32_to_fp16(v)); }

// ---- symmetric blocks: x ~= scale * L, L in [-n_neg, n_pos] ----

struct SymmetricLevels {
  int n_neg;
  int n_pos;
};

// The weighted error of x ~= scale * L with each L the level nearest x / scale (the best levels
// for this scale), written to L.
double symmetric_error(const float* x, const float* w, int n, SymmetricLevels lv, float scale,
                       int* L) {
  const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
  double error = 0.0;
  for (int j = 0; j < n; ++j) {
    L[j] = nearest_level(x[j] * inverse, -lv.n_neg, lv.n_pos);
    const double diff = static_cast<double>(scale * static_cast<float>(L[j])) - x[j];
    error += w[j] * diff * diff;
  }
  return error;
}

// The weighted least-squares scale of fixed levels, or 0 when they carry no weight.
float refit_symmetric(const float* x, const float* w, const int* L, int n) {
  double sum_wlx = 0.0;
  double sum_wll = 0.0;
  for (int j = 0; j < n; ++j) {
    sum_wlx += static_cast<double>(w[j]) * L[j] * x[j];
    sum_wll += static_cast<double>(w[j]) * L[j] * L[j];
  }
  return sum_wll > 0.0 ? static_cast<float>(sum_wlx / sum_wll) : 0.0f;
}

// The scale (after `store`, the rounding it will be kept with) minimising the weighted error,
// and its levels in L. The value of largest magnitude maps to -n_neg at the grid's centre, so
// the asymmetric level range's extra negative level is used.
template <class Store>
float search_symmetric(const float* x, const float* w, int n, SymmetricLevels lv, Store store,
                       int* L) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  if (!(amax > 0.0f) || !std::isfinite(amax)) {
    std::fill(L, L + n, 0);
    return 0.0f;
  }
  int trial[kQK_K];
  float best = store(max / static_cast<float>(-lv.n_neg));
  double best_error = symmetric_error(x, w, n, lv, best, L);
  for (int step = -kGridSteps; step <= kGridSteps; ++step) {
    const float inverse =
        -(static_cast<float>(lv.n_neg) + kGridStep * static_cast<float>(step)) / max;
    for (int j = 0; j < n; ++j) trial[j] = nearest_level(x[j] * inverse, -lv.n_neg, lv.n_pos);
    const float scale = store(refit_symmetric(x, w, trial, n));
    if (scale == 0.0f) continue;
    const double error = symmetric_error(x, w, n, lv, scale, trial);
    if (error < best_error) {
      best_error = error;
      best = scale;
      std::copy_n(trial, n, L);
    }
  }
  // Re-rounding against the stored scale may have changed levels: refit to them while it helps.
  for (int i = 0; i < kRefits; ++i) {
    const float scale = store(refit_symmetric(x, w, L, n));
    if (scale == 0.0f || scale == best) break;
    const double error = symmetric_error(x, w, n, lv, scale, trial);
    if (!(error < best_error)) break;
    best_error = error;
    best = scale;
    std::copy_n(trial, n, L);
  }
  return best;
}

// ---- affine sub-blocks: x ~= scale * L - offset, L in [0, n_max], scale >= 0, offset >= 0 ----

struct AffineFit {
  float scale = 0.0f;
  float offset = 0.0f;
};

AffineFit search_affine(const float* x, const float* w, int n, int n_max) {
  float min = 0.0f;  // 0 stays inside the range: the layouts store scale and offset unsigned
  float max = x[0];
  double sum_w = 0.0, sum_wx = 0.0, sum_wxx = 0.0;
  for (int j = 0; j < n; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
    sum_w += w[j];
    sum_wx += static_cast<double>(w[j]) * x[j];
    sum_wxx += static_cast<double>(w[j]) * x[j] * x[j];
  }
  AffineFit best{0.0f, -min};
  if (!(max > min) || !std::isfinite(max - min)) return best;  // constant (or non-finite) input
  const float range = max - min;
  best.scale = range / static_cast<float>(n_max);
  double best_error = 0.0;
  for (int j = 0; j < n; ++j) {
    const int level = nearest_level((x[j] - min) / best.scale, 0, n_max);
    const double diff = static_cast<double>(best.scale * static_cast<float>(level) + min) - x[j];
    best_error += w[j] * diff * diff;
  }
  for (int step = -kGridSteps; step <= kGridSteps; ++step) {
    const float inverse =
        (static_cast<float>(n_max) + kGridStep * static_cast<float>(step)) / range;
    double sum_wl = 0.0, sum_wll = 0.0, sum_wlx = 0.0;
    for (int j = 0; j < n; ++j) {
      const int level = nearest_level((x[j] - min) * inverse, 0, n_max);
      sum_wl += static_cast<double>(w[j]) * level;
      sum_wll += static_cast<double>(w[j]) * level * level;
      sum_wlx += static_cast<double>(w[j]) * level * x[j];
    }
    // Weighted least squares of x ~= a * L + b, with b <= 0 (b is minus the offset).
    const double det = sum_w * sum_wll - sum_wl * sum_wl;
    if (!(det > 0.0)) continue;
    double a = (sum_w * sum_wlx - sum_wx * sum_wl) / det;
    double b = (sum_wll * sum_wx - sum_wl * sum_wlx) / det;
    if (b > 0.0) {
      b = 0.0;
      a = sum_wlx / sum_wll;
    }
    if (!(a > 0.0)) continue;
    // sum_j w_j (a L_j + b - x_j)^2, expanded over the sums (the levels are fixed).
    const double error = a * a * sum_wll + 2.0 * a * b * sum_wl + b * b * sum_w -
                         2.0 * a * sum_wlx - 2.0 * b * sum_wx + sum_wxx;
    if (error < best_error) {
      best_error = error;
      best = AffineFit{static_cast<float>(a), static_cast<float>(-b)};
    }
  }
  return best;
}

// ---- K super-blocks ----

// Unsigned factors quantized against one f16 step so that the largest lands on max_field.
uint16_t quantize_factors(const float* factors, int n, int max_field, uint8_t* fields) {
  float max = 0.0f;
  for (int j = 0; j < n; ++j) max = std::max(max, factors[j]);
  const uint16_t bits = fp32_to_fp16(max / static_cast<float>(max_field));
  const float step = fp16_to_fp32(bits);
  const float inverse = step > 0.0f && std::isfinite(step) ? 1.0f / step : 0.0f;
  for (int j = 0; j < n; ++j) {
    fields[j] = static_cast<uint8_t>(nearest_level(factors[j] * inverse, 0, max_field));
  }
  return bits;
}

// Weighted error of one affine sub-block decoded as (d * scale) * L - (dmin * min), with the
// best levels for those factors written to L.
double affine_sub_error(const float* x, const float* w, int n, int n_max, float d, float dmin,
                        int scale, int min, int* L) {
  const float dl = d * static_cast<float>(scale);
  const float ml = dmin * static_cast<float>(min);
  const float inverse = dl > 0.0f && std::isfinite(dl) ? 1.0f / dl : 0.0f;
  double error = 0.0;
  for (int j = 0; j < n; ++j) {
    L[j] = nearest_level((x[j] + ml) * inverse, 0, n_max);
    const double diff = static_cast<double>(dl * static_cast<float>(L[j]) - ml) - x[j];
    error += w[j] * diff * diff;
  }
  return error;
}

constexpr int kAffineSub = 32;       // Q4_K / Q5_K sub-block values
constexpr int kAffineMaxField = 63;  // their 6-bit scale and min fields

struct AffineFields {
  int scale = 0;
  int min = 0;
};

// The fields one step either side of (centre.scale, centre.min) tried against `fields`, whose
// error is `best` and whose levels are in L: the lowest error wins (ties keep `fields`), and its
// fields and levels are left in `fields` and L.
void best_affine_neighbour(const float* xs, const float* ws, int n_max, float d, float dmin,
                           AffineFields centre, AffineFields& fields, double best, int* L) {
  int trial[kAffineSub];
  for (int scale = std::max(0, centre.scale - 1);
       scale <= std::min(kAffineMaxField, centre.scale + 1); ++scale) {
    for (int min = std::max(0, centre.min - 1); min <= std::min(kAffineMaxField, centre.min + 1);
         ++min) {
      if (scale == fields.scale && min == fields.min) continue;
      const double error = affine_sub_error(xs, ws, kAffineSub, n_max, d, dmin, scale, min, trial);
      if (error < best) {
        best = error;
        fields = AffineFields{scale, min};
        std::copy_n(trial, kAffineSub, L);
      }
    }
  }
}

// Q4_K / Q5_K: 8 sub-blocks of 32, 6-bit scale and min fields, levels [0, n_max].
struct AffineSuperBlock {
  uint16_t d = 0;
  uint16_t dmin = 0;
  uint8_t scale[8] = {};
  uint8_t min[8] = {};
  int L[kQK_K] = {};
};

void quantize_affine_super(const float* x, const float* w, int n_max, AffineSuperBlock* out) {
  constexpr int kSub = kAffineSub;
  constexpr int kMaxField = kAffineMaxField;
  float scales[8];
  float offsets[8];
  for (int s = 0; s < 8; ++s) {
    const AffineFit fit = search_affine(x + s * kSub, w + s * kSub, kSub, n_max);
    scales[s] = fit.scale;
    offsets[s] = fit.offset;
  }
  out->d = quantize_factors(scales, 8, kMaxField, out->scale);
  out->dmin = quantize_factors(offsets, 8, kMaxField, out->min);
  const float d = fp16_to_fp32(out->d);
  const float dmin = fp16_to_fp32(out->dmin);
  // The fields are rounded from the sub-block's own fit; one step either side may fit the
  // rounded pair better.
  for (int s = 0; s < 8; ++s) {
    const float* xs = x + s * kSub;
    const float* ws = w + s * kSub;
    int* L = out->L + s * kSub;
    AffineFields fields{out->scale[s], out->min[s]};
    const double error =
        affine_sub_error(xs, ws, kSub, n_max, d, dmin, fields.scale, fields.min, L);
    best_affine_neighbour(xs, ws, n_max, d, dmin, fields, fields, error, L);
    out->scale[s] = static_cast<uint8_t>(fields.scale);
    out->min[s] = static_cast<uint8_t>(fields.min);
  }
}

void quantize_q4_K_block(const float* x, const float* w, uint8_t* out) {
  AffineSuperBlock sb;
  quantize_affine_super(x, w, 15, &sb);
  quant::BlockQ4_K block{};
  block.d = sb.d;
  block.dmin = sb.dmin;
  quant::k_pack_scale_min(sb.scale, sb.min, block.scales);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      block.qs[32 * c + l] = static_cast<uint8_t>(sb.L[64 * c + l] | sb.L[64 * c + 32 + l] << 4);
    }
  }
  std::memcpy(out, &block, sizeof(block));
}

void quantize_q5_K_block(const float* x, const float* w, uint8_t* out) {
  AffineSuperBlock sb;
  quantize_affine_super(x, w, 31, &sb);
  quant::BlockQ5_K block{};
  block.d = sb.d;
  block.dmin = sb.dmin;
  quant::k_pack_scale_min(sb.scale, sb.min, block.scales);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      block.qs[32 * c + l] =
          static_cast<uint8_t>((sb.L[64 * c + l] & 15) | (sb.L[64 * c + 32 + l] & 15) << 4);
    }
  }
  for (int j = 0; j < 8; ++j) {
    for (int l = 0; l < 32; ++l) {
      block.qh[l] = static_cast<uint8_t>(block.qh[l] | ((sb.L[32 * j + l] >> 4) & 1) << j);
    }
  }
  std::memcpy(out, &block, sizeof(block));
}

constexpr int kQ6Sub = 16;                            // Q6_K sub-block values
constexpr SymmetricLevels kQ6Levels{32, 31};          // its levels
constexpr int kQ6FieldMin = -128, kQ6FieldMax = 127;  // its signed 8-bit scale fields

// As best_affine_neighbour, for a Q6_K sub-block's scale field: the fields one step either side
// of `centre` tried against `field` (error `best`, levels in L).
void best_q6_neighbour(const float* xs, const float* ws, float d, int centre, int& field,
                       double best, int* L) {
  int trial[kQ6Sub];
  for (int f = std::max(kQ6FieldMin, centre - 1); f <= std::min(kQ6FieldMax, centre + 1); ++f) {
    if (f == field) continue;
    const double error =
        symmetric_error(xs, ws, kQ6Sub, kQ6Levels, d * static_cast<float>(f), trial);
    if (error < best) {
      best = error;
      field = f;
      std::copy_n(trial, kQ6Sub, L);
    }
  }
}

// Q6_K: 16 sub-blocks of 16, signed 8-bit scales against one f16 d, levels [-32, 31].
void quantize_q6_K_block(const float* x, const float* w, uint8_t* out) {
  constexpr int kSub = kQ6Sub;
  constexpr SymmetricLevels kLevels = kQ6Levels;
  float scales[16];
  int L[kQK_K];
  float max_scale = 0.0f;  // the sub-block scale of largest magnitude, signed
  for (int s = 0; s < 16; ++s) {
    scales[s] = search_symmetric(
        x + s * kSub, w + s * kSub, kSub, kLevels, [](float v) { return v; }, L + s * kSub);
    if (std::fabs(scales[s]) > std::fabs(max_scale)) max_scale = scales[s];
  }
  quant::BlockQ6_K block{};
  int fields[16] = {};
  if (max_scale != 0.0f && std::isfinite(max_scale)) {
    // The largest scale takes the field -128, as the symmetric levels do.
    block.d = fp32_to_fp16(max_scale / -128.0f);
    const float d = fp16_to_fp32(block.d);
    const float inverse = d != 0.0f && std::isfinite(d) ? 1.0f / d : 0.0f;
    for (int s = 0; s < 16; ++s) {
      const float* xs = x + s * kSub;
      const float* ws = w + s * kSub;
      const int field0 = nearest_level(scales[s] * inverse, kQ6FieldMin, kQ6FieldMax);
      fields[s] = field0;
      const double error =
          symmetric_error(xs, ws, kSub, kLevels, d * static_cast<float>(field0), L + s * kSub);
      best_q6_neighbour(xs, ws, d, field0, fields[s], error, L + s * kSub);
    }
  } else {
    std::fill(L, L + kQK_K, 0);
  }
  for (int s = 0; s < 16; ++s) block.scales[s] = static_cast<int8_t>(fields[s]);
  for (int e = 0; e < kQK_K; ++e) {
    const int q = L[e] + 32;
    const int h = e / 128;
    const int r = e % 128;
    uint8_t& low = block.ql[64 * h + r % 64];
    low = static_cast<uint8_t>(low | (q & 15) << (4 * (r / 64)));
    uint8_t& high = block.qh[32 * h + r % 32];
    high = static_cast<uint8_t>(high | ((q >> 4) & 3) << (2 * (r / 32)));
  }
  std::memcpy(out, &block, sizeof(block));
}

// ---- one sub-block's fields against the stored super-block scales ----

// Block: BlockQ4_K or BlockQ5_K (the same d, dmin and scales fields).
template <class Block>
void refit_affine_sub_block(const float* x, const float* w, int n_max, int sub, Block* block) {
  uint8_t scales[8];
  uint8_t mins[8];
  for (int s = 0; s < 8; ++s) quant::k_scale_min(s, block->scales, &scales[s], &mins[s]);
  const float d = fp16_to_fp32(block->d);
  const float dmin = fp16_to_fp32(block->dmin);
  if (!(d > 0.0f) || !std::isfinite(d) || !std::isfinite(dmin)) return;
  const float* xs = x + sub * kAffineSub;
  const float* ws = w + sub * kAffineSub;
  int L[kAffineSub];
  AffineFields fields{scales[sub], mins[sub]};
  const double present =
      affine_sub_error(xs, ws, kAffineSub, n_max, d, dmin, fields.scale, fields.min, L);
  const AffineFit fit = search_affine(xs, ws, kAffineSub, n_max);
  const AffineFields centre{nearest_level(fit.scale / d, 0, kAffineMaxField),
                            dmin > 0.0f ? nearest_level(fit.offset / dmin, 0, kAffineMaxField) : 0};
  best_affine_neighbour(xs, ws, n_max, d, dmin, centre, fields, present, L);
  scales[sub] = static_cast<uint8_t>(fields.scale);
  mins[sub] = static_cast<uint8_t>(fields.min);
  quant::k_pack_scale_min(scales, mins, block->scales);
}

void refit_q6_K_sub_block(const float* x, const float* w, int sub, quant::BlockQ6_K* block) {
  const float d = fp16_to_fp32(block->d);
  if (d == 0.0f || !std::isfinite(d)) return;
  const float* xs = x + sub * kQ6Sub;
  const float* ws = w + sub * kQ6Sub;
  int L[kQ6Sub];
  int field = block->scales[sub];
  const double present =
      symmetric_error(xs, ws, kQ6Sub, kQ6Levels, d * static_cast<float>(field), L);
  const float scale = search_symmetric(
      xs, ws, kQ6Sub, kQ6Levels, [](float v) { return v; }, L);
  best_q6_neighbour(xs, ws, d, nearest_level(scale / d, kQ6FieldMin, kQ6FieldMax), field, present,
                    L);
  block->scales[sub] = static_cast<int8_t>(field);
}

// ---- legacy blocks ----

void quantize_symmetric_block(GgmlType type, const float* x, const float* w, uint8_t* out) {
  int L[kQK];
  if (type == GgmlType::kQ8_0) {
    quant::BlockQ8_0 block{};
    const float d = search_symmetric(x, w, kQK, {127, 127}, stored_f16, L);
    block.d = fp32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) block.qs[j] = static_cast<int8_t>(L[j]);
    std::memcpy(out, &block, sizeof(block));
    return;
  }
  if (type == GgmlType::kQ4_0) {
    quant::BlockQ4_0 block{};
    const float d = search_symmetric(x, w, kQK, {8, 7}, stored_f16, L);
    block.d = fp32_to_fp16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      block.qs[j] = static_cast<uint8_t>((L[j] + 8) | (L[j + 16] + 8) << 4);
    }
    std::memcpy(out, &block, sizeof(block));
    return;
  }
  quant::BlockQ5_0 block{};
  const float d = search_symmetric(x, w, kQK, {16, 15}, stored_f16, L);
  block.d = fp32_to_fp16(d);
  uint32_t high_bits = 0;
  for (int j = 0; j < kQK; ++j) {
    const auto q = static_cast<uint32_t>(L[j] + 16);
    high_bits |= ((q >> 4) & 1u) << j;
  }
  for (int j = 0; j < kQK / 2; ++j) {
    block.qs[j] = static_cast<uint8_t>(((L[j] + 16) & 15) | ((L[j + 16] + 16) & 15) << 4);
  }
  for (int b = 0; b < 4; ++b) block.qh[b] = static_cast<uint8_t>(high_bits >> (8 * b));
  std::memcpy(out, &block, sizeof(block));
}

// ---- per block: the search, then the better of it and round-to-nearest ----

int block_values(GgmlType type) {
  return type == GgmlType::kQ4_K || type == GgmlType::kQ5_K || type == GgmlType::kQ6_K ? kQK_K
                                                                                       : kQK;
}

double weighted_error(const float* x, const float* w, const float* decoded, int n) {
  double error = 0.0;
  for (int j = 0; j < n; ++j) {
    const double diff = static_cast<double>(decoded[j]) - x[j];
    error += w[j] * diff * diff;
  }
  return error;
}

void quantize_block(GgmlType type, const float* x, const float* w, uint8_t* out) {
  uint8_t searched[kMaxBlockBytes];
  switch (type) {
    case GgmlType::kQ4_K:
      quantize_q4_K_block(x, w, searched);
      break;
    case GgmlType::kQ5_K:
      quantize_q5_K_block(x, w, searched);
      break;
    case GgmlType::kQ6_K:
      quantize_q6_K_block(x, w, searched);
      break;
    default:
      quantize_symmetric_block(type, x, w, searched);
      break;
  }
  const int n = block_values(type);
  const size_t bytes = gguf::ggml_type_info(type).type_size;
  uint8_t nearest[kMaxBlockBytes];
  quant::quantize_row(type, x, nearest, n);
  float decoded_searched[kQK_K];
  float decoded_nearest[kQK_K];
  quant::dequantize_row(type, searched, decoded_searched, n);
  quant::dequantize_row(type, nearest, decoded_nearest, n);
  // The search works in its own arithmetic; the decoded values decide, so ties and rounding in
  // either path can never make the result worse than round-to-nearest.
  const bool keep_nearest =
      weighted_error(x, w, decoded_nearest, n) < weighted_error(x, w, decoded_searched, n);
  std::memcpy(out, keep_nearest ? nearest : searched, bytes);
}

// Weights of one block from importance; all-zero (or unusable) weights become even ones.
void block_weights(const float* x, const float* importance, float* w, int n) {
  double sum_xx = 0.0;
  for (int j = 0; j < n; ++j) sum_xx += static_cast<double>(x[j]) * x[j];
  const double sigma2 = sum_xx / n;
  double sum_w = 0.0;
  for (int j = 0; j < n; ++j) {
    const float imp = std::isfinite(importance[j]) && importance[j] > 0.0f ? importance[j] : 0.0f;
    w[j] = static_cast<float>(imp * std::sqrt(sigma2 + static_cast<double>(x[j]) * x[j]));
    sum_w += w[j];
  }
  if (!(sum_w > 0.0) || !std::isfinite(sum_w)) std::fill(w, w + n, 1.0f);
}

void check_row(GgmlType type, int64_t n) {
  if (!has_weighted_quantizer(type)) {
    throw Error(Error::Kind::kUnsupported,
                "no weighted quantizer for type " + std::string(gguf::ggml_type_name(type)));
  }
  const int block = block_values(type);
  if (n < 0 || n % block != 0) {
    throw Error(Error::Kind::kInvalidArgument,
                "weighted " + std::string(gguf::ggml_type_name(type)) + ": " + std::to_string(n) +
                    " values are not a whole number of " + std::to_string(block) + "-value blocks");
  }
}

}  // namespace

bool has_weighted_quantizer(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ5_0:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
      return true;
    default:
      return false;
  }
}

void importance_weights(GgmlType type, const float* row, const float* importance, float* weights,
                        int64_t n) {
  check_row(type, n);
  const int block = block_values(type);
  for (int64_t start = 0; start < n; start += block) {
    block_weights(row + start, importance + start, weights + start, block);
  }
}

void quantize_row_weighted(GgmlType type, const float* row, const float* weights, void* out,
                           int64_t n) {
  check_row(type, n);
  const int block = block_values(type);
  const size_t bytes = gguf::ggml_type_info(type).type_size;
  auto* dst = static_cast<uint8_t*>(out);
  for (int64_t start = 0; start < n; start += block, dst += bytes) {
    quantize_block(type, row + start, weights + start, dst);
  }
}

int sub_block_values(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
      return 32;
    case GgmlType::kQ6_K:
      return 16;
    default:
      return 0;
  }
}

void refit_sub_block(GgmlType type, const float* values, const float* importance, void* block,
                     int sub) {
  const int sub_values = sub_block_values(type);
  if (sub_values == 0 || sub < 0 || sub >= kQK_K / sub_values) {
    throw Error(Error::Kind::kInvalidArgument,
                "refit_sub_block: " + std::string(gguf::ggml_type_name(type)) +
                    " has no sub-block " + std::to_string(sub));
  }
  float weights[kQK_K];
  block_weights(values, importance, weights, kQK_K);
  if (type == GgmlType::kQ6_K) {
    refit_q6_K_sub_block(values, weights, sub, static_cast<quant::BlockQ6_K*>(block));
  } else if (type == GgmlType::kQ4_K) {
    refit_affine_sub_block(values, weights, 15, sub, static_cast<quant::BlockQ4_K*>(block));
  } else {
    refit_affine_sub_block(values, weights, 31, sub, static_cast<quant::BlockQ5_K*>(block));
  }
}

void quantize_row_with_importance(GgmlType type, const float* row, const float* importance,
                                  void* out, int64_t n) {
  check_row(type, n);
  const int block = block_values(type);
  const size_t bytes = gguf::ggml_type_info(type).type_size;
  auto* dst = static_cast<uint8_t*>(out);
  float weights[kQK_K];
  for (int64_t start = 0; start < n; start += block, dst += bytes) {
    block_weights(row + start, importance + start, weights, block);
    quantize_block(type, row + start, weights, dst);
  }
}

}  // namespace llms::quantize
