// quantize/awq: AWQ-style activation-aware scaling (Lin et al., "AWQ: Activation-aware Weight
// Quantization for LLM Compression and Acceleration", 2023): input channels that carry large
// activations are scaled up in the weights before rounding, so that their weights lose less, and
// the inverse scale is folded into what produces the input; the model computes the same function
// before quantization.
//
// The groups and the folding are SmoothQuant's (quantize/smoothing.h): a layer's attention norm
// -> q, k, v; its feed-forward norm -> gate, up; up's rows -> down (gated feed-forwards only). For
// each group the factor is s_j = a_j^alpha, a_j the root mean square of input channel j over the
// calibration rows (sqrt(H_jj / rows), from the Hessian GPTQ gathers; the paper uses the mean
// |x_j|), floored at 1e-4 of the largest a_j, normalized so that max(s) * min(s) = 1 and kept
// within [1/64, 64] (the producer is divided by s: up's quantized rows must keep block scales in
// f16's normal range), with alpha searched over {0, 1/grid, ...,
// (grid-1)/grid} for the least output error of the group's weights rounded to their planned type:
//   loss(alpha) = sum over the group's weight rows w of (w^ - w)^T H (w^ - w),
//   w^ = dequantize(quantize(w * s)) / s,
// which is exactly the summed squared error of that row's output over the calibration rows.
// alpha = 0 (no scaling: round-to-nearest) is among the candidates, so a group's loss never
// exceeds round-to-nearest's. The loss is evaluated on at most kLossRows rows of the group,
// evenly strided (the same rows for every alpha), because each row costs n^2 multiply-adds
// (ffn_down of the 0.5B: n = 4864). Not done: the paper's weight-clipping search.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "quantize/hessian.h"
#include "quantize/quantize_plan.h"
#include "quantize/smoothing.h"

namespace llms {
class ThreadPool;
}

namespace llms::quantize {

struct AwqOptions {
  int grid = 20;               // alpha candidates: 0, 1/grid, ..., (grid-1)/grid
  ThreadPool* pool = nullptr;  // rows quantized on it when given
  static constexpr int64_t kLossRows = 256;
  static constexpr double kMaxFactor = 64.0;  // factors are kept within [1/64, 64]
};

struct AwqGroup {
  std::string producer;  // the norm (or up) the inverse factor is folded into
  double alpha = 0;      // chosen
  double loss_rtn = 0;   // loss at alpha = 0 (round-to-nearest), over the sampled rows
  double loss = 0;       // loss at the chosen alpha
};

struct AwqPlan {
  TensorRescales rescales;
  std::vector<AwqGroup> groups;
};

// The Hessian of a weight's input (quantize/hessian.h), or nullptr.
using AwqHessianLookup = std::function<const HessianSet::Entry*(const std::string& weight)>;

// The weights AWQ needs a Hessian for in `file`: each layer's q, gate and down (one per group
// input; q stands for k and v, gate for up), ordered by layer, as GptqTensor entries.
std::vector<GptqTensor> awq_tensors(const gguf::GgufFile& file);

// Searches and adds one layer's groups to `out` (a group whose tensors, producer or Hessian are
// missing, or whose planned type cannot be quantized, is skipped). grid >= 1
// (kInvalidArgument otherwise).
void plan_awq_layer(const gguf::GgufFile& file, const QuantizePlan& plan, int64_t layer,
                    const AwqHessianLookup& hessian, const AwqOptions& options, AwqPlan& out);

}  // namespace llms::quantize
