// tool_call_grammar: a Hermes or Llama 3 tool call to an allowed function whose arguments follow
// its parameters is a sentence of the grammar, anything else is not (walked byte by byte with the
// grammar engine); Mistral's format and bad parameter schemas are refused naming the field; and
// rename_rule renames a rule without touching literals, classes, regexes or comments.
#include "server/tool_grammar.h"

#include <gtest/gtest.h>

#include "server/api_error.h"
#include "structured/grammar.h"
#include "structured/matcher.h"
#include "structured/vocabulary.h"

namespace llms::server {
namespace {

using ojson = nlohmann::ordered_json;

const ojson kTools = ojson::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
     "properties": {"city": {"type": "string"}, "unit": {"enum": ["C", "F"]}},
     "required": ["city", "unit"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time"}}])");

std::shared_ptr<const structured::TokenIndex> bytes_index() {
  structured::Vocabulary v;
  for (int b = 0; b < 256; ++b) {
    v.token_bytes.emplace_back(1, static_cast<char>(b));
    v.is_special.push_back(0);
  }
  return structured::build_token_index(std::move(v));
}

bool accepts(const std::string& grammar, const std::string& text) {
  structured::Matcher m(structured::compile_grammar(grammar, bytes_index()));
  return m.accept_bytes(text) && m.is_accepting();
}

TEST(ToolGrammar, HermesCallsToAllowedFunctionsWithValidArguments) {
  const std::string any = tool_call_grammar(ToolCallFormat::kHermes, kTools, "", true);
  const std::string weather =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": "
      "\"C\"}}\n</tool_call>";
  const std::string time = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  EXPECT_TRUE(accepts(any, weather)) << any;
  EXPECT_TRUE(accepts(any, time));
  EXPECT_TRUE(accepts(any, weather + "\n" + time));  // parallel
  EXPECT_FALSE(accepts(any,
                       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                       "\"Paris\", \"unit\": \"K\"}}\n</tool_call>"));
  EXPECT_FALSE(
      accepts(any, "<tool_call>\n{\"name\": \"launch\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(accepts(any, "It is sunny."));
  const std::string one = tool_call_grammar(ToolCallFormat::kHermes, kTools, "get_time", false);
  EXPECT_TRUE(accepts(one, time));
  EXPECT_FALSE(accepts(one, weather));
  EXPECT_FALSE(accepts(one, time + "\n" + time));  // not parallel
}

TEST(ToolGrammar, Llama3CallsAreOneJsonObject) {
  const std::string g =
      tool_call_grammar(ToolCallFormat::kLlama3Json, kTools, "get_weather", false);
  EXPECT_TRUE(accepts(g,
                      "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", "
                      "\"unit\": \"F\"}}"));
  EXPECT_FALSE(accepts(g,
                       "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", "
                       "\"unit\": \"F\"}}"));
}

TEST(ToolGrammar, RefusalsNameTheField) {
  try {
    (void)tool_call_grammar(ToolCallFormat::kMistral, kTools, "", true);
    ADD_FAILURE() << "Mistral calls cannot be enforced";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param(), "tool_choice");
  }
  ojson bad = kTools;
  bad[1]["function"]["parameters"] = {{"type", "array"}, {"uniqueItems", true}};
  try {
    check_tool_parameters(bad);
    ADD_FAILURE() << "uniqueItems cannot be enforced";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param(), "tools[1].function.parameters");
    EXPECT_NE(std::string(e.what()).find("uniqueItems"), std::string::npos) << e.what();
  }
}

TEST(ToolGrammar, RenameRuleTouchesOnlyRuleNames) {
  const std::string g =
      "root ::= \"root\" [root] /root/ item # root here\nitem ::= root-x | root\n";
  EXPECT_EQ(rename_rule(g, "root", "top"),
            "top ::= \"root\" [root] /root/ item # root here\nitem ::= root-x | top\n");
  EXPECT_EQ(rename_rule("a ::= \"\\\"root\" root", "root", "r"), "a ::= \"\\\"root\" r");
}

}  // namespace
}  // namespace llms::server
