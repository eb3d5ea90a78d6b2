// JSON Schema -> grammar: string lengths, patterns and formats.
#include <gtest/gtest.h>

#include "json_schema_test_walk.h"

namespace llms::structured::testing {
namespace {

Json parse(const char* text) { return Json::parse(text); }

TEST(JsonSchemaStrings, LengthsCountCodePointsWhateverTheirSpelling) {
  const Json one = parse(R"({"type": "string", "minLength": 1, "maxLength": 1})");
  // Free strings may use any escape: each is one character.
  expect_walks(parse(R"({"type": "string", "maxLength": 1, "pattern": "^.*$"})"),
               {R"("")", R"("a")", R"("é")", R"("\u00e9")", R"("\u00E9")", "\"😀\"",
                R"("\ud83d\ude00")", R"("\/")"},
               {R"("ab")", R"("\u00e9x")", R"("\ud83d")", R"("\ude00")"});
  // Counted strings take one spelling per character (the canonical one).
  expect_walks(one, {R"("a")", R"("é")", "\"😀\"", R"("\n")", R"("\"")", R"("\u001f")"},
               {R"("")", R"("ab")", R"("\u00e9")", R"("\/")", "\"\x1f\"", R"("\u001F")"});
  expect_walks(parse(R"({"type": "string", "minLength": 3})"), {R"("abc")", R"("abcd")"},
               {R"("ab")"});
}

TEST(JsonSchemaStrings, NoRawControlCharactersNorBrokenEscapesEver) {
  for (const char* schema : {R"({"type": "string"})", R"({"type": "string", "maxLength": 5})",
                             R"({"type": "string", "pattern": "^[\\s\\S]*$"})"}) {
    expect_walks(
        parse(schema), {R"("a\tb")"},
        {"\"a\tb\"", "\"a\nb\"", "\"\x7f\x01\"", R"("\a")", R"("\u00g0")", "\"\xff\"", "\"\xc3\""});
  }
}

TEST(JsonSchemaStrings, PatternsAreSearchesUnlessAnchored) {
  expect_walks(parse(R"({"type": "string", "pattern": "ab"})"),
               {R"("ab")", R"("xaby")", R"("\u0061b")"}, {R"("a")", R"("ba")"});
  expect_walks(parse(R"({"type": "string", "pattern": "^ab"})"), {R"("ab")", R"("abc")"},
               {R"("xab")"});
  expect_walks(parse(R"({"type": "string", "pattern": "ab$"})"), {R"("xab")"}, {R"("abx")"});
  expect_walks(parse(R"({"type": "string", "pattern": "^[a-c]{2,3}$|^x"})"),
               {R"("ab")", R"("abc")", R"("xyz")"}, {R"("a")", R"("abcd")", R"("yx")"});
  // Anchors inside groups, where they mean a language.
  expect_walks(parse(R"J({"type": "string", "pattern": "^$|(^\\d+$)"})J"), {R"("")", R"("42")"},
               {R"("4a")", R"(" 4")"});
  // ECMA-262 classes: \d is ASCII, . is not a line terminator.
  expect_walks(parse(R"({"type": "string", "pattern": "^\\d\\w\\s.$"})"), {R"("1a x")"},
               {"\"١a x\"", R"("1a \n")", R"("1é x")"});
}

TEST(JsonSchemaStrings, AnchoredPatternsStayLinear) {
  // 30 alternations between ^ and $: only the anchors split the pattern into readings, so its
  // parts are neither multiplied out (2^30 readings) nor copied once per part.
  std::string pattern = "^";
  std::string yes = "\"";
  std::string no = "\"";
  for (int i = 0; i < 30; ++i) {
    pattern += "(a" + std::to_string(i % 10) + "|b)";
    yes += i % 3 ? "b" : "a" + std::to_string(i % 10);
    no += i == 29 ? "a" : (i % 3 ? "b" : "a" + std::to_string(i % 10));
  }
  pattern += "$";
  Json schema{{"type", "string"}, {"pattern", pattern}};
  const CompiledSchema compiled = compile_schema(schema, compact_options());
  EXPECT_LT(compiled.text.size(), 3000u) << compiled.text;  // about 45 bytes a part
  EXPECT_TRUE(compiled.accepts(yes + "\""));
  EXPECT_FALSE(compiled.accepts(no + "\""));
  EXPECT_FALSE(compiled.accepts(yes + "b\""));
}

TEST(JsonSchemaStrings, PatternsWithLengthsAreCombinedOrRefused) {
  expect_walks(parse(R"({"type": "string", "pattern": "^[a-z]+$", "maxLength": 3})"),
               {R"("a")", R"("abc")"}, {R"("")", R"("abcd")", R"("A")"});
  expect_walks(parse(R"({"type": "string", "pattern": "^x[0-9]*$", "minLength": 3,
                         "maxLength": 4})"),
               {R"("x12")", R"("x123")"}, {R"("x1")", R"("x1234")"});
  // Already within the bounds: the lengths change nothing.
  expect_walks(parse(R"({"type": "string", "pattern": "^[0-9]{5}$", "maxLength": 10})"),
               {R"("12345")"}, {R"("1234")"});
  // Two open-ended parts: each is capped at the largest common count within the bound.
  expect_walks(parse(R"({"type": "string", "pattern": "^a+b+$", "maxLength": 20})"),
               {R"("ab")", R"("aaaaaaaaaabbbbbbbbbb")"}, {R"("aaaaaaaaaaabbbbbbbbb")", R"("ba")"});
  expect_refused(parse(R"({"type": "string", "pattern": "^a+b+$", "maxLength": 5})"),
                 {"'pattern'", "minLength/maxLength"});
  expect_refused(parse(R"({"type": "string", "pattern": "^a+b+$", "minLength": 5})"),
                 {"'pattern'", "minLength/maxLength"});
}

TEST(JsonSchemaStrings, UnsupportedPatternConstructsAreRefusedByName) {
  const std::pair<const char*, const char*> cases[] = {
      {"(a)\\1", "backreference"},  {"a(?=b)", "lookahead"},     {"(?<!a)b", "lookbehind"},
      {"\\bword", "word boundary"}, {"(?i)abc", "group syntax"}, {"(a$)*", "anchor inside"},
      {"\\p{L}", "property"},       {"a{,3}", "{,n}"},           {"[]", "'[]'"},
      {"(a", "unterminated"},       {"a{3,2}", "n < m"}};
  for (const auto& [pattern, why] : cases) {
    Json schema = parse(R"({"type": "object", "properties": {"p": {"type": "string"}}})");
    schema["properties"]["p"]["pattern"] = pattern;
    expect_refused(schema, {"unsupported JSON Schema keyword 'pattern' at /properties/p", why});
  }
  // A pattern on something that cannot be a string is never looked at.
  expect_walks(parse(R"J({"type": "integer", "pattern": "(?=x)"})J"), {"1"}, {});
}

TEST(JsonSchemaStrings, DateTimeFormatsFollowRfc3339Exactly) {
  expect_walks(parse(R"({"format": "date", "type": "string"})"),
               {R"("2024-02-29")", R"("2000-02-29")", R"("1999-12-31")", R"("0001-01-01")"},
               {R"("2023-02-29")", R"("1900-02-29")", R"("2024-04-31")", R"("2024-13-01")",
                R"("0000-01-01")", R"("2024-1-01")", R"("24-01-01")"});
  expect_walks(
      parse(R"({"format": "time", "type": "string"})"),
      {R"("23:59:59Z")", R"("00:00:00.123+05:30")", R"("12:00:00z")"},
      {R"("24:00:00Z")", R"("12:60:00Z")", R"("12:00:60Z")", R"("12:00:00")", R"("12:00Z")"});
  expect_walks(parse(R"({"format": "date-time", "type": "string"})"),
               {R"("2024-02-29T12:00:00Z")", R"("2024-01-01t00:00:00.5-08:00")"},
               {R"("2024-01-01 12:00:00Z")", R"("2024-01-01")", R"("2024-02-30T00:00:00Z")"});
  expect_walks(parse(R"({"format": "duration", "type": "string"})"),
               {R"("P1Y2M3DT4H5M6S")", R"("P3W")", R"("PT1M")"}, {R"("P")", R"("P1S")", R"("1Y")"});
}

TEST(JsonSchemaStrings, NetworkFormats) {
  expect_walks(parse(R"({"format": "ipv4", "type": "string"})"),
               {R"("192.168.0.1")", R"("0.0.0.0")", R"("255.255.255.255")"},
               {R"("256.1.1.1")", R"("01.2.3.4")", R"("1.2.3")", R"("1.2.3.4.5")"});
  expect_walks(parse(R"({"format": "ipv6", "type": "string"})"),
               {R"("::1")", R"("::")", R"("fe80::1:2")", R"("1:2:3:4:5:6:7:8")",
                R"("::ffff:192.168.0.1")", R"("1:2:3:4:5:6:7::")"},
               {R"("1:2:3:4:5:6:7:8:9")", R"("1::2::3")", R"("12345::")", R"("::1%eth0")"});
  expect_walks(
      parse(R"({"format": "uuid", "type": "string"})"),
      {R"("123e4567-e89b-12d3-a456-426614174000")", R"("123E4567-E89B-12D3-A456-426614174000")"},
      {R"("123e4567e89b12d3a456426614174000")", R"("123e4567-e89b-12d3-a456-42661417400g")"});
  expect_walks(parse(R"({"format": "email", "type": "string"})"),
               {R"("a.b+c@example.com")", R"("x@y")"},
               {R"("a@")", R"("@b.c")", R"("a..b@c.d")", R"("a b@c.d")", R"("a@-b.c")"});
  expect_walks(parse(R"({"format": "idn-email", "type": "string"})"),
               {R"("jos\u00e9@example.com")", "\"josé@example.com\""}, {R"("josé")"});
  expect_walks(parse(R"({"format": "hostname", "type": "string"})"),
               {R"("example.com")", R"("1a-b.c1")", R"("localhost")"},
               {R"("-a.com")", R"("a-.com")", R"("a..b")", R"("a.b.")", R"("1.2.3.4")"});
  // Host names, IPv4 and IPv6 addresses are provably disjoint: a oneOf of them is an anyOf.
  expect_walks(parse(R"({"type": "string", "oneOf": [{"format": "hostname"},
                                                     {"format": "ipv4"}, {"format": "ipv6"}]})"),
               {R"("a.com")", R"("1.2.3.4")", R"("::1")"}, {R"("a b")"});
  expect_walks(parse(R"({"format": "uri", "type": "string"})"),
               {R"("https://example.com/a?b=c#d")", R"("urn:isbn:0451450523")",
                R"("http://[::1]:80/")", R"("mailto:a@b.c")"},
               {R"("/relative/path")", R"("http://exa mple.com")", R"("no-scheme")"});
  expect_walks(parse(R"({"format": "uri-reference", "type": "string"})"),
               {R"("/relative/path")", R"("../a?b")", R"("https://e.com")", R"("")"},
               {R"("a b")", R"("%zz")"});
  expect_walks(parse(R"({"format": "json-pointer", "type": "string"})"), {R"("")", R"("/a~1b/0")"},
               {R"("a")", R"("/~2")"});
}

TEST(JsonSchemaStrings, UnknownFormatsAreRefusedUnlessIgnored) {
  const Json schema = parse(R"({"type": "object", "properties": {"c": {"format": "color"}}})");
  expect_refused(schema, {"unsupported JSON Schema keyword 'format' at /properties/c", "color"});
  JsonSchemaOptions ignoring;
  ignoring.ignore_unknown_formats = true;
  expect_walks(schema, {R"({"c":"anything"})"}, {}, ignoring);
  // Formats apply to strings only.
  expect_walks(parse(R"({"type": "integer", "format": "int64"})"), {"5"}, {});
}

TEST(JsonSchemaStrings, TwoPatternsOrFormatsOnOneStringAreRefused) {
  expect_refused(parse(R"({"allOf": [{"pattern": "a"}, {"pattern": "b"}], "type": "string"})"),
                 {"'pattern'", "intersection"});
  expect_walks(parse(R"({"allOf": [{"pattern": "^a"}, {"pattern": "^a"}], "type": "string"})"),
               {R"("ab")"}, {R"("ba")"});
}

TEST(JsonSchemaStrings, HugeLengthsAreBoundedOrRefused) {
  expect_refused(parse(R"({"type": "string", "minLength": 1000000})"), {"minLength"});
  JsonSchemaOptions small;
  small.max_string_length = 3;
  small.whitespace = JsonSchemaOptions::Whitespace::kCompact;
  expect_walks(parse(R"({"type": "string", "maxLength": 1000000})"), {R"("abc")"}, {R"("abcd")"},
               small);
}

}  // namespace
}  // namespace llms::structured::testing
