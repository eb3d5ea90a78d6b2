// Qwen3: no QKV biases, but an RMSNorm over each query and key head before RoPE.
#include "model/architecture.h"

namespace llms::model {

ArchitectureTraits qwen3_traits() {
  ArchitectureTraits t;
  t.name = "qwen3";
  t.rope = RopeLayout::kHalves;
  t.has_qk_norm = true;
  return t;
}

}  // namespace llms::model
