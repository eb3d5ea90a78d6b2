// model/rope: the rotary position embedding of a model as numbers: one inverse frequency per
// rotated pair and the factor cos and sin are multiplied by.
//
// Contract: rope_frequencies() turns a ModelConfig's RoPE fields into the frequencies that
// Hugging Face transformers computes for the same model (modeling_rope_utils: "default",
// "linear", "yarn", "llama3"), with GGUF's per-pair divisors (rope_freqs.weight) applied first,
// as llama.cpp applies them. A scaling type it does not implement throws
// llms::Error(kUnsupported) naming it, so a model is refused at load rather than run with the
// wrong angles. Pair i of a token at position p turns by p * inv_freq[i]; YaRN's
// attention_factor multiplies both q and k after rotation (so the attention logits by its
// square), as transformers and llama.cpp do.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_config.h"

namespace llms::model {

struct RopeFrequencies {
  std::vector<double> inv_freq;  // head_dim / 2 values
  double attention_factor = 1.0;
};

// The scaling types the forward pass implements ("none" included).
bool is_supported_rope_scaling(const std::string& type);

// `base`: the layer's RoPE base; `scaled`: false for layers that ignore the model's scaling
// (Gemma 3's sliding-window layers run unscaled with their own base).
RopeFrequencies rope_frequencies(const ModelConfig& config, double base, bool scaled);

// cos[i] = cos(pos * inv_freq[i]) * attention_factor, sin likewise, in double then rounded.
void rope_cos_sin(const RopeFrequencies& f, int64_t pos, float* cos, float* sin);

}  // namespace llms::model
