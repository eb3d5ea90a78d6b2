// kernels/act_quant: scalar reference activation quantizers and the ISA dispatch (contract in
// kernels/act_quant.h).
#include "kernels/act_quant.h"

#include <cmath>
#include <string>

#include "matmul_kernels.h"
#include "util/error.h"

namespace llms::kernels {
namespace detail {
namespace {

// Round half to even, clamped to [lo, hi]; NaN gives 0. Converting an out-of-range float to
// int is UB, so the clamp happens in the float domain.
int round_even_clamped(float v, int lo, int hi) {
  if (std::isnan(v)) return 0;
  const float r = std::nearbyint(v);
  if (r <= static_cast<float>(lo)) return lo;
  if (r >= static_cast<float>(hi)) return hi;
  return static_cast<int>(r);
}

}  // namespace

void quantize_act_q8_scalar(const float* x, int64_t n, ActQ8* out) {
  for (int64_t b = 0; b < n / quant::kQK; ++b) {
    const float* xb = x + b * quant::kQK;
    float amax = 0.0f;
    for (int j = 0; j < quant::kQK; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    ActQ8& block = out[b];
    block.d = d;
    int sum = 0;
    for (int j = 0; j < quant::kQK; ++j) {
      const int q = round_even_clamped(xb[j] * id, -127, 127);
      block.qs[j] = static_cast<int8_t>(q);
      sum += q;
    }
    block.sum = sum;
  }
}

void quantize_act_q8k_scalar(const float* x, int64_t n, ActQ8K* out) {
  for (int64_t b = 0; b < n / quant::kQK_K; ++b) {
    const float* xb = x + b * quant::kQK_K;
    float amax = 0.0f;
    float max = 0.0f;
    for (int e = 0; e < quant::kQK_K; ++e) {
      if (amax < std::fabs(xb[e])) {
        amax = std::fabs(xb[e]);
        max = xb[e];
      }
    }
    ActQ8K& block = out[b];
    block.d = 0.0f;
    for (int8_t& q : block.qs) q = 0;
    if (amax > 0.0f && std::isfinite(amax)) {
      const float iscale = -127.0f / max;
      for (int e = 0; e < quant::kQK_K; ++e) {
        block.qs[e] = static_cast<int8_t>(round_even_clamped(iscale * xb[e], -128, 127));
      }
      block.d = 1.0f / iscale;
    }
    for (int s = 0; s < quant::kQK_K / 16; ++s) {
      int sum = 0;
      for (int e = 16 * s; e < 16 * s + 16; ++e) sum += block.qs[e];
      block.bsums[s] = static_cast<int16_t>(sum);
    }
  }
}

}  // namespace detail

namespace {

void check_isa(Isa isa, const char* what) {
  if (!isa_supported(isa)) {
    throw Error(Error::Kind::kInvalidArgument, std::string(what) + ": ISA " +
                                                   std::string(isa_name(isa)) +
                                                   " is not supported by this CPU");
  }
}

}  // namespace

void quantize_act_q8(const float* x, int64_t n, ActQ8* out, Isa isa) {
  check_isa(isa, "quantize_act_q8");
  if (isa == Isa::kScalar) {
    detail::quantize_act_q8_scalar(x, n, out);
  } else {
    detail::quantize_act_q8_avx2(x, n, out);
  }
}

void quantize_act_q8k(const float* x, int64_t n, ActQ8K* out, Isa isa) {
  check_isa(isa, "quantize_act_q8k");
  if (isa == Isa::kScalar) {
    detail::quantize_act_q8k_scalar(x, n, out);
  } else {
    detail::quantize_act_q8k_avx2(x, n, out);
  }
}

}  // namespace llms::kernels
