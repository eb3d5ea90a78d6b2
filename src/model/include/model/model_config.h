// model/model_config: an architecture's hyper-parameters as read from a model file.
//
// Contract: from_gguf() reads the `<arch>.*` keys every transformer file carries and refuses a
// file whose required keys are missing, of the wrong type or out of range, naming the key. It
// knows the per-architecture facts a file leaves implicit (e.g. Gemma 3's pattern of one global
// layer in six). It does not load weights.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/hf_model_dir.h"
#include "kv/kv_budget.h"

namespace llms::model {

struct ModelConfig {
  std::string architecture;  // "llama", "qwen2", "qwen3", "gemma3", ...
  std::string name;          // general.name, if present
  uint64_t n_layers = 0;
  uint64_t n_embd = 0;
  uint64_t n_ff = 0;
  uint64_t n_heads = 0;
  std::vector<uint64_t> n_kv_heads;  // per layer (files may give one value for all)
  uint64_t head_dim_k = 0;
  uint64_t head_dim_v = 0;
  uint64_t n_ctx_train = 0;
  uint64_t n_vocab = 0;
  double rope_freq_base = 10000.0;
  std::string rope_scaling_type;  // "none", "linear", "yarn", ...
  double rope_scaling_factor = 1.0;
  double rms_norm_eps = 1e-6;
  uint64_t sliding_window = 0;     // 0: no sliding-window layers
  std::vector<bool> is_sliding;    // per layer
  bool has_output_weight = false;  // false: output projection tied to the token embedding

  static ModelConfig from_gguf(const gguf::GgufFile& file);
  // From a Hugging Face config.json (Gemma 3's nested text_config included); the architecture is
  // the GGUF name ("qwen2", "llama", "gemma3", ...) for the model_type.
  static ModelConfig from_hf(const gguf::HfModelDir& dir);

  // The KV-cache shape of this model (per layer heads, widths and windows).
  kv::KvShape kv_shape() const;
  uint64_t max_kv_heads() const;
};

}  // namespace llms::model
