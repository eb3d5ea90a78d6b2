// Body checks before parsing: UTF-8, nesting depth, malformed JSON; and safe dumping.
#include "server/json_body.h"

#include <gtest/gtest.h>

#include <string>

#include "server/api_error.h"

namespace llms::server {
namespace {

TEST(JsonBody, FindsInvalidUtf8) {
  EXPECT_EQ(find_invalid_utf8("plain ascii"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("ab\xff"), 2u);            // never valid
  EXPECT_EQ(find_invalid_utf8("a\xc3"), 1u);             // truncated
  EXPECT_EQ(find_invalid_utf8("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(find_invalid_utf8("x\xed\xa0\x80"), 1u);     // UTF-16 surrogate
  EXPECT_EQ(find_invalid_utf8("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("\xe4\xb8"), 0u);          // truncated 3-byte
  EXPECT_EQ(find_invalid_utf8("\xe4\x41\x41"), 0u);      // bad continuation
}

TEST(JsonBody, MeasuresNestingOutsideStrings) {
  EXPECT_EQ(json_nesting_depth("1", 64), 0);
  EXPECT_EQ(json_nesting_depth("{\"a\": [1, {\"b\": []}]}", 64), 4);
  EXPECT_EQ(json_nesting_depth("{\"a\": \"[[[[{{{{\"}", 64), 1);
  EXPECT_EQ(json_nesting_depth("{\"a\": \"\\\"[[[[\"}", 64), 1);
  EXPECT_EQ(json_nesting_depth(std::string(1000, '['), 64), 65);  // stops past the limit
}

int status_of(std::string_view body) {
  try {
    (void)parse_json_body(body);
  } catch (const ApiError& e) {
    return e.status();
  }
  return 0;
}

TEST(JsonBody, ParsesOrRefuses) {
  EXPECT_EQ(parse_json_body("{\"a\": 1}")["a"], 1);
  EXPECT_EQ(status_of("{\"a\": 1"), 400);
  EXPECT_EQ(status_of(""), 400);
  EXPECT_EQ(status_of("{\"a\": \"\xff\"}"), 400);
  EXPECT_EQ(status_of(std::string(100000, '[') + std::string(100000, ']')), 400);
  std::string ok_depth = std::string(64, '[') + std::string(64, ']');
  EXPECT_EQ(status_of(ok_depth), 0);
  EXPECT_EQ(status_of("[" + ok_depth + "]"), 400);
}

TEST(JsonBody, DumpReplacesInvalidUtf8) {
  nlohmann::json j = {{"t", std::string("a\xff")}};
  EXPECT_EQ(dump_json(j), "{\"t\":\"a\xef\xbf\xbd\"}");
}

}  // namespace
}  // namespace llms::server
