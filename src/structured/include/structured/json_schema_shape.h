// structured/json_schema_shape: the compiler's normal form of a schema.
//
// Internal to the JSON Schema compiler (public only for its tests). A schema denotes a union of
// Shapes; a Shape is a conjunction of per-type constraints (which JSON types are allowed, and for
// each type its bounds, patterns, items and properties). allOf becomes the meet of Shapes, anyOf
// and oneOf become unions. What a value inside an array or object must satisfy is a SchemaSet: the
// conjunction of the subschemas that apply to it, normalized only when the grammar needs it, so
// recursive schemas stay finite (one grammar rule per distinct SchemaSet).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "structured/json_schema_document.h"
#include "structured/json_schema_numbers.h"
#include "structured/json_schema_pattern.h"

namespace llms::structured::jsonschema {

using Json = nlohmann::ordered_json;

// The conjunction of subschemas a value must satisfy, and of subschemas it must not; neither:
// any value.
struct SchemaSet {
  std::vector<const SchemaNode*> nodes;    // sorted by SchemaNode::index, unique
  std::vector<const SchemaNode*> negated;  // the same: `not` of each
  bool never = false;                      // one of them is `false`: no value

  static SchemaSet any() { return {}; }
  static SchemaSet none() { return {{}, {}, true}; }
  static SchemaSet of(const SchemaNode* node) { return {{node}, {}, false}; }
  static SchemaSet negation_of(const SchemaNode* node) { return {{}, {node}, false}; }
  SchemaSet meet(const SchemaSet& other) const;
  bool is_any() const { return !never && nodes.empty() && negated.empty(); }
  bool operator==(const SchemaSet& other) const = default;
  bool operator<(const SchemaSet& other) const;
};

// JSON types as bits; a number is kInteger (mathematically integral, 1.0 included) or kFraction.
enum : uint8_t {
  kNullType = 1,
  kBooleanType = 2,
  kIntegerType = 4,
  kFractionType = 8,
  kStringType = 16,
  kArrayType = 32,
  kObjectType = 64,
  kAllTypes = 127,
};

// A keyword's value together with where it was found, for messages.
struct Sourced {
  std::string text;     // the pattern, the format name
  std::string pointer;  // of the schema object that holds the keyword
  std::string keyword;  // "pattern", "format", "patternProperties"
};

// A keyword that the grammar cannot enforce, refused only if values of its type stay possible.
struct Unsupported {
  std::string keyword;
  std::string pointer;
};

struct NumberShape {
  std::optional<NumberBound> lower, upper;
};

struct StringShape {
  int64_t min_length = 0;
  int64_t max_length = kUnbounded;
  std::vector<Sourced> patterns;      // all must match
  std::vector<Sourced> formats;       // all must hold
  std::vector<std::string> excluded;  // values it must not equal (from `not`)
};

struct ArrayShape {
  std::vector<SchemaSet> prefix;  // item i < prefix.size()
  SchemaSet rest;                 // every later item
  int64_t min_items = 0;
  int64_t max_items = kUnbounded;
  std::optional<std::string> unique_items;  // uniqueItems: true, at this pointer
  std::vector<SchemaSet> contains;          // each matched by at least one item
  std::optional<std::string> contains_at;   // where the first `contains` is, for messages
};

struct ObjectShape {
  struct Property {
    std::string name;
    SchemaSet schema;
  };
  struct PatternProperty {
    Sourced pattern;
    SchemaSet schema;
  };
  std::vector<Property> properties;  // in schema order
  std::vector<PatternProperty> pattern_properties;
  SchemaSet additional;                   // names neither declared nor matched by a pattern
  std::vector<std::string> required;      // in order, unique
  std::vector<SchemaSet> property_names;  // every name satisfies each
  int64_t min_properties = 0;
  int64_t max_properties = kUnbounded;
  // From `not: {additionalProperties: false}`: for each list, some name outside it is present.
  std::vector<std::vector<std::string>> some_name_outside;
  std::string some_name_outside_at;  // where, for messages
};

struct Shape {
  uint8_t types = kAllTypes;
  std::optional<std::vector<Json>> values;  // from enum/const: one of these exactly
  NumberShape number;
  StringShape string;
  ArrayShape array;
  ObjectShape object;
  std::vector<std::pair<uint8_t, Unsupported>> unsupported;  // per type bits
};

// JSON Schema equality: numbers by value (1 == 1.0), objects regardless of key order.
bool json_equal(const Json& a, const Json& b);
// The type bit of a value.
uint8_t json_type_of(const Json& value);

}  // namespace llms::structured::jsonschema
