// model/key_smoothing: per-dimension factors that even out the magnitudes of an int8 cache's
// keys before each key is quantized with one scale.
//
// Why: an int8 key shares one scale across its dimensions, and some models have a few key
// dimensions far larger than the rest (Qwen2's key biases, QK-norm weights): that outlier sets
// the scale and the others keep only a few levels. Measured on Qwen2.5 0.5B over GPL-3 at ctx
// 512, per-token int8 keys cost +11 % perplexity and a mean KL of 0.035 against the f16 cache,
// while int8 values alone cost nothing measurable. So keys are stored as k_e / c_e and the
// query is multiplied by c_e when it meets them (both after RoPE): q . k is unchanged, and k / c
// has even dimensions. c is fixed per (layer, KV head, dimension), so every sequence and every
// shared prefix block uses the same one. It is equal within each pair of dimensions that RoPE
// rotates together: the rotation moves a pair's energy between its two dimensions from one
// position to the next, so the pair's joint magnitude is what holds across positions.
//
// Contract: KeyStatistics accumulates the keys written during a calibration pass (sum of
// squares per layer, KV head and dimension); smoothing_factors() turns them into c =
// (root mean square of the rotation pair) ^ 0.5, the square root being a middle point between no
// smoothing and full equalisation that held up when the calibration text differed from the
// scored one; pairs far below their head's largest are floored at 1e-4 of it so no factor is 0.
// calibration_tokens() is the fixed pseudo-random token sequence the pass runs (no tokenizer
// needed; the same for every run, so a model gets the same factors on one machine, and up to
// the last bits of float rounding across ISAs).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ops.h"
#include "model/model_config.h"

namespace llms::model {

class KeyStatistics {
 public:
  explicit KeyStatistics(const ModelConfig& config);
  void add(size_t layer, uint64_t kv_head, const float* key);
  // Mean square of dimension e of (layer, head) over the keys added (0 if none).
  double mean_square(size_t layer, uint64_t kv_head, uint64_t e) const;
  uint64_t head_dim() const { return head_dim_; }

 private:
  size_t index(size_t layer, uint64_t kv_head) const;
  uint64_t head_dim_;
  std::vector<size_t> layer_start_;  // in heads
  std::vector<double> sum_squares_;  // [head][dim]
  std::vector<uint64_t> count_;      // per head
};

// Factors laid out [layer][kv_head][dim] (heads of layer 0 first), pairs as `mode` rotates them.
std::vector<float> smoothing_factors(const ModelConfig& config, const KeyStatistics& stats,
                                     kernels::RopeMode mode);

std::vector<int32_t> calibration_tokens(int32_t n_vocab, int32_t n);

}  // namespace llms::model
