// Helpers of the JSON Schema compiler's tests: compile a schema, walk texts through the grammar
// engine byte by byte, and write an instance with its keys in the order the compiler emits them.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "structured/grammar.h"
#include "structured/json_schema.h"
#include "structured/matcher.h"
#include "structured/vocabulary.h"

namespace llms::structured::testing {

using Json = nlohmann::ordered_json;

// A vocabulary of the 256 single bytes: walking it is walking the text.
inline std::shared_ptr<const TokenIndex> byte_index() {
  static const std::shared_ptr<const TokenIndex> index = [] {
    Vocabulary vocabulary;
    for (int b = 0; b < 256; ++b) {
      vocabulary.token_bytes.push_back(std::string(1, static_cast<char>(b)));
      vocabulary.is_special.push_back(0);
    }
    return build_token_index(std::move(vocabulary));
  }();
  return index;
}

// A schema compiled into grammar text and then into the engine's automaton.
struct CompiledSchema {
  std::string text;
  std::shared_ptr<const CompiledGrammar> grammar;

  // True when `instance_text` is a complete sentence of the grammar.
  bool accepts(const std::string& instance_text) const {
    Matcher matcher(grammar);
    return matcher.accept_bytes(instance_text) && matcher.is_accepting();
  }
};

inline CompiledSchema compile_schema(const Json& schema, const JsonSchemaOptions& options = {}) {
  // Generous time, default work: results must not depend on how busy the machine is.
  CompileBudget budget(CompileLimits{std::chrono::seconds(120), CompileLimits{}.max_work});
  CompiledSchema out;
  out.text = json_schema_to_grammar(schema, options, budget);
  out.grammar =
      compile_grammar(out.text, byte_index(), CompileLimits{std::chrono::seconds(20), 20'000'000});
  return out;
}

inline JsonSchemaOptions compact_options() {
  JsonSchemaOptions options;
  options.whitespace = JsonSchemaOptions::Whitespace::kCompact;
  return options;
}

}  // namespace llms::structured::testing
