// quantize/smoothing: SmoothQuant-style smoothing (Xiao et al., "SmoothQuant: Accurate and
// Efficient Post-Training Quantization for Large Language Models", 2022): activation outliers,
// which concentrate in a few input channels, are moved into the weights by a per-channel factor,
// so that 8-bit activations lose less; the model computes the same function before quantization.
//
// For a weight W reading input x, x_j / s_j times W[:, j] * s_j is the same product. The division
// is folded into what produces x, where that is an elementwise scale:
//   - a layer's attention norm (attn_norm.weight) feeds its q, k and v: norm_j /= s_j and
//     q/k/v[:, j] *= s_j;
//   - its feed-forward norm (ffn_norm.weight) feeds gate and up: the same with gate and up;
//   - ffn_down reads act(gate) * up elementwise, which is linear in up: up[j, :] /= s_j and
//     down[:, j] *= s_j.
//   (only in a gated feed-forward).
// (The attention output projection is not smoothed: its input channels come from v's rows, but
// with grouped-query attention one v channel feeds the same channel of several query heads, so
// their factors would have to be tied; not built.) With m_j the largest |x_j| seen in
// calibration and w_j the largest |W[i, j]| over the consumers' rows, s_j = m_j^alpha /
// w_j^(1 - alpha); s_j = 1 where either is 0 or the factor is not a usable f32. A group is smoothed
// only when all its tensors exist with matching shapes and its input was seen.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.h"

namespace llms::quantize {

// The largest |x_j| of each weight input seen, keyed by hessian_input_key (q/k/v share one).
struct ActivationRanges {
  std::map<std::string, std::vector<float>, std::less<>> max_abs;
  // The ranges of a weight's input, or nullptr.
  const std::vector<float>* find(std::string_view weight) const;
};

class ActivationRangeCollector {
 public:
  // Takes the column-wise max |x| of rows (n_rows x n_columns, row-major) into the weight's input's
  // ranges; "blk.*" weights only. Throws llms::Error(kInvalidArgument) when the input was seen
  // with another width.
  void add(std::string_view weight, const float* rows, int64_t n_rows, int64_t n_columns);
  ActivationRanges take() { return std::move(ranges_); }

 private:
  ActivationRanges ranges_;
};

// How a tensor's values change before quantization: value[r][c] *= row[r] * column[c] (an empty
// vector scales by 1). A 1-D tensor is one row.
struct TensorRescale {
  std::vector<float> row;
  std::vector<float> column;
};
using TensorRescales = std::map<std::string, TensorRescale, std::less<>>;

// Weights that read one input whose producer applies a per-channel scale: dividing the producer's
// channel j by s_j and multiplying the consumers' column j by s_j leaves the layer's function as
// it was. Shared by SmoothQuant (below) and AWQ (quantize/awq.h).
struct ScalingGroup {
  std::string producer;  // a 1-D norm, or (producer_rows) a matrix whose rows are the channels
  bool producer_rows = false;
  std::vector<std::string> consumers;
};

// A layer's groups, in order: attention norm -> q/k/v, feed-forward norm -> gate/up, and, only in
// a gated feed-forward (act(gate) * up is linear in up), up's rows -> down.
std::vector<ScalingGroup> scaling_groups(const gguf::GgufFile& file, int64_t layer);

// Whether the group's producer is readable and has `width` channels (a norm of that length, or a
// matrix of that many rows).
bool producer_fits(const gguf::GgufFile& file, const ScalingGroup& group, uint64_t width);

// The producer's channels divided by s, the consumers' columns multiplied by s, composed with
// whatever `out` already holds for them.
void fold_factors(const ScalingGroup& group, const std::vector<float>& s, TensorRescales& out);

struct SmoothingPlan {
  TensorRescales rescales;
  int64_t n_groups = 0;  // norm or up/down pairs smoothed
};

// The rescales of every smoothable group of `file` (see above), reading the weights' column
// maxima from the file. alpha in [0, 1] (kInvalidArgument otherwise).
SmoothingPlan plan_smoothing(const gguf::GgufFile& file, const ActivationRanges& ranges,
                             double alpha);

}  // namespace llms::quantize
