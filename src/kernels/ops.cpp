// kernels/ops: scalar references of the row ops, the ISA dispatch and rope's angle tables
// (contract in kernels/ops.h). The references favour clarity and accuracy: sums in double,
// std::exp / std::tanh.
#include "kernels/ops.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ops_kernels.h"
#include "util/error.h"

namespace llms::kernels {
namespace detail {
namespace {

void rms_norm_ref(const float* x, const float* weight, float* y, int64_t n, float eps) {
  if (n <= 0) return;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const auto inv = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * inv * (weight != nullptr ? weight[i] : 1.0f);
}

void softmax_ref(float* x, int64_t n) {
  if (n <= 0) return;
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) max = std::fmax(max, x[i]);
  if (max == -std::numeric_limits<float>::infinity()) {
    for (int64_t i = 0; i < n; ++i) x[i] = 0.0f;
    return;
  }
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const auto inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void silu_mul_ref(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

// 0.5 * (1 + tanh(u)) == 1 / (1 + exp(-2u)): the sigmoid form avoids the cancellation in
// 1 + tanh(u) for negative u.
void gelu_tanh_mul_ref(const float* gate, const float* up, float* out, int64_t n) {
  constexpr float kTwoSqrt2OverPi = 1.5957691216057308f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float u2 = kTwoSqrt2OverPi * (g + 0.044715f * g * g * g);
    out[i] = g / (1.0f + std::exp(-u2)) * up[i];
  }
}

void add_ref(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void scale_ref(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

float dot_ref(const float* a, const float* b, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * b[i];
  return static_cast<float>(sum);
}

void axpy_ref(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void rope_apply_ref(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin,
                    RopeMode mode) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const int64_t i0 = mode == RopeMode::kNormal ? 2 * i : i;
      const int64_t i1 = mode == RopeMode::kNormal ? 2 * i + 1 : i + half;
      const float a = v[i0];
      const float b = v[i1];
      v[i0] = a * cos[i] - b * sin[i];
      v[i1] = a * sin[i] + b * cos[i];
    }
  }
}

}  // namespace

const OpTable& ops_scalar() {
  static const OpTable table{rms_norm_ref, softmax_ref, silu_mul_ref, gelu_tanh_mul_ref, add_ref,
                             scale_ref,    dot_ref,     axpy_ref,     rope_apply_ref};
  return table;
}

}  // namespace detail

const OpTable& op_table(Isa isa) {
  if (!isa_supported(isa)) {
    throw Error(Error::Kind::kInvalidArgument,
                "op_table: ISA " + std::string(isa_name(isa)) + " is not supported by this CPU");
  }
  return isa == Isa::kScalar ? detail::ops_scalar() : detail::ops_avx2();
}

namespace {

const OpTable& best_ops() {
  static const OpTable& table = op_table(best_isa());
  return table;
}

void check_rope_args(int64_t head_dim, int64_t pos) {
  if (head_dim <= 0 || head_dim % 2 != 0) {
    throw Error(Error::Kind::kInvalidArgument,
                "rope: head_dim must be positive and even, got " + std::to_string(head_dim));
  }
  if (pos < 0) {
    throw Error(Error::Kind::kInvalidArgument, "rope: negative position " + std::to_string(pos));
  }
}

// The last angle table this thread computed.
struct RopeTable {
  int64_t pos = -1;
  int64_t head_dim = 0;
  float freq_base = 0;
  float freq_scale = 0;
  std::vector<float> cos;
  std::vector<float> sin;
};

}  // namespace

void rms_norm(const float* x, const float* weight, float* y, int64_t n, float eps) {
  best_ops().rms_norm(x, weight, y, n, eps);
}
void softmax(float* x, int64_t n) { best_ops().softmax(x, n); }
void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  best_ops().silu_mul(gate, up, out, n);
}
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n) {
  best_ops().gelu_tanh_mul(gate, up, out, n);
}
void add(const float* a, const float* b, float* out, int64_t n) { best_ops().add(a, b, out, n); }
void scale(float* x, float s, int64_t n) { best_ops().scale(x, s, n); }
float dot(const float* a, const float* b, int64_t n) { return best_ops().dot(a, b, n); }
void axpy(float a, const float* x, float* y, int64_t n) { best_ops().axpy(a, x, y, n); }

void rope_cos_sin(int64_t pos, int64_t head_dim, float freq_base, float freq_scale, float* cos,
                  float* sin) {
  check_rope_args(head_dim, pos);
  // theta_i = pos * scale * base^(-2i/d), all in double: at pos ~ 1e6 an f32 angle would
  // already be off by ~0.06 rad.
  const double step =
      std::log(static_cast<double>(freq_base)) * -2.0 / static_cast<double>(head_dim);
  const double p = static_cast<double>(pos) * static_cast<double>(freq_scale);
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const double theta = p * std::exp(step * static_cast<double>(i));
    cos[i] = static_cast<float>(std::cos(theta));
    sin[i] = static_cast<float>(std::sin(theta));
  }
}

void rope_apply(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin,
                RopeMode mode) {
  check_rope_args(head_dim, 0);
  if (n_heads <= 0) return;
  best_ops().rope_apply(x, n_heads, head_dim, cos, sin, mode);
}

void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t pos, float freq_base,
          float freq_scale, RopeMode mode) {
  check_rope_args(head_dim, pos);
  thread_local RopeTable table;
  if (table.pos != pos || table.head_dim != head_dim || table.freq_base != freq_base ||
      table.freq_scale != freq_scale) {
    table.cos.resize(static_cast<size_t>(head_dim / 2));
    table.sin.resize(static_cast<size_t>(head_dim / 2));
    rope_cos_sin(pos, head_dim, freq_base, freq_scale, table.cos.data(), table.sin.data());
    table.pos = pos;
    table.head_dim = head_dim;
    table.freq_base = freq_base;
    table.freq_scale = freq_scale;
  }
  if (n_heads <= 0) return;
  best_ops().rope_apply(x, n_heads, head_dim, table.cos.data(), table.sin.data(), mode);
}

}  // namespace llms::kernels
