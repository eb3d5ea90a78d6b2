// JSON Schema -> grammar: types, enum/const, whitespace and the any-JSON grammars.
#include <gtest/gtest.h>

#include "json_schema_test_walk.h"

namespace llms::structured::testing {
namespace {

Json parse(const char* text) { return Json::parse(text); }

TEST(JsonSchemaTypes, EachTypeAcceptsItsValuesOnly) {
  expect_walks(parse(R"({"type": "null"})"), {"null"}, {"nul", "\"null\"", "0", "false"});
  expect_walks(parse(R"({"type": "boolean"})"), {"true", "false"}, {"True", "1", "\"true\""});
  expect_walks(parse(R"({"type": "integer"})"), {"0", "-1", "1234567890123456789012345"},
               {"01", "-0", "1.5", "1e3", "+1", "", "1.0"});
  expect_walks(parse(R"({"type": "number"})"), {"0", "-1.5", "1e3", "2.5E-10", "-0.0", "10"},
               {"01", ".5", "1.", "+1", "1e", "--1", "NaN", "Infinity"});
  expect_walks(parse(R"({"type": "string"})"), {R"("")", R"("a b")", R"("\"\\\/\b\f\n\r\t")"},
               {"a", R"("a)", R"("\x")", "\"\x01\"", R"("\u12")"});
  expect_walks(parse(R"({"type": "array"})"), {"[]", "[1,\"a\",[null],{}]"}, {"[", "[1,]", "{}"});
  expect_walks(parse(R"({"type": "object"})"), {"{}", R"({"a":1,"b":{"c":[]}})"},
               {"[]", R"({"a"})", R"({a:1})", R"({"a":1,})"});
}

TEST(JsonSchemaTypes, TypeArraysAndMissingTypeAllowEverythingListed) {
  expect_walks(parse(R"({"type": ["string", "null"]})"), {"null", R"("x")"}, {"1", "[]"});
  expect_walks(parse(R"({})"), {"null", "1", "\"s\"", "[1]", R"({"a":true})"}, {"", "nul"});
  expect_walks(parse("true"), {"null", "[]"}, {});
  expect_refused(parse("false"), {"no value satisfies the schema"});
  expect_refused(parse(R"({"type": "strin"})"), {"'type'", "must be"});
}

TEST(JsonSchemaTypes, EnumAndConstAcceptExactlyTheirValues) {
  expect_walks(parse(R"({"enum": ["red", 1, null, true, [1, 2], {"k": "v"}]})"),
               {R"("red")", "1", "null", "true", "[1,2]", R"({"k":"v"})"},
               {R"("Red")", "2", "false", "[2,1]", R"({"k":"w"})", R"("re")"});
  expect_walks(parse(R"({"const": "a\"b\n"})"), {R"("a\"b\n")"},
               {R"("a\"b")", "\"a\\\"b\\u000a\""});
  // Values other keywords reject are left out.
  expect_walks(parse(R"({"type": "string", "enum": ["a", 1, "bb"], "maxLength": 1})"), {R"("a")"},
               {"1", R"("bb")"});
  // 1 and 1.0 are the same value: each is written as the schema writes it.
  expect_walks(parse(R"({"enum": [1.5, 2]})"), {"1.5", "2"}, {"1.50", "2.0"});
  expect_refused(parse(R"({"type": "string", "enum": [1, 2]})"), {"no value"});
}

TEST(JsonSchemaTypes, FlexibleWhitespaceIsBoundedAndNeverAroundTheRoot) {
  JsonSchemaOptions flexible;
  const Json schema = parse(R"({"type": "object", "properties": {"a": {"type": "array"}}})");
  const std::string twenty(20, ' ');
  expect_walks(schema,
               {R"({ "a" : [ 1 , 2 ] })", "{\n\t\"a\":\r\n[]}", "{" + twenty + "}",
                "{\"a\":" + twenty + "[]}"},
               {" {}", "{} ", "{" + twenty + " }", "{\"a\"" + twenty + " :[]}"}, flexible);
  expect_walks(schema, {R"({"a":[1,2]})"}, {R"({ "a":[]})", R"({"a": []})"}, compact_options());
}

TEST(JsonSchemaTypes, AnyJsonObjectGrammarAcceptsObjectsOnly) {
  const CompiledSchema compiled{any_json_object_grammar({}),
                                compile_grammar(any_json_object_grammar({}), byte_index())};
  EXPECT_TRUE(compiled.accepts(R"({"a": [1, {"b": null}], "c": "d"})"));
  EXPECT_TRUE(compiled.accepts("{}"));
  EXPECT_FALSE(compiled.accepts("[]"));
  EXPECT_FALSE(compiled.accepts("1"));
  EXPECT_FALSE(compiled.accepts(R"({"a": })"));
}

TEST(JsonSchemaTypes, AnnotationsAndUnknownNamesAreIgnored) {
  expect_walks(parse(R"({"type": "integer", "title": "t", "description": "d", "default": "x",
                         "examples": [1], "$comment": "c", "x-custom": {"type": "string"},
                         "readOnly": true})"),
               {"1"}, {"\"x\""});
}

}  // namespace
}  // namespace llms::structured::testing
