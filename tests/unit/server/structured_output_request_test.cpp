// parse_structured_output through the request parser: every spelling (response_format,
// structured_outputs, guided_*) gives the same StructuredOutput; a schema may come as an object
// or as its JSON text; two spellings at once, a bad name, a bad type or an empty choice list is
// a 400 naming the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/openai_request.h"

namespace llms::server {
namespace {

using nlohmann::json;
using Kind = StructuredOutput::Kind;

ParseLimits limits() {
  ParseLimits l;
  l.n_vocab = 1000;
  return l;
}

json chat(json extra) {
  json body = {{"model", "m"}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

StructuredOutput parsed(const json& extra) {
  return parse_chat_request(chat(extra), limits()).structured;
}

std::string refused_param(const json& extra) {
  try {
    (void)parse_chat_request(chat(extra), limits());
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.param();
  }
  ADD_FAILURE() << "accepted " << extra.dump();
  return "";
}

const json kSchema = {
    {"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}, {"required", {"a"}}};

TEST(StructuredOutputRequest, EverySpellingGivesTheSameConstraint) {
  EXPECT_FALSE(parsed(json::object()).active());
  EXPECT_FALSE(parsed({{"response_format", {{"type", "text"}}}}).active());
  EXPECT_EQ(parsed({{"response_format", {{"type", "json_object"}}}}).kind, Kind::kJsonObject);
  EXPECT_EQ(parsed({{"structured_outputs", {{"json_object", true}}}}).kind, Kind::kJsonObject);

  const StructuredOutput a = parsed(
      {{"response_format",
        {{"type", "json_schema"}, {"json_schema", {{"name", "Thing_1"}, {"schema", kSchema}}}}}});
  EXPECT_EQ(a.kind, Kind::kJsonSchema);
  EXPECT_EQ(a.schema, kSchema);
  EXPECT_EQ(a.param, "response_format.json_schema.schema");
  EXPECT_EQ(parsed({{"structured_outputs", {{"json", kSchema}}}}).schema, kSchema);
  EXPECT_EQ(parsed({{"structured_outputs", {{"json", kSchema.dump()}}}}).schema, kSchema);
  EXPECT_EQ(parsed({{"guided_json", kSchema}}).schema, kSchema);
  EXPECT_EQ(parsed({{"guided_json", kSchema.dump()}}).param, "guided_json");

  const StructuredOutput r = parsed({{"guided_regex", "[0-9]+"}});
  EXPECT_EQ(r.kind, Kind::kRegex);
  EXPECT_EQ(r.text, "[0-9]+");
  EXPECT_EQ(parsed({{"structured_outputs", {{"regex", "a|b"}}}}).text, "a|b");
  const StructuredOutput c = parsed({{"guided_choice", {"yes", "no"}}});
  EXPECT_EQ(c.kind, Kind::kChoice);
  EXPECT_EQ(c.choices, (std::vector<std::string>{"yes", "no"}));
  EXPECT_EQ(parsed({{"structured_outputs", {{"choice", {"x"}}}}}).choices.size(), 1u);
  EXPECT_EQ(parsed({{"guided_grammar", "root ::= \"a\""}}).kind, Kind::kGrammar);
  EXPECT_EQ(parsed({{"structured_outputs", {{"grammar", "root ::= \"a\""}}}}).kind, Kind::kGrammar);
  // Null is absent.
  EXPECT_FALSE(parsed({{"response_format", nullptr}, {"guided_json", nullptr}}).active());
  // Completions take them too.
  json body = {{"model", "m"}, {"prompt", "x"}, {"guided_regex", "[a-z]"}};
  EXPECT_EQ(parse_completion_request(body, limits()).structured.kind, Kind::kRegex);
}

TEST(StructuredOutputRequest, BadShapesAreRefusedNamingTheField) {
  EXPECT_EQ(refused_param({{"response_format", "json"}}), "response_format");
  EXPECT_EQ(refused_param({{"response_format", {{"type", "xml"}}}}), "response_format.type");
  EXPECT_EQ(refused_param({{"response_format", {{"type", "json_schema"}}}}),
            "response_format.json_schema");
  EXPECT_EQ(refused_param({{"response_format",
                            {{"type", "json_schema"},
                             {"json_schema", {{"name", "has space"}, {"schema", kSchema}}}}}}),
            "response_format.json_schema.name");
  EXPECT_EQ(
      refused_param({{"response_format",
                      {{"type", "json_schema"}, {"json_schema", {{"name", "n"}, {"schema", 3}}}}}}),
      "response_format.json_schema.schema");
  EXPECT_EQ(refused_param(
                {{"response_format",
                  {{"type", "json_schema"}, {"json_schema", {{"name", "n"}, {"strict", "yes"}}}}}}),
            "response_format.json_schema.strict");
  EXPECT_EQ(refused_param({{"guided_json", "{not json"}}), "guided_json");
  EXPECT_EQ(refused_param({{"guided_regex", ""}}), "guided_regex");
  EXPECT_EQ(refused_param({{"guided_choice", json::array()}}), "guided_choice");
  EXPECT_EQ(refused_param({{"guided_choice", {"a", 1}}}), "guided_choice");
  EXPECT_EQ(refused_param({{"structured_outputs", {{"regex", "a"}, {"choice", {"a"}}}}}),
            "structured_outputs");
  EXPECT_EQ(refused_param({{"response_format", {{"type", "json_object"}}}, {"guided_regex", "a"}}),
            "guided_regex");
}

}  // namespace
}  // namespace llms::server

namespace llms::server {
namespace {

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
  {"type": "function", "function": {"name": "get_time"}}])");

TEST(ToolRequest, ToolChoiceAndParallelCalls) {
  OpenAiRequest r = parse_chat_request(chat({{"tools", kTools}}), limits());
  EXPECT_EQ(r.tool_choice, "auto");
  EXPECT_TRUE(r.parallel_tool_calls);
  r = parse_chat_request(
      chat({{"tools", kTools}, {"tool_choice", "required"}, {"parallel_tool_calls", false}}),
      limits());
  EXPECT_EQ(r.tool_choice, "required");
  EXPECT_FALSE(r.tool_choice_named);
  EXPECT_FALSE(r.parallel_tool_calls);
  r = parse_chat_request(
      chat({{"tools", kTools},
            {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}}}),
      limits());
  EXPECT_EQ(r.tool_choice, "get_time");
  EXPECT_TRUE(r.tool_choice_named);
  EXPECT_EQ(parse_chat_request(chat({{"tool_choice", "none"}}), limits()).tool_choice, "none");
}

// A conversation carrying a call and its result: the call's arguments reach the template as an
// object (templates write them with tojson), the tool message as it is.
TEST(ToolRequest, ToolCallsAndResultsRoundTrip) {
  const json messages = json::parse(R"([
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"}])");
  const OpenAiRequest r =
      parse_chat_request(chat({{"messages", messages}, {"tools", kTools}}), limits());
  EXPECT_EQ(r.messages[1]["tool_calls"][0]["function"]["arguments"], json({{"city", "Paris"}}));
  EXPECT_EQ(r.messages[2]["content"], "18 C, sunny");
  EXPECT_EQ(r.messages[2]["tool_call_id"], "call_1");
  json bad = messages;
  bad[1]["tool_calls"] = "call_1";
  EXPECT_EQ(refused_param({{"messages", bad}}), "messages[1].tool_calls");
}

TEST(ToolRequest, BadToolsAndChoicesAreRefusedNamingTheField) {
  EXPECT_EQ(refused_param({{"tools", {{"type", "function"}}}}), "tools");  // an object
  EXPECT_EQ(refused_param({{"tools", json::array({{{"type", "retrieval"}}})}}), "tools[0].type");
  EXPECT_EQ(refused_param({{"tools", json::array({{{"type", "function"}}})}}), "tools[0].function");
  EXPECT_EQ(refused_param(
                {{"tools", json::array({{{"type", "function"}, {"function", {{"name", ""}}}}})}}),
            "tools[0].function.name");
  json bad_params = kTools;
  bad_params[1]["function"]["parameters"] = "object";
  EXPECT_EQ(refused_param({{"tools", bad_params}}), "tools[1].function.parameters");
  EXPECT_EQ(refused_param({{"tools", kTools}, {"tool_choice", "always"}}), "tool_choice");
  EXPECT_EQ(refused_param({{"tool_choice", "required"}}), "tool_choice");
  EXPECT_EQ(refused_param({{"tools", kTools},
                           {"tool_choice", {{"type", "function"}, {"function", {{"name", "x"}}}}}}),
            "tool_choice.function.name");
  EXPECT_EQ(refused_param({{"tools", kTools}, {"parallel_tool_calls", "yes"}}),
            "parallel_tool_calls");
}

}  // namespace
}  // namespace llms::server
