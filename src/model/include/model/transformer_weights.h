// model/transformer_weights: views of a decoder-only transformer's tensors inside a GGUF file.
//
// Contract: load() finds every tensor the architecture needs, checks each one's shape against
// the hyper-parameters and its type against what the kernels can multiply, and refuses the file
// (llms::Error kInvalidFile / kUnsupported, naming the tensor) otherwise. Matrices stay in the
// mmapped file in their GGML format; norms and biases are F32 vectors in place.
#pragma once

#include <vector>

#include "gguf/gguf_file.h"
#include "kernels/matmul.h"
#include "model/architecture.h"
#include "model/model_config.h"

namespace llms::model {

struct LayerWeights {
  const float* attn_norm = nullptr;
  kernels::QuantMatrix wq, wk, wv, wo;
  const float* bq = nullptr;  // qkv biases (qwen2) or nullptr
  const float* bk = nullptr;
  const float* bv = nullptr;
  const float* q_norm = nullptr;  // per-head norms (qwen3, gemma3) or nullptr
  const float* k_norm = nullptr;
  const float* post_attn_norm = nullptr;  // gemma3 or nullptr
  const float* ffn_norm = nullptr;
  kernels::QuantMatrix w_gate, w_up, w_down;
  const float* post_ffn_norm = nullptr;  // gemma3 or nullptr
};

struct TransformerWeights {
  kernels::QuantMatrix token_embd;  // n_vocab rows of n_embd
  const float* output_norm = nullptr;
  kernels::QuantMatrix output;      // token_embd when the output is tied
  std::vector<LayerWeights> layers;

  static TransformerWeights load(const gguf::GgufFile& file, const ModelConfig& config,
                                 const ArchitectureTraits& traits);
};

}  // namespace llms::model
