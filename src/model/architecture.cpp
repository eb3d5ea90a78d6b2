#include "model/architecture.h"

#include <string>

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

}  // namespace llms::model
