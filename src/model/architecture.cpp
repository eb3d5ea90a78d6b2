#include "model/architecture.h"

#include <algorithm>
#include <string>

#include "model/model_config.h"
#include "util/error.h"

namespace llms::model {

const ArchitectureTraits& architecture_traits(std::string_view architecture) {
  static const ArchitectureTraits kAll[] = {llama_traits(), qwen2_traits(), qwen3_traits(),
                                            gemma3_traits()};
  for (const auto& t : kAll) {
    if (t.name == architecture) return t;
  }
  throw Error(Error::Kind::kUnsupported,
              "architecture '" + std::string(architecture) +
                  "' is not supported (supported: llama, qwen2, qwen3, gemma3)");
}

const ArchitectureTraits& runnable_traits(const ModelConfig& c) {
  const ArchitectureTraits& traits = architecture_traits(c.architecture);
  if (!c.unsupported.empty()) {
    std::string what;
    for (const auto& u : c.unsupported) what += (what.empty() ? "" : "; ") + u;
    throw Error(
        Error::Kind::kUnsupported,
        "model '" + c.architecture + "' uses what the forward pass does not implement: " + what);
  }
  return traits;
}

bool has_local_rope(const ModelConfig& c, const ArchitectureTraits& t) {
  return t.local_rope_base > 0.0f &&
         std::find(c.is_sliding.begin(), c.is_sliding.end(), true) != c.is_sliding.end();
}

}  // namespace llms::model
