// model/architecture: what distinguishes one decoder-only transformer family from another.
//
// All supported families share one forward pass (transformer.cpp); each family's file states its
// differences here as data: rotary layout, biases, norms, activation, embedding scale, sliding
// windows. Adding a family means adding one file that returns its traits.
#pragma once

#include <string_view>

namespace llms::model {

struct ModelConfig;  // model/model_config.h

enum class RopeLayout {
  kAdjacentPairs,
  kHalves
};  // llama GGUF rotates (x0,x1); NeoX (x_i, x_i+d/2)
enum class FeedForwardActivation { kSilu, kGeluTanh };

struct ArchitectureTraits {
  std::string_view name;
  RopeLayout rope = RopeLayout::kAdjacentPairs;
  FeedForwardActivation activation = FeedForwardActivation::kSilu;
  bool has_qkv_bias = false;      // qwen2
  bool has_qk_norm = false;       // qwen3, gemma3: RMSNorm of each q and k head before RoPE
  bool has_post_norms = false;    // gemma3: norms after attention and after the FFN
  bool scales_embedding = false;  // gemma3: embeddings times sqrt(n_embd)
  bool ties_output_by_default = false;
  float local_rope_base = 0.0f;  // gemma3: RoPE base of sliding-window layers (0 = same)
};

// Throws llms::Error(kUnsupported) naming the architecture when it is not one we run.
const ArchitectureTraits& architecture_traits(std::string_view architecture);

// The family's traits of a configuration the forward pass can run (the CPU's and the GPU's):
// throws llms::Error(kUnsupported), before any weight is read, naming the architecture or each
// thing in config.unsupported.
const ArchitectureTraits& runnable_traits(const ModelConfig& config);
// Whether sliding-window layers turn by a RoPE base of their own (Gemma 3).
bool has_local_rope(const ModelConfig& config, const ArchitectureTraits& traits);

ArchitectureTraits llama_traits();
ArchitectureTraits qwen2_traits();
ArchitectureTraits qwen3_traits();
ArchitectureTraits gemma3_traits();

}  // namespace llms::model
