// model/rope: RoPE frequencies per scaling type (contract in model/rope.h). The formulas are
// those of transformers' modeling_rope_utils and of the YaRN paper (arXiv 2309.00071); all
// arithmetic is in double.
#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "util/error.h"

namespace llms::model {

namespace {

// YaRN's attention temperature: 0.1 * m * ln(s) + 1 for s > 1 (paper, Eq. 21).
double yarn_mscale(double scale, double m) {
  return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
}

// The (fractional) pair index whose wavelength fits `n_rotations` times into the original
// context.
double yarn_correction_dim(double n_rotations, double dim, double base, double original_ctx) {
  return dim * std::log(original_ctx / (n_rotations * 2.0 * std::numbers::pi)) /
         (2.0 * std::log(base));
}

void apply_yarn(const ModelConfig& c, double base, double dim, RopeFrequencies& f) {
  const double factor = c.rope_scaling_factor;
  const double original = static_cast<double>(c.rope_original_context);
  if (original <= 0) {
    throw_invalid_file("YaRN RoPE scaling needs the original context length");
  }
  double low = yarn_correction_dim(c.rope_yarn_beta_fast, dim, base, original);
  double high = yarn_correction_dim(c.rope_yarn_beta_slow, dim, base, original);
  if (c.rope_yarn_truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1.0);
  if (low == high) high += 0.001;  // as transformers: no division by zero
  for (size_t i = 0; i < f.inv_freq.size(); ++i) {
    // ramp 0: keep the frequency (extrapolate, fast pairs); ramp 1: divide it by the factor
    // (interpolate, slow pairs); linear in between.
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    f.inv_freq[i] = f.inv_freq[i] / factor * ramp + f.inv_freq[i] * (1.0 - ramp);
  }
  if (c.rope_yarn_attention_factor) {
    f.attention_factor = *c.rope_yarn_attention_factor;
  } else if (c.rope_yarn_mscale != 0.0 && c.rope_yarn_mscale_all_dim != 0.0) {
    f.attention_factor =
        yarn_mscale(factor, c.rope_yarn_mscale) / yarn_mscale(factor, c.rope_yarn_mscale_all_dim);
  } else {
    f.attention_factor = yarn_mscale(factor, 1.0);
  }
}

void apply_llama3(const ModelConfig& c, RopeFrequencies& f) {
  const double factor = c.rope_scaling_factor;
  const double low = c.rope_llama3_low_freq_factor;
  const double high = c.rope_llama3_high_freq_factor;
  const double original = static_cast<double>(c.rope_original_context);
  if (original <= 0 || !(high > low)) {
    throw_invalid_file(
        "Llama 3 RoPE scaling needs an original context length and "
        "high_freq_factor > low_freq_factor");
  }
  for (double& inv : f.inv_freq) {
    const double wavelength = 2.0 * std::numbers::pi / inv;
    if (wavelength < original / high) continue;  // fast pairs: unchanged
    if (wavelength > original / low) {           // slow pairs: interpolated
      inv /= factor;
      continue;
    }
    const double smooth = (original / wavelength - low) / (high - low);
    inv = (1.0 - smooth) * inv / factor + smooth * inv;
  }
}

}  // namespace

bool is_supported_rope_scaling(const std::string& type) {
  return type == "none" || type == "linear" || type == "yarn" || type == "llama3";
}

RopeFrequencies rope_frequencies(const ModelConfig& c, double base, bool scaled) {
  const std::string& type = c.rope_scaling_type;
  if (!is_supported_rope_scaling(type)) {
    throw Error(Error::Kind::kUnsupported,
                "RoPE scaling type '" + type +
                    "' is not supported (supported: none, linear, yarn, llama3)");
  }
  const uint64_t head_dim = c.head_dim_k;
  if (head_dim == 0 || head_dim % 2 != 0) {
    throw_invalid_file("RoPE needs an even head width, got " + std::to_string(head_dim));
  }
  if (!(base > 1.0)) throw_invalid_file("RoPE base must be > 1, got " + std::to_string(base));
  if (scaled && type != "none" && !(c.rope_scaling_factor > 0.0)) {
    throw_invalid_file("RoPE scaling factor must be positive, got " +
                       std::to_string(c.rope_scaling_factor));
  }
  const size_t n = head_dim / 2;
  if (!c.rope_freq_divisors.empty() && c.rope_freq_divisors.size() != n) {
    throw_invalid_file("rope_freqs holds " + std::to_string(c.rope_freq_divisors.size()) +
                       " factors; the head width needs " + std::to_string(n));
  }
  RopeFrequencies f;
  f.inv_freq.resize(n);
  const double dim = static_cast<double>(head_dim);
  for (size_t i = 0; i < n; ++i) {
    f.inv_freq[i] = std::pow(base, -2.0 * static_cast<double>(i) / dim);
    if (scaled && !c.rope_freq_divisors.empty()) {
      const double d = c.rope_freq_divisors[i];
      if (!(d > 0.0) || !std::isfinite(d)) throw_invalid_file("rope_freqs holds a factor <= 0");
      f.inv_freq[i] /= d;
    }
  }
  if (!scaled) return f;
  if (type == "linear") {
    for (double& inv : f.inv_freq) inv /= c.rope_scaling_factor;
  } else if (type == "yarn") {
    apply_yarn(c, base, dim, f);
  } else if (type == "llama3") {
    apply_llama3(c, f);
  }
  return f;
}

void rope_cos_sin(const RopeFrequencies& f, int64_t pos, float* cos, float* sin) {
  const double p = static_cast<double>(pos);
  for (size_t i = 0; i < f.inv_freq.size(); ++i) {
    const double theta = p * f.inv_freq[i];
    cos[i] = static_cast<float>(std::cos(theta) * f.attention_factor);
    sin[i] = static_cast<float>(std::sin(theta) * f.attention_factor);
  }
}

}  // namespace llms::model
