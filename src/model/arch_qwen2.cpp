// Qwen2 / Qwen2.5: Llama's block plus biases on Q, K and V; NeoX-style RoPE (rotate halves).
#include "model/architecture.h"

namespace llms::model {

ArchitectureTraits qwen2_traits() {
  ArchitectureTraits t;
  t.name = "qwen2";
  t.rope = RopeLayout::kHalves;
  t.has_qkv_bias = true;
  return t;
}

}  // namespace llms::model
