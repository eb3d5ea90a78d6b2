// server/constraint_compiler: a request's StructuredOutput compiled into the token constraint its
// samples follow (structured/ does the work).
//
// Built once per model: the vocabulary's bytes, special tokens and end-of-generation tokens go
// into the structured::TokenIndex every grammar masks over. compile() maps json_object and
// json_schema (through the JSON Schema compiler), regex, choice and grammar to a compiled grammar;
// equal requests share one (a small cache: clients repeat their schemas). Compilation is bounded
// (structured::CompileLimits: a second and a work budget); anything refused, too large or
// malformed is an ApiError 400 naming the request field it came from. Thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "sampling/token_constraint.h"
#include "server/structured_output_request.h"
#include "structured/vocabulary.h"

namespace llms::tokenizer {
class Tokenizer;
}

namespace llms::server {

class ConstraintCompiler {
 public:
  // n_logit_rows: the model's logits row width (at least the tokenizer's vocabulary).
  ConstraintCompiler(const tokenizer::Tokenizer& tok, int32_t n_logit_rows);

  // Null for an inactive StructuredOutput.
  std::shared_ptr<const sampling::TokenConstraintFactory> compile(const StructuredOutput& so);

  // The same for grammar text this server wrote itself (tool calls); errors name `param`.
  std::shared_ptr<const sampling::TokenConstraintFactory> compile_grammar_text(
      const std::string& grammar, const std::string& param);

  const structured::TokenIndex& index() const { return *index_; }

 private:
  // The cached factory of `key`, if any and still reusable (an exhausted one is dropped).
  std::shared_ptr<const sampling::TokenConstraintFactory> cached(const std::string& key);
  void remember(const std::string& key, std::shared_ptr<const sampling::TokenConstraintFactory> f);

  std::shared_ptr<const structured::TokenIndex> index_;
  mutable std::mutex mutex_;
  // LRU: keys most recent first.
  std::list<std::string> order_;
  std::unordered_map<std::string, std::shared_ptr<const sampling::TokenConstraintFactory>> cache_;
  static constexpr size_t kCacheSize = 64;
};

// The vocabulary as structured/ sees it: one entry per logits row.
structured::Vocabulary structured_vocabulary(const tokenizer::Tokenizer& tok, int32_t n_logit_rows);

}  // namespace llms::server
