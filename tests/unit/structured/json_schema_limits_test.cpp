// JSON Schema -> grammar: hostile schemas end in a clear llms::Error, never a crash or a hang.
#include <gtest/gtest.h>

#include "json_schema_test_walk.h"

namespace llms::structured::testing {
namespace {

Json parse(const char* text) { return Json::parse(text); }

// Compiling under a small budget throws kInvalidArgument naming `part`.
void expect_budget_error(const Json& schema, const std::string& part, int64_t work = 200'000) {
  CompileBudget budget(CompileLimits{std::chrono::seconds(60), work});
  try {
    json_schema_to_grammar(schema, {}, budget);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(JsonSchemaLimits, DeepNestingIsRefusedBeforeAnyRecursion) {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += R"({"items":)";
  text += "{}" + std::string(5000, '}');
  expect_refused(Json::parse(text), {"nests deeper"});
}

TEST(JsonSchemaLimits, LongRefChainsAndRecursiveCompositionsAreRefused) {
  Json chain = {{"$ref", "#/$defs/d0"}, {"$defs", Json::object()}};
  for (int i = 0; i < 500; ++i) {
    chain["$defs"]["d" + std::to_string(i)] = {{"$ref", "#/$defs/d" + std::to_string(i + 1)}};
  }
  chain["$defs"]["d500"] = {{"type", "integer"}};
  expect_refused(chain, {"nest deeper"});
  expect_refused(
      parse(R"({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"})"),
      {"refers to itself"});
  expect_refused(parse(R"({"$defs": {"a": {"not": {"$ref": "#/$defs/a"}}}, "$ref": "#/$defs/a"})"),
                 {"refers to itself"});
}

TEST(JsonSchemaLimits, ExplodingAlternativesRunOutOfBudget) {
  Json schema = {{"allOf", Json::array()}};
  for (int i = 0; i < 40; ++i) {
    schema["allOf"].push_back(parse(R"({"anyOf": [{"minimum": 0}, {"maxLength": 3}]})"));
  }
  expect_budget_error(schema, "compile budget");
  Json big_enum = {{"enum", Json::array()}};
  for (int i = 0; i < 100'000; ++i) big_enum["enum"].push_back("value " + std::to_string(i));
  expect_budget_error(big_enum, "compile budget");
  Json many_properties = {
      {"type", "object"}, {"properties", Json::object()}, {"maxProperties", 5000}};
  for (int i = 0; i < 2000; ++i)
    many_properties["properties"]["p" + std::to_string(i)] = Json::object();
  expect_budget_error(many_properties, "compile budget");
}

TEST(JsonSchemaLimits, HugeCountsAreRefusedOrBounded) {
  expect_refused(parse(R"({"type": "array", "minItems": 1000000000})"), {"minItems"});
  expect_refused(parse(R"({"type": "string", "pattern": "a{100000}"})"), {"above 10000"});
  expect_refused(parse(R"({"type": "string", "minLength": 99999999999999999999})"), {"minLength"});
  // Repetition nested in repetition is only checked by matching; the budget bounds that.
  expect_budget_error(parse(R"({"enum": ["aaaa"], "pattern": "^(a{1000}){1000}$"})"),
                      "compile budget");
  std::string nested_groups(200, '(');
  nested_groups += "a" + std::string(200, ')');
  Json groups = {{"type", "string"}, {"pattern", nested_groups}};
  expect_refused(groups, {"nested deeper"});
}

TEST(JsonSchemaLimits, MalformedSchemasNameTheKeyword) {
  expect_refused(parse(R"({"properties": {"a": {"minLength": -1}}})"),
                 {"'minLength' at /properties/a", "non-negative integer"});
  expect_refused(parse(R"({"required": "a"})"), {"'required'"});
  expect_refused(parse(R"({"items": 3})"), {"'items'"});
  expect_refused(parse(R"({"allOf": []})"), {"'allOf'"});
  expect_refused(parse(R"({"minimum": "1"})"), {"'minimum'", "a number"});
  expect_refused(parse("[]"), {"must be an object or a boolean"});
}

}  // namespace
}  // namespace llms::structured::testing
