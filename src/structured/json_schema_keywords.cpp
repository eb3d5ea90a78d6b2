// structured/json_schema_keywords: see json_schema_keywords.h.
#include "json_schema_keywords.h"

#include <algorithm>
#include <cmath>

#include "json_schema_compiler.h"

namespace llms::structured::jsonschema {

bool is_annotation_keyword(const std::string& key) {
  // then/else without if do nothing; with if, they are read there.
  static const char* const kKeys[] = {"$schema",
                                      "$id",
                                      "id",
                                      "$anchor",
                                      "$comment",
                                      "$defs",
                                      "definitions",
                                      "title",
                                      "description",
                                      "default",
                                      "examples",
                                      "readOnly",
                                      "writeOnly",
                                      "deprecated",
                                      "contentEncoding",
                                      "contentMediaType",
                                      "contentSchema",
                                      "$vocabulary",
                                      "$dynamicAnchor",
                                      "$recursiveAnchor",
                                      "then",
                                      "else"};
  return std::any_of(std::begin(kKeys), std::end(kKeys), [&](const char* k) { return key == k; });
}

bool is_constraining_keyword(const std::string& key) {
  static const char* const kKeys[] = {"type",
                                      "enum",
                                      "const",
                                      "multipleOf",
                                      "minimum",
                                      "maximum",
                                      "exclusiveMinimum",
                                      "exclusiveMaximum",
                                      "minLength",
                                      "maxLength",
                                      "pattern",
                                      "format",
                                      "items",
                                      "prefixItems",
                                      "additionalItems",
                                      "minItems",
                                      "maxItems",
                                      "uniqueItems",
                                      "contains",
                                      "minContains",
                                      "maxContains",
                                      "unevaluatedItems",
                                      "properties",
                                      "patternProperties",
                                      "additionalProperties",
                                      "required",
                                      "propertyNames",
                                      "minProperties",
                                      "maxProperties",
                                      "dependentRequired",
                                      "dependentSchemas",
                                      "dependencies",
                                      "allOf",
                                      "anyOf",
                                      "oneOf",
                                      "not",
                                      "$ref",
                                      "if",
                                      "$recursiveRef",
                                      "$dynamicRef",
                                      "unevaluatedProperties"};
  return std::any_of(std::begin(kKeys), std::end(kKeys), [&](const char* k) { return key == k; });
}

bool is_unconstrained(const Json& schema) {
  if (schema.is_boolean()) return schema.get<bool>();
  if (!schema.is_object()) return false;
  for (auto it = schema.begin(); it != schema.end(); ++it) {
    if (is_constraining_keyword(it.key())) return false;
  }
  return true;
}

void refuse_keyword_value(const std::string& key, const std::string& pointer,
                          const std::string& what) {
  SchemaCompiler::refuse("JSON Schema: '" + key + "' at " + shown_pointer(pointer) + " must be " +
                         what);
}

namespace {

uint8_t type_bits(const std::string& name) {
  if (name == "null") return kNullType;
  if (name == "boolean") return kBooleanType;
  if (name == "integer") return kIntegerType;
  if (name == "number") return kIntegerType | kFractionType;
  if (name == "string") return kStringType;
  if (name == "array") return kArrayType;
  if (name == "object") return kObjectType;
  return 0;
}

}  // namespace

uint8_t parse_type(const Json& value, const std::string& pointer) {
  const char* const what = "a type name or an array of them";
  if (value.is_string()) {
    const uint8_t bits = type_bits(value.get<std::string>());
    if (!bits) refuse_keyword_value("type", pointer, what);
    return bits;
  }
  if (!value.is_array()) refuse_keyword_value("type", pointer, what);
  uint8_t bits = 0;
  for (const Json& name : value) {
    if (!name.is_string() || !type_bits(name.get<std::string>())) {
      refuse_keyword_value("type", pointer, what);
    }
    bits |= type_bits(name.get<std::string>());
  }
  return bits;
}

int64_t parse_count(const std::string& key, const Json& value, const std::string& pointer) {
  constexpr int64_t kSaturation = int64_t{1} << 40;
  if (value.is_number_unsigned()) {
    return static_cast<int64_t>(std::min<uint64_t>(value.get<uint64_t>(), kSaturation));
  }
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    return std::min<int64_t>(value.get<int64_t>(), kSaturation);
  }
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (d >= 0 && std::floor(d) == d) {
      return static_cast<int64_t>(std::min(d, static_cast<double>(kSaturation)));
    }
  }
  refuse_keyword_value(key, pointer, "a non-negative integer");
}

NumberBound parse_bound(const std::string& key, const Json& value, bool exclusive,
                        const std::string& pointer) {
  if (!value.is_number()) refuse_keyword_value(key, pointer, "a number");
  auto decimal = decimal_of(value);
  if (!decimal) refuse_keyword_value(key, pointer, "a number of at most 400 digits");
  return NumberBound{*decimal, exclusive};
}

}  // namespace llms::structured::jsonschema
