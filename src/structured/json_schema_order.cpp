// structured/json_schema_order: an instance's keys in the order the grammar writes them.
#include <algorithm>

#include "json_schema_compiler.h"
#include "structured/json_schema.h"
#include "util/error.h"

namespace llms::structured {

namespace jsonschema {

namespace {

constexpr int kMaxDepth = 256;

// `value` with its objects' keys in the order of `model` (an equal value).
Json order_like_value(const Json& value, const Json& model, int depth) {
  if (depth > kMaxDepth) return value;
  if (value.is_object() && model.is_object()) {
    Json out = Json::object();
    for (auto it = model.begin(); it != model.end(); ++it) {
      if (value.contains(it.key()))
        out[it.key()] = order_like_value(value[it.key()], it.value(), depth + 1);
    }
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (!out.contains(it.key())) out[it.key()] = it.value();
    }
    return out;
  }
  if (value.is_array() && model.is_array() && value.size() == model.size()) {
    Json out = Json::array();
    for (size_t i = 0; i < value.size(); ++i)
      out.push_back(order_like_value(value[i], model[i], depth + 1));
    return out;
  }
  return value;
}

Json order(SchemaCompiler& compiler, const SchemaSet& set, const Json& value, int depth) {
  if (depth > kMaxDepth || !value.is_structured()) return value;
  const Shape* chosen = nullptr;
  for (const Shape& shape : compiler.shapes_of(set)) {
    bool admitted = false;
    try {
      admitted = compiler.admits(shape, value, 0);
    } catch (const Error&) {
      admitted = false;
    }
    if (admitted) {
      chosen = &shape;
      break;
    }
  }
  if (chosen == nullptr) return value;
  if (chosen->values) {
    for (const Json& model : *chosen->values) {
      if (json_equal(model, value)) return order_like_value(value, model, depth);
    }
    return value;
  }
  if (value.is_array()) {
    Json out = Json::array();
    for (size_t i = 0; i < value.size(); ++i) {
      const SchemaSet& item =
          i < chosen->array.prefix.size() ? chosen->array.prefix[i] : chosen->array.rest;
      out.push_back(order(compiler, item, value[i], depth + 1));
    }
    return out;
  }
  std::vector<std::string> names;
  for (const auto& property : chosen->object.properties) names.push_back(property.name);
  for (const std::string& name : chosen->object.required) names.push_back(name);
  for (auto it = value.begin(); it != value.end(); ++it) names.push_back(it.key());
  Json out = Json::object();
  for (const std::string& name : names) {
    if (!value.contains(name) || out.contains(name)) continue;
    out[name] =
        order(compiler, compiler.property_schema(chosen->object, name), value[name], depth + 1);
  }
  return out;
}

}  // namespace

}  // namespace jsonschema

nlohmann::ordered_json order_keys_like_grammar(const nlohmann::ordered_json& schema,
                                               const nlohmann::ordered_json& instance,
                                               const JsonSchemaOptions& options) {
  CompileBudget budget(CompileLimits{std::chrono::seconds(10), 50'000'000});
  jsonschema::SchemaCompiler compiler(schema, options, budget);
  return jsonschema::order(compiler, jsonschema::SchemaSet::of(compiler.document().root()),
                           instance, 0);
}

}  // namespace llms::structured
