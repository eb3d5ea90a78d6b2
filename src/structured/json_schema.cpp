// structured/json_schema: the entry points. See json_schema.h.
#include "structured/json_schema.h"

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
  // Depth is checked by the compiler; converting first is bounded by the caller's parser.
  return json_schema_to_grammar(nlohmann::ordered_json(schema), options, budget);
}

std::string any_json_object_grammar(const JsonSchemaOptions& options) {
  CompileBudget budget;
  return json_schema_to_grammar(nlohmann::ordered_json{{"type", "object"}}, options, budget);
}

}  // namespace llms::structured
