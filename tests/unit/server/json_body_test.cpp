// Body checks before parsing: UTF-8, nesting depth, malformed JSON; and safe dumping.
#include "server/json_body.h"

#include <gtest/gtest.h>

#include <string>

#include "server/api_error.h"

namespace llms::server {
namespace {

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
