// kernels/attention: the scalar reference of the attention block step and the ISA dispatch
// (contract in kernels/attention.h). The reference favours clarity: dot products in double,
// std::exp, one row at a time.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "attention_kernels.h"
#include "quant/float_convert.h"
#include "util/error.h"

namespace llms::kernels {
namespace detail {
namespace {

// Element i as stored, before its slot's scale (kernels/attention.h).
float element(const void* base, KvElement type, int64_t i) {
  switch (type) {
    case KvElement::kF16:
      return quant::fp16_to_fp32(static_cast<const uint16_t*>(base)[i]);
    case KvElement::kInt8:
      return static_cast<float>(static_cast<const int8_t*>(base)[i]);
    case KvElement::kFp8:
      return quant::fp8_e4m3_to_fp32(static_cast<const uint8_t*>(base)[i]);
    case KvElement::kF32:
      break;
  }
  return static_cast<const float*>(base)[i];
}

double slot_scale(const uint16_t* scales, KvElement type, int32_t j) {
  if (type != KvElement::kInt8 && type != KvElement::kFp8) return 1.0;
  return quant::bf16_to_fp32(scales[j]);
}

void block_ref(const AttentionTile& t, const KvBlock& kv, int32_t n_keys) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int32_t r = 0; r < t.n_rows; ++r) {
    const int32_t begin = std::max(t.key_begin[r], 0);
    const int32_t end = std::min(t.key_end[r], n_keys);
    if (begin >= end) continue;
    const float* q = t.q + r * t.head_dim_k;
    float* s = t.scores + static_cast<int64_t>(r) * kv.k_stride;
    float block_max = kNegInf;
    for (int32_t j = begin; j < end; ++j) {
      double dot = 0;
      for (int64_t e = 0; e < t.head_dim_k; ++e) {
        dot += static_cast<double>(q[e]) * element(kv.k, kv.element, e * kv.k_stride + j);
      }
      s[j] = static_cast<float>(dot * slot_scale(kv.k_scale, kv.element, j));
      block_max = std::max(block_max, s[j]);
    }
    const float new_max = std::max(t.max[r], block_max);
    const float correction = std::exp(t.max[r] - new_max);  // exp(-inf) == 0 on the first block
    double block_sum = 0;
    for (int32_t j = begin; j < end; ++j) {
      s[j] = std::exp(s[j] - new_max);
      block_sum += s[j];
    }
    float* acc = t.acc + r * t.head_dim_v;
    for (int64_t e = 0; e < t.head_dim_v; ++e) {
      double a = static_cast<double>(acc[e]) * correction;
      for (int32_t j = begin; j < end; ++j) {
        a += static_cast<double>(s[j]) * slot_scale(kv.v_scale, kv.element, j) *
             element(kv.v, kv.element, j * t.head_dim_v + e);
      }
      acc[e] = static_cast<float>(a);
    }
    t.sum[r] = static_cast<float>(static_cast<double>(t.sum[r]) * correction + block_sum);
    t.max[r] = new_max;
  }
}

void exp_ref(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] < -87.33654f ? 0.0f : std::exp(x[i]);
}

void to_f16_ref(const float* x, uint16_t* y, int64_t n) { quant::fp32_to_fp16_row(x, y, n); }

}  // namespace

const AttentionTable& attention_scalar() {
  static const AttentionTable table{block_ref, exp_ref, to_f16_ref};
  return table;
}

}  // namespace detail

namespace {

const AttentionTable& best_attention() {
  static const AttentionTable& table = attention_table(best_isa());
  return table;
}

}  // namespace

const AttentionTable& attention_table(Isa isa) {
  if (!isa_supported(isa)) {
    throw Error(Error::Kind::kInvalidArgument,
                "attention: ISA " + std::string(isa_name(isa)) + " is not supported by this CPU");
  }
  return isa == Isa::kScalar ? detail::attention_scalar() : detail::attention_avx2();
}

void attention_block(const AttentionTile& tile, const KvBlock& block, int32_t n_keys) {
  best_attention().block(tile, block, n_keys);
}

void exp_array(const float* x, float* y, int64_t n) { best_attention().exp(x, y, n); }

void f32_to_f16_array(const float* x, uint16_t* y, int64_t n) { best_attention().to_f16(x, y, n); }

void quantize_kv_vector(const float* x, int64_t n, KvElement element, uint8_t* out, int64_t stride,
                        uint16_t* scale) {
  if (element != KvElement::kInt8 && element != KvElement::kFp8) {
    throw Error(Error::Kind::kInvalidArgument, "quantize_kv_vector: not an 8-bit KV element");
  }
  const float range = element == KvElement::kInt8 ? 127.0f : 448.0f;
  float amax = 0.0f;
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) {
    finite = finite && std::isfinite(x[i]);
    amax = std::max(amax, std::fabs(x[i]));
  }
  if (!finite) {
    *scale = quant::fp32_to_bf16(std::numeric_limits<float>::quiet_NaN());
    for (int64_t i = 0; i < n; ++i) out[i * stride] = 0;
    return;
  }
  // Rounded up, so that amax / scale <= range and no element clips.
  uint16_t bits = quant::fp32_to_bf16(amax / range);
  if (quant::bf16_to_fp32(bits) < amax / range) ++bits;  // positive: the next bf16 up
  *scale = bits;
  const float s = quant::bf16_to_fp32(bits);
  if (s == 0.0f) {
    for (int64_t i = 0; i < n; ++i) out[i * stride] = 0;
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float y = x[i] / s;
    if (element == KvElement::kInt8) {
      const float r = std::clamp(std::nearbyint(y), -127.0f, 127.0f);
      out[i * stride] = static_cast<uint8_t>(static_cast<int8_t>(r));
    } else {
      out[i * stride] = quant::fp32_to_fp8_e4m3(y);
    }
  }
}

}  // namespace llms::kernels
