// JSON Schema -> grammar: $ref, allOf, anyOf, oneOf, not, if/then/else, drafts.
#include <gtest/gtest.h>

#include "json_schema_test_walk.h"

namespace llms::structured::testing {
namespace {

Json parse(const char* text) { return Json::parse(text); }

TEST(JsonSchemaComposition, RefsDefinitionsAndRecursion) {
  const Json tree = parse(R"({"$defs": {"node": {"type": "object", "additionalProperties": false,
      "properties": {"v": {"type": "integer"}, "kids": {"type": "array",
                     "items": {"$ref": "#/$defs/node"}}}, "required": ["v"]}},
      "$ref": "#/$defs/node"})");
  expect_walks(tree, {R"({"v":1})", R"({"v":1,"kids":[{"v":2,"kids":[{"v":3}]},{"v":4}]})"},
               {R"({"v":1,"kids":[{}]})", R"({"kids":[]})"});
  // "#" is the root; draft-4 definitions; JSON pointer escapes.
  expect_walks(parse(R"({"definitions": {"a/b": {"type": "string"}},
                         "properties": {"x": {"$ref": "#/definitions/a~1b"},
                                        "self": {"$ref": "#"}}, "additionalProperties": false})"),
               {R"({"x":"s","self":{"self":{}}})"}, {R"({"x":1})", R"({"self":{"x":2}})"});
  // $id: references resolve against the resource they are in.
  expect_walks(
      parse(R"({"$id": "http://e.com/root.json", "properties": {"a": {"$ref": "item.json"}},
                         "$defs": {"i": {"$id": "item.json", "type": "integer"}},
                         "additionalProperties": false})"),
      {R"({"a":1})"}, {R"({"a":"s"})"});
  expect_walks(parse(R"({"$defs": {"a": {"$anchor": "num", "type": "number"}}, "$ref": "#num"})"),
               {"1.5"}, {"\"s\""});
}

TEST(JsonSchemaComposition, BadReferencesAreRefused) {
  expect_refused(parse(R"({"$ref": "http://elsewhere.com/s.json"})"),
                 {"outside the schema document"});
  expect_refused(parse(R"({"$ref": "#/$defs/missing"})"), {"points to nothing"});
  expect_refused(parse(R"({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                          "$ref": "#/$defs/a"})"),
                 {"refers to itself"});
  expect_refused(parse(R"({"allOf": [{"$ref": "#"}]})"), {"refers to itself"});
}

TEST(JsonSchemaComposition, RefSiblingsDependOnTheDraft) {
  const char* schema = R"({"$schema": "%s", "$defs": {"s": {"type": "string"}},
                           "$ref": "#/$defs/s", "maxLength": 2})";
  char text[512];
  std::snprintf(text, sizeof text, schema, "http://json-schema.org/draft-07/schema#");
  expect_walks(parse(text), {R"("abc")"}, {"1"});  // draft 7: siblings of $ref ignored
  std::snprintf(text, sizeof text, schema, "https://json-schema.org/draft/2020-12/schema");
  expect_walks(parse(text), {R"("ab")"}, {R"("abc")"});  // 2020-12: they apply
}

TEST(JsonSchemaComposition, AllOfMergesPropertiesAndBounds) {
  expect_walks(parse(R"({"allOf": [
      {"properties": {"a": {"type": "integer", "minimum": 0}}, "required": ["a"]},
      {"properties": {"a": {"maximum": 10}, "b": {"type": "string"}}},
      {"additionalProperties": false, "properties": {"a": {}, "b": {}}}]})"),
               {R"({"a":5})", R"({"a":0,"b":"x"})"},
               {R"({"a":11})", R"({"a":-1})", R"({"b":"x"})", R"({"a":1,"c":1})"});
  // A name one side closes out is forbidden in the merge.
  expect_walks(parse(R"({"allOf": [{"properties": {"a": {}}, "additionalProperties": false},
                                   {"properties": {"b": {}}}]})"),
               {R"({"a":1})", "{}"}, {R"({"b":1})"});
}

TEST(JsonSchemaComposition, AnyOfIsAUnion) {
  expect_walks(parse(R"({"anyOf": [{"type": "integer", "minimum": 10}, {"type": "string"},
                                   {"type": "integer", "maximum": 0}]})"),
               {"10", "-1", "0", R"("s")"}, {"5", "null"});
}

TEST(JsonSchemaComposition, OneOfDisjointBranchesOrComplementsOverlapping) {
  // Disjoint by type and by const discriminator.
  expect_walks(parse(R"({"oneOf": [
      {"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}},
       "required": ["kind"], "additionalProperties": false},
      {"type": "object", "properties": {"kind": {"const": "b"}, "y": {"type": "string"}},
       "required": ["kind"], "additionalProperties": false},
      {"type": "string"}]})"),
               {R"({"kind":"a","x":1})", R"({"kind":"b","y":"s"})", R"("s")"},
               {R"({"kind":"a","y":"s"})", R"({"kind":"c"})", "1"});
  // Overlapping: exactly one of the required sets.
  expect_walks(parse(R"({"oneOf": [{"required": ["a"]}, {"required": ["b"]}],
                         "properties": {"a": {}, "b": {}}, "additionalProperties": false})"),
               {R"({"a":1})", R"({"b":1})"}, {R"({"a":1,"b":2})", "{}"});
  // Overlapping numbers: [0, 10] xor [5, 20].
  const CompiledSchema ranges =
      compile_schema(parse(R"({"type": "integer", "oneOf": [{"minimum": 0, "maximum": 10},
                                            {"minimum": 5, "maximum": 20}]})"),
                     compact_options());
  for (int v = -3; v <= 23; ++v) {
    const bool in_a = v >= 0 && v <= 10, in_b = v >= 5 && v <= 20;
    EXPECT_EQ(ranges.accepts(std::to_string(v)), in_a != in_b) << v;
  }
  // Overlapping closed objects ({} matches both): each needs one of its own names.
  expect_walks(parse(R"({"oneOf": [
      {"type": "object", "additionalProperties": false, "properties": {"foo": {"type": "string"}}},
      {"type": "object", "additionalProperties": false, "properties": {"bar": {"type": "string"}}}
      ]})"),
               {R"({"foo":"x"})", R"({"bar":"y"})"}, {"{}", R"({"foo":"x","bar":"y"})"});
  expect_refused(parse(R"({"type": "string", "oneOf": [{"pattern": "a"}, {"pattern": "b"}]})"),
                 {"unsupported JSON Schema keyword 'oneOf' at /", "complement"});
}

TEST(JsonSchemaComposition, NotAndIfThenElse) {
  expect_walks(parse(R"({"not": {"type": ["string", "null"]}})"), {"1", "[]", "{}", "true"},
               {R"("s")", "null"});
  expect_walks(parse(R"({"type": "string", "not": {"enum": ["a", "b"]}})"),
               {R"("c")", R"("ab")", R"("")"}, {R"("a")", R"("b")"});
  expect_walks(parse(R"({"type": "integer", "not": {"minimum": 3, "maximum": 5}})"),
               {"2", "6", "-10"}, {"3", "4", "5"});
  expect_walks(parse(R"({"properties": {"a": {}, "b": {}}, "additionalProperties": false,
                         "not": {"required": ["a", "b"]}})"),
               {R"({"a":1})", R"({"b":1})", "{}"}, {R"({"a":1,"b":2})"});
  expect_walks(parse(R"({"type": "object", "additionalProperties": false,
      "properties": {"kind": {"enum": ["x", "y"]}, "n": {"type": "integer"}},
      "if": {"properties": {"kind": {"const": "x"}}, "required": ["kind"]},
      "then": {"required": ["n"]}, "else": {"not": {"required": ["n"]}}})"),
               {R"({"kind":"x","n":1})", R"({"kind":"y"})", "{}"},
               {R"({"kind":"x"})", R"({"kind":"y","n":1})", R"({"n":1})"});
  // not oneOf: none of the branches, or two of them.
  expect_walks(parse(R"({"type": "integer", "not": {"oneOf": [{"minimum": 5}, {"maximum": 10}]}})"),
               {"5", "10", "7"}, {"4", "11"});
  expect_refused(parse(R"({"not": {"pattern": "a"}})"), {"'pattern'", "complement"});
  expect_refused(parse(R"({"not": {"const": {"a": 1}}})"), {"'const'", "complement"});
}

TEST(JsonSchemaComposition, OtherUnsupportedKeywordsAreRefusedByName) {
  expect_refused(parse(R"({"properties": {"x": {"$dynamicRef": "#a"}}})"),
                 {"unsupported JSON Schema keyword '$dynamicRef' at /properties/x"});
  expect_refused(parse(R"({"type": "object", "unevaluatedProperties": false})"),
                 {"'unevaluatedProperties'"});
  expect_refused(parse(R"({"$schema": "http://json-schema.org/draft-03/schema#"})"), {"draft-03"});
}

TEST(JsonSchemaComposition, KeyOrderOfInstancesFollowsTheGrammar) {
  const Json schema = parse(R"({"anyOf": [
      {"properties": {"b": {}, "a": {}}, "required": ["b"]},
      {"properties": {"c": {}, "a": {}}, "required": ["c"]}]})");
  EXPECT_EQ(order_keys_like_grammar(schema, parse(R"({"a":1,"x":2,"c":3})")).dump(),
            R"({"c":3,"a":1,"x":2})");
  EXPECT_EQ(order_keys_like_grammar(schema, parse(R"({"a":1,"b":3})")).dump(), R"({"b":3,"a":1})");
}

}  // namespace
}  // namespace llms::structured::testing
