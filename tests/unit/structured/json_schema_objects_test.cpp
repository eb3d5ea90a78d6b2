// JSON Schema -> grammar: objects (properties, required, additionalProperties, patterns, names,
// counts, dependencies) and arrays (items, tuples, counts).
#include <gtest/gtest.h>

#include "json_schema_test_walk.h"

namespace llms::structured::testing {
namespace {

Json parse(const char* text) { return Json::parse(text); }

TEST(JsonSchemaObjects, PropertiesInSchemaOrderOptionalOnesSkipped) {
  const Json schema = parse(R"({"type": "object", "additionalProperties": false,
      "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "null"}},
      "required": ["b"]})");
  expect_walks(schema,
               {R"({"b":"x"})", R"({"a":1,"b":"x"})", R"({"a":1,"b":"x","c":null})",
                R"({"b":"x","c":null})"},
               {R"({})", R"({"a":1})", R"({"b":"x","a":1})", R"({"b":1})", R"({"b":"x","d":1})",
                R"({"b":"x","b":"y"})", R"({"a":1,,"b":"x"})", R"({,"b":"x"})"});
}

TEST(JsonSchemaObjects, AdditionalPropertiesFollowJsonSchemaSemantics) {
  // Absent: any other name, with any value, after the declared ones; never a declared name.
  const Json open = parse(R"({"properties": {"age": {"type": "integer"}}})");
  expect_walks(
      open,
      {R"({"age":1,"x":"y"})", R"({"x":[1]})", R"({"ag":"s","ages":{}})", R"({"a\"b":1,"c\\d":2})"},
      {R"({"age":"old"})", R"({"x":1,"age":"s"})", R"({"x":1,"age":2})"});
  // A schema: other names' values follow it.
  expect_walks(parse(R"({"properties": {"a": {}}, "additionalProperties": {"type": "integer"}})"),
               {R"({"a":"s","b":1})"}, {R"({"b":"s"})"});
  // The option that closes objects without the keyword.
  JsonSchemaOptions closed = compact_options();
  closed.allow_additional_properties_by_default = false;
  expect_walks(open, {R"({"age":1})"}, {R"({"x":1})"}, closed);
}

TEST(JsonSchemaObjects, RequiredNamesNotDeclaredAreWrittenAfterTheOthers) {
  expect_walks(parse(R"({"required": ["id"], "properties": {"a": {"type": "integer"}}})"),
               {R"({"a":1,"id":true})", R"({"id":[]})", R"({"id":1,"z":2})"},
               {R"({"a":1})", R"({})"});
}

TEST(JsonSchemaObjects, MinAndMaxPropertiesAreCounted) {
  const Json schema = parse(R"({"properties": {"a": {}, "b": {}}, "minProperties": 1,
                                "maxProperties": 2})");
  expect_walks(schema, {R"({"a":1})", R"({"b":1,"x":2})", R"({"x":1,"y":2})"},
               {R"({})", R"({"a":1,"b":2,"c":3})", R"({"x":1,"y":2,"z":3})"});
}

TEST(JsonSchemaObjects, PatternPropertiesAndPropertyNames) {
  // Names the pattern matches take its schema; additionalProperties false closes the rest.
  expect_walks(parse(R"({"patternProperties": {"^x-": {"type": "integer"}},
                         "properties": {"id": {"type": "string"}},
                         "additionalProperties": false})"),
               {R"({"id":"a","x-b":1})", R"({"x-":2,"x-c":3})"}, {R"({"x-b":"s"})", R"({"y":1})"});
  // A pattern every name matches: declared names join its schema; other names are free.
  expect_walks(parse(R"({"patternProperties": {".*": {"type": "integer"}},
                         "properties": {"a": {"minimum": 5}}})"),
               {R"({"a":7,"b":1})"}, {R"({"a":4})", R"({"b":"s"})"});
  // propertyNames as an enum lists every name.
  expect_walks(parse(R"({"propertyNames": {"enum": ["a", "b"]}})"), {R"({"a":1,"b":2})", "{}"},
               {R"({"c":1})"});
  // propertyNames as a pattern shapes the other names and forbids declared names it rejects.
  expect_walks(parse(R"({"propertyNames": {"pattern": "^[a-z]+$"}, "properties": {"Id": {}}})"),
               {R"({"abc":2})", "{}"}, {R"({"aB":1})", R"({"Id":1})"});
  // A declared name it accepts is taken out of the other names (their values would differ).
  expect_walks(parse(R"({"propertyNames": {"pattern": "^[a-z]+$"},
                         "properties": {"id": {"type": "integer"}}})"),
               {R"({"id":1,"abc":"s"})", R"({"ids":"s"})"}, {R"({"id":"s"})", R"({"x":1,"id":2})"});
  // So are declared names a pattern matches; disjoint patterns may have different schemas.
  expect_walks(parse(R"({"patternProperties": {"^[a-z]+$": {"type": "integer"},
                                               "^[0-9]+$": {"type": "string"}},
                         "properties": {"AB": {"type": "null"}, "ab": {"minimum": 3}},
                         "additionalProperties": false})"),
               {R"({"AB":null,"ab":4,"abc":1,"12":"s"})"},
               {R"({"AB":1})", R"({"ab":2})", R"({"ab":"s"})", R"({"abc":"s"})", R"({"12":1})",
                R"({"A":1})"});
  expect_refused(parse(R"({"patternProperties": {"^a": {"type": "integer"}, "b$": {}},
                          "additionalProperties": false})"),
                 {"'patternProperties'", "may match one name"});
}

TEST(JsonSchemaObjects, DependenciesAndDependentRequired) {
  const Json schema = parse(R"({"properties": {"card": {}, "billing": {}},
                                "additionalProperties": false,
                                "dependentRequired": {"card": ["billing"]}})");
  expect_walks(schema, {R"({})", R"({"billing":1})", R"({"card":1,"billing":2})"},
               {R"({"card":1})"});
  expect_walks(parse(R"({"dependencies": {"a": {"required": ["b"]}},
                         "properties": {"a": {}, "b": {}}, "additionalProperties": false})"),
               {R"({"b":1})", R"({"a":1,"b":2})"}, {R"({"a":1})"});
}

TEST(JsonSchemaArrays, ItemsTuplesAndCounts) {
  expect_walks(parse(R"({"type": "array", "items": {"type": "integer"}, "minItems": 2,
                         "maxItems": 3})"),
               {"[1,2]", "[1,2,3]"}, {"[]", "[1]", "[1,2,3,4]", "[1,\"a\"]"});
  expect_walks(parse(R"({"prefixItems": [{"type": "string"}, {"type": "integer"}],
                         "items": false, "type": "array"})"),
               {"[]", R"(["a"])", R"(["a",1])"}, {R"([1])", R"(["a",1,2])"});
  // Draft 7 tuples: an items array and additionalItems.
  expect_walks(parse(R"({"$schema": "http://json-schema.org/draft-07/schema#", "type": "array",
                         "items": [{"const": 1}], "additionalItems": {"type": "string"},
                         "minItems": 1})"),
               {"[1]", R"([1,"a","b"])"}, {"[]", "[1,2]", R"(["a"])"});
  JsonSchemaOptions flexible;
  expect_walks(parse(R"({"type": "array", "items": {"type": "null"}})"),
               {"[ ]", "[\n  null,\n  null\n]"}, {"[ null , ]"}, flexible);
}

TEST(JsonSchemaArrays, UniqueItemsOnlyWhereItIsTrivialContainsAsAWitness) {
  expect_refused(parse(R"({"type": "object", "properties": {"tags": {"type": "array",
                          "uniqueItems": true}}})"),
                 {"unsupported JSON Schema keyword 'uniqueItems' at /properties/tags"});
  expect_walks(parse(R"({"type": "array", "uniqueItems": true, "maxItems": 1})"), {"[]", "[1]"},
               {"[1,2]"});
  // contains: some item satisfies it (and the items schema).
  expect_walks(parse(R"({"type": "array", "items": {"type": "integer"},
                         "contains": {"minimum": 5}})"),
               {"[5]", "[1,7,2]", "[1,2,9]", "[9,1]"}, {"[]", "[1,2]", "[\"5\"]"});
  expect_walks(parse(R"({"type": "array", "contains": {"const": 1}, "minItems": 3,
                         "maxItems": 4})"),
               {"[1,0,0]", "[0,0,1,0]", "[0,1,0,0]"}, {"[1,0]", "[0,0,0]", "[1,0,0,0,0]"});
  // Its complement (items that all fail it) serves not and oneOf.
  expect_walks(parse(R"({"type": "array", "not": {"contains": {"const": 1}}})"), {"[]", "[2,3]"},
               {"[2,1]"});
  expect_walks(parse(R"({"type": "array", "not": {"items": {"type": "integer"}}})"),
               {"[1,\"a\"]", "[null]"}, {"[]", "[1,2]"});
  expect_refused(parse(R"({"type": "array", "contains": {"const": 1}, "minContains": 2})"),
                 {"'minContains'"});
}

}  // namespace
}  // namespace llms::structured::testing
