// structured/json_schema: the entry points. See json_schema.h.
#include "structured/json_schema.h"

#include <utility>
#include <vector>

#include "json_schema_compiler.h"
#include "json_schema_grammar.h"

namespace llms::structured {

namespace jsonschema {

SchemaCompiler::SchemaCompiler(const Json& root, const JsonSchemaOptions& options,
                               CompileBudget& budget)
    : options_(options), budget_(budget), document_(root, budget) {}

std::string SchemaCompiler::compile() {
  return GrammarBuilder(*this).build(SchemaSet::of(document_.root()));
}

}  // namespace jsonschema

std::string json_schema_to_grammar(const nlohmann::ordered_json& schema,
                                   const JsonSchemaOptions& options, CompileBudget& budget) {
  if (options.max_whitespace < 0 || options.max_whitespace > 10000) {
    jsonschema::SchemaCompiler::refuse(
        "JSON Schema options: max_whitespace must be within 0..10000");
  }
  jsonschema::SchemaCompiler compiler(schema, options, budget);
  return compiler.compile();
}

std::string json_schema_to_grammar(const nlohmann::json& schema, const JsonSchemaOptions& options,
                                   CompileBudget& budget) {
  // The conversion below recurses: check the depth first, without recursion.
  std::vector<std::pair<const nlohmann::json*, int>> stack{{&schema, 0}};
  while (!stack.empty()) {
    auto [json, depth] = stack.back();
    stack.pop_back();
    if (depth > jsonschema::SchemaDocument::kMaxDepth) {
      jsonschema::SchemaCompiler::refuse("JSON Schema: the schema nests deeper than " +
                                         std::to_string(jsonschema::SchemaDocument::kMaxDepth) +
                                         " levels");
    }
    if (json->is_structured()) {
      for (const nlohmann::json& child : *json) stack.emplace_back(&child, depth + 1);
    }
  }
  return json_schema_to_grammar(nlohmann::ordered_json(schema), options, budget);
}

std::string any_json_object_grammar(const JsonSchemaOptions& options) {
  CompileBudget budget;
  return json_schema_to_grammar(nlohmann::ordered_json{{"type", "object"}}, options, budget);
}

}  // namespace llms::structured
