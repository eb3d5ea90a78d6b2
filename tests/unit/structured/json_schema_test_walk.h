// Helpers of the JSON Schema compiler's tests: compile a schema, walk texts through the grammar
// engine byte by byte, and write an instance with its keys in the order the compiler emits them.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "structured/grammar.h"
#include "structured/json_schema.h"
#include "structured/matcher.h"
#include "structured/vocabulary.h"
#include "util/error.h"

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

// Every text of `accepted` is a complete sentence of the schema's grammar, none of `rejected` is.
inline void expect_walks(const Json& schema, const std::vector<std::string>& accepted,
                         const std::vector<std::string>& rejected,
                         const JsonSchemaOptions& options = compact_options()) {
  const CompiledSchema compiled = compile_schema(schema, options);
  for (const std::string& text : accepted) {
    EXPECT_TRUE(compiled.accepts(text))
        << "should accept: " << text << "\nschema: " << schema.dump() << "\ngrammar:\n"
        << compiled.text.substr(0, 4000);
  }
  for (const std::string& text : rejected) {
    EXPECT_FALSE(compiled.accepts(text))
        << "should reject: " << text << "\nschema: " << schema.dump() << "\ngrammar:\n"
        << compiled.text.substr(0, 4000);
  }
}

// Compiling `schema` is refused with kInvalidArgument and a message holding each of `parts`.
inline void expect_refused(const Json& schema, const std::vector<std::string>& parts,
                           const JsonSchemaOptions& options = {}) {
  CompileBudget budget;
  try {
    const std::string grammar = json_schema_to_grammar(schema, options, budget);
    ADD_FAILURE() << "expected a refusal for " << schema.dump() << ", got:\n"
                  << grammar.substr(0, 2000);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument) << e.what();
    for (const std::string& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "message lacks '" << part << "': " << e.what();
    }
  }
}

}  // namespace llms::structured::testing
