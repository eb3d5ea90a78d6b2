// quantize/awq: see awq.h.
#include "quantize/awq.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "lapack.h"
#include "quant/quant.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace llms::quantize {

namespace {

using gguf::GgmlType;

// A 2-D tensor of `width` columns that can be read and, in its planned type, written; or nullptr.
const gguf::TensorInfo* consumer(const gguf::GgufFile& file, const QuantizePlan& plan,
                                 const std::string& name, uint64_t width) {
  const gguf::TensorInfo* t = file.find_tensor(name);
  if (!t || t->n_dims != 2 || t->ne[0] != width || !quant::can_dequantize(t->type)) return nullptr;
  if (!quant::can_quantize(plan.type_for(*t))) return nullptr;
  return t;
}

// The rows the loss is evaluated on: their values (f32, m x n) and the type each is rounded to.
struct SampledRows {
  std::vector<float> values;
  std::vector<GgmlType> types;
  int64_t m = 0;
};

SampledRows sample_rows(const gguf::GgufFile& file, const QuantizePlan& plan,
                        const std::vector<const gguf::TensorInfo*>& tensors, int64_t n) {
  uint64_t total = 0;
  for (const auto* t : tensors) total += t->n_elements / t->ne[0];
  const uint64_t stride =
      std::max<uint64_t>(1, (total + AwqOptions::kLossRows - 1) / AwqOptions::kLossRows);
  SampledRows s;
  uint64_t index = 0;  // over the group's rows, tensor after tensor
  for (const auto* t : tensors) {
    const uint64_t rows = t->n_elements / t->ne[0];
    const uint64_t row_bytes = quant::quantized_row_bytes(t->type, n);
    const auto data = file.tensor_data(*t);
    const GgmlType type = plan.type_for(*t);
    for (uint64_t r = 0; r < rows; ++r, ++index) {
      if (index % stride != 0) continue;
      s.values.resize(s.values.size() + static_cast<size_t>(n));
      quant::dequantize_row(t->type, data.data() + r * row_bytes,
                            s.values.data() + s.values.size() - static_cast<size_t>(n), n);
      s.types.push_back(type);
      ++s.m;
    }
  }
  return s;
}

// s_j = a_j^alpha with a_j at least kMinRelativeRms of the largest (a nearly dead channel would
// otherwise stretch the range), normalized so that max * min = 1, then kept within
// [1/kMaxFactor, kMaxFactor]: the producer's values are divided by s, and a quantized producer
// (up's rows) must keep block scales inside f16's normal range. Channels without a usable a_j
// keep 1.
std::vector<float> factors(const std::vector<double>& a, double alpha) {
  constexpr double kMinRelativeRms = 1e-4;
  double a_max = 0.0;
  for (double v : a) a_max = std::max(a_max, v);
  std::vector<double> s(a.size(), 1.0);
  double lo = std::numeric_limits<double>::infinity();
  double hi = 0.0;
  for (size_t j = 0; j < a.size(); ++j) {
    if (a[j] > 0.0) {
      s[j] = std::pow(std::max(a[j], kMinRelativeRms * a_max), alpha);
      lo = std::min(lo, s[j]);
      hi = std::max(hi, s[j]);
    }
  }
  const double norm = hi > 0.0 ? std::sqrt(hi * lo) : 1.0;
  std::vector<float> out(a.size(), 1.0f);
  for (size_t j = 0; j < a.size(); ++j) {
    const double f =
        a[j] > 0.0 ? std::clamp(s[j] / norm, 1.0 / AwqOptions::kMaxFactor, AwqOptions::kMaxFactor)
                   : 1.0;
    if (std::isfinite(f)) out[j] = static_cast<float>(f);
  }
  return out;
}

// sum over the sampled rows of (w^ - w)^T H (w^ - w), w^ = dequantize(quantize(w * s)) / s.
double group_loss(const SampledRows& rows, const std::vector<float>& s, const float* h, int64_t n,
                  ThreadPool* pool) {
  std::vector<float> d(rows.values.size());
  auto round_rows = [&](int64_t begin, int64_t end, int) {
    std::vector<float> scaled(static_cast<size_t>(n)), decoded(static_cast<size_t>(n));
    std::vector<uint8_t> codes;
    for (int64_t i = begin; i < end; ++i) {
      const float* w = rows.values.data() + i * n;
      const GgmlType type = rows.types[static_cast<size_t>(i)];
      codes.resize(quant::quantized_row_bytes(type, n));
      for (int64_t j = 0; j < n; ++j) scaled[j] = w[j] * s[j];
      quant::quantize_row(type, scaled.data(), codes.data(), n);
      quant::dequantize_row(type, codes.data(), decoded.data(), n);
      float* out = d.data() + i * n;
      for (int64_t j = 0; j < n; ++j) out[j] = decoded[j] / s[j] - w[j];
    }
  };
  if (pool != nullptr) {
    pool->parallel_for(rows.m, round_rows);
    pool->rest();  // its workers would spin against BLAS's threads in the product below
  } else {
    round_rows(0, rows.m, 0);
  }
  // Column-major, D^T is n x m; H D^T (H symmetric) is (D H)^T.
  std::vector<float> dh(d.size());
  const int ni = static_cast<int>(n);
  const int mi = static_cast<int>(rows.m);
  const float one = 1.0f;
  const float zero = 0.0f;
  sgemm_("N", "N", &ni, &mi, &ni, &one, h, &ni, d.data(), &ni, &zero, dh.data(), &ni, 1, 1);
  double loss = 0.0;
  for (size_t k = 0; k < d.size(); ++k) loss += static_cast<double>(d[k]) * dh[k];
  return loss;
}

void plan_group(const gguf::GgufFile& file, const QuantizePlan& plan,
                const AwqHessianLookup& hessian, const AwqOptions& options,
                const ScalingGroup& scaling, AwqPlan& out) {
  const std::vector<std::string>& consumers = scaling.consumers;
  const HessianSet::Entry* h = hessian(consumers.front());
  if (h == nullptr || h->n_rows < 1) return;
  const int64_t n = h->n_columns;
  const auto width = static_cast<uint64_t>(n);
  if (!producer_fits(file, scaling, width)) return;
  std::vector<const gguf::TensorInfo*> tensors;
  for (const std::string& name : consumers) {
    const gguf::TensorInfo* t = consumer(file, plan, name, width);
    if (!t) return;
    tensors.push_back(t);
  }
  if (static_cast<int64_t>(h->h.size()) != n * n) {
    throw Error(Error::Kind::kInvalidArgument, "AWQ: the Hessian of '" + consumers.front() +
                                                   "' is not " + std::to_string(n) + " x " +
                                                   std::to_string(n));
  }
  std::vector<double> rms(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    const double v = h->h[static_cast<size_t>(j * n + j)] / static_cast<double>(h->n_rows);
    rms[static_cast<size_t>(j)] = std::isfinite(v) && v > 0.0 ? std::sqrt(v) : 0.0;
  }
  const SampledRows rows = sample_rows(file, plan, tensors, n);

  AwqGroup group;
  group.producer = scaling.producer;
  std::vector<float> best(static_cast<size_t>(n), 1.0f);
  for (int k = 0; k < options.grid; ++k) {
    const double alpha = static_cast<double>(k) / options.grid;
    std::vector<float> s = factors(rms, alpha);
    const double loss = group_loss(rows, s, h->h.data(), n, options.pool);
    if (k == 0) {
      group.loss_rtn = loss;
      group.loss = loss;
    }
    if (loss < group.loss) {
      group.loss = loss;
      group.alpha = alpha;
      best = std::move(s);
    }
  }
  out.groups.push_back(group);
  if (group.alpha == 0.0) return;  // round-to-nearest won: nothing to rescale
  fold_factors(scaling, best, out.rescales);
}

}  // namespace

std::vector<GptqTensor> awq_tensors(const gguf::GgufFile& file) {
  std::vector<GptqTensor> out;
  for (const gguf::TensorInfo& t : file.tensors()) {
    const auto layer = layer_of(t.name);
    if (!layer || t.n_dims != 2) continue;
    const std::string p = "blk." + std::to_string(*layer) + ".";
    if (t.name == p + "attn_q.weight" || t.name == p + "ffn_gate.weight" ||
        t.name == p + "ffn_down.weight") {
      out.push_back({t.name, *layer, static_cast<int64_t>(t.ne[0])});
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const GptqTensor& a, const GptqTensor& b) { return a.layer < b.layer; });
  return out;
}

void plan_awq_layer(const gguf::GgufFile& file, const QuantizePlan& plan, int64_t layer,
                    const AwqHessianLookup& hessian, const AwqOptions& options, AwqPlan& out) {
  if (options.grid < 1) {
    throw Error(
        Error::Kind::kInvalidArgument,
        "AWQ: the alpha grid must have at least 1 point, not " + std::to_string(options.grid));
  }
  for (const ScalingGroup& group : scaling_groups(file, layer)) {
    plan_group(file, plan, hessian, options, group, out);
  }
}

}  // namespace llms::quantize
