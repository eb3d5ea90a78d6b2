// Llama 2/3, TinyLlama, Mistral-style models: the plain pre-norm decoder. llama.cpp's converter
// permutes Q and K so that RoPE rotates adjacent pairs.
#include "model/architecture.h"

namespace llms::model {

ArchitectureTraits llama_traits() {
  ArchitectureTraits t;
  t.name = "llama";
  t.rope = RopeLayout::kAdjacentPairs;
  return t;
}

}  // namespace llms::model
