// Gemma 3: QK norms, extra norms after attention and after the FFN, GeGLU (tanh GELU), token
// embeddings scaled by sqrt(n_embd), output tied to the embedding, and five sliding-window
// layers per global one whose RoPE base is 10,000 (the global layers use the file's base).
// GGUF files store Gemma's norm weights with the +1 already added, so norms are plain RMSNorm.
#include "model/architecture.h"

namespace llms::model {

ArchitectureTraits gemma3_traits() {
  ArchitectureTraits t;
  t.name = "gemma3";
  t.rope = RopeLayout::kHalves;
  t.activation = FeedForwardActivation::kGeluTanh;
  t.has_qk_norm = true;
  t.has_post_norms = true;
  t.scales_embedding = true;
  t.ties_output_by_default = true;
  t.local_rope_base = 10000.0f;
  return t;
}

}  // namespace llms::model
