// model/model_config: an architecture's hyper-parameters as read from a model file.
//
// Contract: from_gguf() reads the `<arch>.*` keys every transformer file carries and refuses a
// file whose required keys are missing, of the wrong type or out of range, naming the key. It
// knows the per-architecture facts a file leaves implicit (e.g. Gemma 3's pattern of one global
// layer in six). It does not load weights, except the few RoPE frequency factors some GGUF files
// store as the tensor rope_freqs.weight.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/hf_model_dir.h"
#include "kv/kv_budget.h"
#include "kv/kv_groups.h"

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
  // RoPE scaling (model/rope.h turns these into frequencies). The type is "none", "linear",
  // "yarn", "llama3" or whatever else the file names (refused when the model is loaded to run).
  std::string rope_scaling_type = "none";
  double rope_scaling_factor = 1.0;
  uint64_t rope_original_context = 0;  // yarn, llama3: the context the model was trained for
  double rope_yarn_beta_fast =
      32.0;  // yarn: pairs turning more often than this keep their frequency
  double rope_yarn_beta_slow = 1.0;  // yarn: pairs turning less often are interpolated
  bool rope_yarn_truncate = true;    // yarn: round the ramp's ends to whole pairs
  std::optional<double> rope_yarn_attention_factor;  // yarn: replaces 0.1 ln(factor) + 1
  double rope_yarn_mscale = 0.0;                     // yarn (HF mscale / mscale_all_dim; 0 = unset)
  double rope_yarn_mscale_all_dim = 0.0;
  double rope_llama3_low_freq_factor = 1.0;   // llama3
  double rope_llama3_high_freq_factor = 4.0;  // llama3
  // GGUF's rope_freqs.weight (llama.cpp's form of Llama 3 scaling): pair i's frequency is
  // divided by rope_freq_divisors[i]. Empty: none.
  std::vector<float> rope_freq_divisors;
  uint64_t rope_dimension_count = 0;  // rotated width per head; 0 = the whole head
  // What the file asks for that the forward pass does not implement, one phrase each (e.g.
  // "mixture of experts ('llama.expert_count' = 8)"); the Transformer refuses a non-empty list.
  std::vector<std::string> unsupported;
  double rms_norm_eps = 1e-6;
  uint64_t sliding_window = 0;   // 0: no sliding-window layers
  std::vector<bool> is_sliding;  // per layer
  // Attention sinks plus a recent window (StreamingLLM; off while streaming_window is 0): every
  // full-attention layer attends to the first attention_sinks tokens and the last
  // streaming_window ones, scoring the sinks as if they sat just before the window (positions in
  // that cache), so a stream can go on past the training context. Set by
  // set_streaming_attention(); sliding-window layers keep their own window.
  uint64_t streaming_window = 0;
  uint64_t attention_sinks = 0;
  bool has_output_weight = false;  // false: output projection tied to the token embedding

  static ModelConfig from_gguf(const gguf::GgufFile& file);
  // From a Hugging Face config.json (Gemma 3's nested text_config included); the architecture is
  // the GGUF name ("qwen2", "llama", "gemma3", ...) for the model_type.
  static ModelConfig from_hf(const gguf::HfModelDir& dir);

  // Validates and sets the policy above: window >= 1 (0 with sinks 0: off), sinks >= 0 and
  // window + sinks within the training context. Throws llms::Error(kInvalidArgument) naming
  // streaming_window or attention_sinks.
  void set_streaming_attention(int64_t window, int64_t sinks);
  // The window a layer attends over (0: the whole context) and the sinks it keeps besides.
  uint64_t attention_window(size_t layer) const {
    return is_sliding[layer] ? sliding_window : streaming_window;
  }
  uint64_t attention_sinks_of(size_t layer) const {
    return is_sliding[layer] ? 0 : attention_sinks;
  }

  // The KV-cache shape of this model (per layer heads, widths and windows).
  kv::KvShape kv_shape() const;
  // Its layers grouped by sliding window (kv/kv_groups.h), so windowed layers give blocks back.
  kv::KvGroupLayout windowed_kv_layout() const;
  // Every layer in one group: blocks are held for the whole context (no window frees any).
  kv::KvGroupLayout single_kv_layout() const;
  uint64_t max_kv_heads() const;
};

}  // namespace llms::model
