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

float element(const void* base, bool f16, int64_t i) {
  return f16 ? quant::fp16_to_fp32(static_cast<const uint16_t*>(base)[i])
             : static_cast<const float*>(base)[i];
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
        dot += static_cast<double>(q[e]) * element(kv.k, kv.f16, e * kv.k_stride + j);
      }
      s[j] = static_cast<float>(dot);
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
      for (int32_t j = begin; j < end; ++j)
        a += static_cast<double>(s[j]) * element(kv.v, kv.f16, j * t.head_dim_v + e);
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

}  // namespace llms::kernels
