// Shared by the server unit tests: a four-token byte-level tokenizer for response builders.
#pragma once

#include "tokenizer/tokenizer.h"

namespace llms::server::testing {

inline tokenizer::Tokenizer tiny_tokenizer() {
  tokenizer::VocabSpec spec;
  spec.kind = tokenizer::ModelKind::kByteLevelBpe;
  spec.pre = "qwen2";
  spec.tokens = {"a", "b", "c", "!"};
  return tokenizer::Tokenizer::from_spec(spec);
}

}  // namespace llms::server::testing
