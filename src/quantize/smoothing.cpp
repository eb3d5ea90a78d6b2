// quantize/smoothing: see smoothing.h.
#include "quantize/smoothing.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "quant/quant.h"
#include "quantize/hessian.h"
#include "quantize/quantize_plan.h"
#include "util/error.h"

namespace llms::quantize {

const std::vector<float>* ActivationRanges::find(std::string_view weight) const {
  const auto it = max_abs.find(hessian_input_key(weight));
  return it == max_abs.end() ? nullptr : &it->second;
}

void ActivationRangeCollector::add(std::string_view weight, const float* rows, int64_t n_rows,
                                   int64_t n_columns) {
  if (!weight.starts_with("blk.") || n_rows < 1) return;
  std::vector<float>& m = ranges_.max_abs[hessian_input_key(weight)];
  if (m.empty()) m.assign(static_cast<size_t>(n_columns), 0.0f);
  if (static_cast<int64_t>(m.size()) != n_columns) {
    throw Error(Error::Kind::kInvalidArgument, "activation ranges of '" + std::string(weight) +
                                                   "': seen with " + std::to_string(m.size()) +
                                                   " columns, now " + std::to_string(n_columns));
  }
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* x = rows + r * n_columns;
    for (int64_t j = 0; j < n_columns; ++j) {
      m[static_cast<size_t>(j)] = std::max(m[static_cast<size_t>(j)], std::fabs(x[j]));
    }
  }
}

namespace {

// Largest |W[i, j]| over rows, per column j, raised into `column_max`.
void raise_column_max(const gguf::GgufFile& file, const gguf::TensorInfo& t,
                      std::vector<float>& column_max) {
  const auto cols = static_cast<int64_t>(t.ne[0]);
  const uint64_t rows = t.n_elements / t.ne[0];
  const uint64_t row_bytes = quant::quantized_row_bytes(t.type, cols);
  const auto data = file.tensor_data(t);
  std::vector<float> row(static_cast<size_t>(cols));
  for (uint64_t r = 0; r < rows; ++r) {
    quant::dequantize_row(t.type, data.data() + r * row_bytes, row.data(), cols);
    for (int64_t j = 0; j < cols; ++j) {
      column_max[static_cast<size_t>(j)] =
          std::max(column_max[static_cast<size_t>(j)], std::fabs(row[static_cast<size_t>(j)]));
    }
  }
}

// A 2-D tensor of `width` columns that quantize can read, or nullptr.
const gguf::TensorInfo* matrix(const gguf::GgufFile& file, const std::string& name,
                               uint64_t width) {
  const gguf::TensorInfo* t = file.find_tensor(name);
  if (!t || t->n_dims != 2 || t->ne[0] != width || !quant::can_dequantize(t->type)) return nullptr;
  return t;
}

// One group (see plan_smoothing); false (nothing planned) when a tensor is missing or the input
// unseen.
bool plan_group(const gguf::GgufFile& file, const ActivationRanges& ranges, double alpha,
                const ScalingGroup& group, TensorRescales& out) {
  const std::vector<float>* x_max = ranges.find(group.consumers.front());
  if (!x_max) return false;
  const uint64_t width = x_max->size();
  if (!producer_fits(file, group, width)) return false;
  std::vector<float> w_max(width, 0.0f);
  for (const std::string& name : group.consumers) {
    const gguf::TensorInfo* t = matrix(file, name, width);
    if (!t) return false;
    raise_column_max(file, *t, w_max);
  }
  std::vector<float> s(width, 1.0f);
  for (size_t j = 0; j < width; ++j) {
    const double m = (*x_max)[j];
    const double w = w_max[j];
    if (!(m > 0.0 && w > 0.0)) continue;
    const double factor = std::pow(m, alpha) / std::pow(w, 1.0 - alpha);
    // A factor that does not survive f32 (an activation overflowed in calibration) or would
    // crush the producer's scale to nothing leaves the channel as it is.
    if (std::isfinite(factor) && factor > 1e-30 && factor < 1e30) s[j] = static_cast<float>(factor);
  }
  fold_factors(group, s, out);
  return true;
}

std::vector<float>& scale_of(std::vector<float>& scale, size_t n) {
  if (scale.empty()) scale.assign(n, 1.0f);
  return scale;
}

}  // namespace

std::vector<ScalingGroup> scaling_groups(const gguf::GgufFile& file, int64_t layer) {
  const std::string p = "blk." + std::to_string(layer) + ".";
  std::vector<ScalingGroup> groups = {
      {p + "attn_norm.weight",
       false,
       {p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"}},
      {p + "ffn_norm.weight", false, {p + "ffn_gate.weight", p + "ffn_up.weight"}},
  };
  if (file.find_tensor(p + "ffn_gate.weight")) {
    groups.push_back({p + "ffn_up.weight", true, {p + "ffn_down.weight"}});
  }
  return groups;
}

bool producer_fits(const gguf::GgufFile& file, const ScalingGroup& group, uint64_t width) {
  const gguf::TensorInfo* p = file.find_tensor(group.producer);
  if (!p || !quant::can_dequantize(p->type)) return false;
  return group.producer_rows ? p->n_dims == 2 && p->n_elements / p->ne[0] == width
                             : p->n_dims == 1 && p->ne[0] == width;
}

void fold_factors(const ScalingGroup& group, const std::vector<float>& s, TensorRescales& out) {
  const size_t width = s.size();
  TensorRescale& producer = out[group.producer];
  std::vector<float>& producer_scale =
      scale_of(group.producer_rows ? producer.row : producer.column, width);
  for (size_t j = 0; j < width; ++j) producer_scale[j] /= s[j];
  for (const std::string& name : group.consumers) {
    std::vector<float>& column = scale_of(out[name].column, width);
    for (size_t j = 0; j < width; ++j) column[j] *= s[j];
  }
}

SmoothingPlan plan_smoothing(const gguf::GgufFile& file, const ActivationRanges& ranges,
                             double alpha) {
  if (!(alpha >= 0.0 && alpha <= 1.0)) {
    throw Error(Error::Kind::kInvalidArgument,
                "smoothing: alpha " + std::to_string(alpha) + " is not in [0, 1]");
  }
  std::vector<int64_t> layers;
  for (const gguf::TensorInfo& t : file.tensors()) {
    const auto layer = layer_of(t.name);
    if (layer && std::find(layers.begin(), layers.end(), *layer) == layers.end()) {
      layers.push_back(*layer);
    }
  }
  std::sort(layers.begin(), layers.end());
  SmoothingPlan plan;
  for (int64_t layer : layers) {
    for (const ScalingGroup& group : scaling_groups(file, layer)) {
      plan.n_groups += plan_group(file, ranges, alpha, group, plan.rescales);
    }
  }
  return plan;
}

}  // namespace llms::quantize
