// JSON Schema -> grammar: numeric bounds, checked exhaustively against exact arithmetic.
#include "structured/json_schema_numbers.h"

#include <gtest/gtest.h>

#include <random>

#include "json_schema_test_walk.h"

namespace llms::structured::testing {
namespace {

Json parse(const char* text) { return Json::parse(text); }

// Every integer of a window around the bounds is accepted iff it is within them.
void check_integer_bounds(const Json& schema, int64_t lo, int64_t hi, int64_t from, int64_t to) {
  const CompiledSchema compiled = compile_schema(schema, compact_options());
  for (int64_t v = from; v <= to; ++v) {
    EXPECT_EQ(compiled.accepts(std::to_string(v)), v >= lo && v <= hi)
        << v << " under " << schema.dump() << "\n"
        << compiled.text;
  }
}

TEST(JsonSchemaNumbers, IntegerRangesAreExact) {
  check_integer_bounds(parse(R"({"type": "integer", "minimum": 0, "maximum": 150})"), 0, 150, -30,
                       300);
  check_integer_bounds(parse(R"({"type": "integer", "minimum": -1234, "maximum": -7})"), -1234, -7,
                       -1400, 40);
  check_integer_bounds(parse(R"({"type": "integer", "exclusiveMinimum": -10,
                                 "exclusiveMaximum": 1000})"),
                       -9, 999, -100, 1100);
  check_integer_bounds(parse(R"({"type": "integer", "minimum": 2.5, "maximum": 7.5})"), 3, 7, -5,
                       20);
  // Draft 4: boolean exclusiveMinimum modifies minimum.
  check_integer_bounds(parse(R"({"$schema": "http://json-schema.org/draft-04/schema#",
                                 "type": "integer", "minimum": 5, "exclusiveMinimum": true})"),
                       6, INT64_MAX, 0, 40);
  std::mt19937 random(7);
  for (int i = 0; i < 20; ++i) {
    std::uniform_int_distribution<int64_t> bound(-3000, 3000);
    int64_t lo = bound(random), hi = bound(random);
    if (lo > hi) std::swap(lo, hi);
    Json schema = parse(R"({"type": "integer"})");
    schema["minimum"] = lo;
    schema["maximum"] = hi;
    check_integer_bounds(schema, lo, hi, lo - 120, hi + 120);
  }
  // One-sided bounds extend to any length.
  expect_walks(parse(R"({"type": "integer", "minimum": 99})"),
               {"99", "100", "123456789012345678901"}, {"98", "-100", "9"});
  expect_walks(parse(R"({"type": "integer", "maximum": -99})"),
               {"-99", "-100", "-123456789012345678901"}, {"-98", "0", "99"});
  expect_refused(parse(R"({"type": "integer", "minimum": 3, "maximum": 2})"), {"no value"});
}

TEST(JsonSchemaNumbers, DecimalBoundsAreExact) {
  const Json schema = parse(R"({"type": "number", "minimum": -1.5, "exclusiveMaximum": 2.25})");
  expect_walks(schema, {"-1.5", "-1.49999", "-1", "0", "0.0", "2", "2.2", "2.24999999999", "-1.50"},
               {"-1.51", "-1.500001", "2.25", "2.250", "2.3", "3", "-2", "1e0", "-0"});
  expect_walks(parse(R"({"type": "number", "exclusiveMinimum": 0})"), {"0.0001", "1", "12345.5"},
               {"0", "0.0", "-0.1", "-0", "-0.0"});
  expect_walks(parse(R"({"type": "number", "minimum": 0.1, "maximum": 0.1})"), {"0.1", "0.10"},
               {"0.1000001", "0.09999", "0"});
  // Bounded numbers are written without exponent (a sound restriction).
  expect_walks(parse(R"({"type": "number", "maximum": 1e2})"), {"100", "99.99", "-5"},
               {"100.01", "101", "-1e0"});
  // Random bounds, checked against exact decimal arithmetic.
  std::mt19937 random(11);
  std::uniform_int_distribution<int> hundredths(-2000, 2000);
  for (int i = 0; i < 8; ++i) {
    int a = hundredths(random), b = hundredths(random);
    if (a > b) std::swap(a, b);
    Json bounds = parse(R"({"type": "number"})");
    bounds["minimum"] = a / 100.0;
    bounds["exclusiveMaximum"] = b / 100.0;
    const CompiledSchema compiled = compile_schema(bounds, compact_options());
    for (int v = a - 150; v <= b + 150; v += 7) {
      const int magnitude = v < 0 ? -v : v;
      const std::string text = (v < 0 ? "-" : "") + std::to_string(magnitude / 100) + "." +
                               std::to_string(magnitude % 100 / 10) +
                               std::to_string(magnitude % 10);
      if (v == 0) continue;  // "0.00" vs "-0.00": written without sign below
      EXPECT_EQ(compiled.accepts(text), v >= a && v < b) << text << " in " << bounds.dump();
    }
  }
}

TEST(JsonSchemaNumbers, MultipleOfOneMeansIntegersOthersAreRefused) {
  expect_walks(parse(R"({"type": "number", "multipleOf": 1})"), {"3", "-4"}, {"3.5", "1e2"});
  expect_refused(parse(R"({"type": "number", "multipleOf": 0.01})"), {"'multipleOf'"});
  expect_refused(parse(R"({"type": "integer", "multipleOf": 3})"), {"'multipleOf'"});
  expect_walks(parse(R"({"type": "string", "multipleOf": 3})"), {R"("x")"}, {});
}

TEST(JsonSchemaNumbers, DecimalHelpers) {
  auto d = [](const char* text) { return *jsonschema::parse_decimal(text); };
  EXPECT_EQ(d("-1.50e+3").to_string(), "-1500");
  EXPECT_EQ(d("1e-3").to_string(), "0.001");
  EXPECT_EQ(d("-0.0").to_string(), "0");
  EXPECT_EQ(jsonschema::ceil_decimal(d("-2.5")).to_string(), "-2");
  EXPECT_EQ(jsonschema::floor_decimal(d("-2.5")).to_string(), "-3");
  EXPECT_LT(jsonschema::compare(d("0.5"), d("0.51")), 0);
  EXPECT_GT(jsonschema::compare(d("-0.5"), d("-0.51")), 0);
  EXPECT_FALSE(jsonschema::parse_decimal("1e999999").has_value());
}

}  // namespace
}  // namespace llms::structured::testing
