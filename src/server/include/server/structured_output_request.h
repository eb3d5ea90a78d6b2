// server/structured_output_request: what a request asks its output to match, in any of the
// spellings clients use, checked for shape (the constraint itself is compiled later):
// - OpenAI's response_format: {"type": "text"} (none), {"type": "json_object"}, {"type":
//   "json_schema", "json_schema": {"name", "schema", "strict", "description"}};
// - vLLM's structured_outputs: {"json": schema or its JSON text, "regex", "choice", "grammar",
//   "json_object": true} (one of them);
// - vLLM's older guided_json, guided_regex, guided_choice, guided_grammar.
// At most one of these may be given. Every refusal is a 400 naming the field.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace llms::server {

struct StructuredOutput {
  enum class Kind { kNone, kJsonObject, kJsonSchema, kRegex, kChoice, kGrammar };
  Kind kind = Kind::kNone;
  nlohmann::json schema;  // kJsonSchema
  // The schema with its keys in the order the client wrote them (objects are written with their
  // properties in that order), when the request text was at hand (see with_key_order).
  nlohmann::ordered_json ordered_schema;
  std::string text;                  // kRegex, kGrammar
  std::vector<std::string> choices;  // kChoice
  std::string param;  // the request field it came from, for errors found when compiling

  bool active() const { return kind != Kind::kNone; }
};

StructuredOutput parse_structured_output(const nlohmann::json& body);

// Fills so.ordered_schema from the request parsed with its keys in order (a JSON Schema's
// `properties` order is the order a model is asked to write them in; nlohmann::json sorts keys).
// `body` must be the request `so` was parsed from.
void with_key_order(const nlohmann::ordered_json& body, StructuredOutput& so);

}  // namespace llms::server
