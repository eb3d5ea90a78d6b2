// Request parsing with OpenAI error semantics: every refusal is a 400 naming the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/json_body.h"
#include "server/openai_request.h"

namespace llms::server {
namespace {

using nlohmann::json;

ParseLimits limits() {
  ParseLimits l;
  l.n_vocab = 1000;
  return l;
}

// The status and param of the refusal, or {0, ""} when the body was accepted.
std::pair<int, std::string> refusal(const json& body, bool chat = false) {
  try {
    if (chat) {
      (void)parse_chat_request(body, limits());
    } else {
      (void)parse_completion_request(body, limits());
    }
  } catch (const ApiError& e) {
    return {e.status(), e.param()};
  }
  return {0, ""};
}

json completion(json extra) {
  json body = {{"model", "m"}, {"prompt", "hello"}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

json chat(json extra) {
  json body = {{"model", "m"}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

TEST(RequestParser, AcceptsAFullCompletionRequest) {
  OpenAiRequest r =
      parse_completion_request(completion({{"max_tokens", 7},
                                           {"temperature", 0.5},
                                           {"top_p", 0.9},
                                           {"top_k", 40},
                                           {"min_p", 0.05},
                                           {"n", 3},
                                           {"stop", json::array({"a", "b"})},
                                           {"seed", 42},
                                           {"presence_penalty", 1.5},
                                           {"frequency_penalty", -1.0},
                                           {"repetition_penalty", 1.1},
                                           {"logit_bias", {{"5", -100}, {"999", 100}}},
                                           {"logprobs", 3},
                                           {"echo", false},
                                           {"user", "u"},
                                           {"priority", -2},
                                           {"some_unknown_field", {{"x", 1}}}}),
                               limits());
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "hello");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 1.5f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, -1.0f);
  ASSERT_EQ(r.sampling.logit_bias.size(), 2u);
  EXPECT_TRUE(r.sampling.logprobs);
  EXPECT_EQ(r.sampling.n_top_logprobs, 3);
  EXPECT_EQ(r.priority, -2);
}

TEST(RequestParser, PromptForms) {
  auto r = parse_completion_request(completion({{"prompt", json::array({"a", "b"})}}), limits());
  EXPECT_EQ(r.prompts.size(), 2u);
  r = parse_completion_request(completion({{"prompt", json::array({1, 2, 3})}}), limits());
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_TRUE(r.prompts[0].is_ids);
  EXPECT_EQ(r.prompts[0].ids, (std::vector<int32_t>{1, 2, 3}));
  r = parse_completion_request(
      completion({{"prompt", json::array({json::array({1}), json::array({2, 3})})}}), limits());
  EXPECT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[1].ids, (std::vector<int32_t>{2, 3}));
}

TEST(RequestParser, MaxCompletionTokensWins) {
  auto r = parse_completion_request(completion({{"max_tokens", 5}, {"max_completion_tokens", 9}}),
                                    limits());
  EXPECT_EQ(r.max_tokens, 9);
  r = parse_completion_request(completion({}), limits());
  EXPECT_FALSE(r.max_tokens.has_value());
}

TEST(RequestParser, RefusesBadValuesNamingTheField) {
  struct Case {
    json extra;
    std::string param;
  };
  const std::vector<Case> cases = {
      {{{"max_tokens", 0}}, "max_tokens"},
      {{{"max_tokens", -1}}, "max_tokens"},
      {{{"max_tokens", 1e12}}, "max_tokens"},
      {{{"max_tokens", "5"}}, "max_tokens"},
      {{{"max_tokens", 2.5}}, "max_tokens"},
      {{{"max_completion_tokens", 0}}, "max_completion_tokens"},
      {{{"n", 0}}, "n"},
      {{{"n", 17}}, "n"},
      {{{"temperature", -0.1}}, "temperature"},
      {{{"temperature", 2.01}}, "temperature"},
      {{{"temperature", "hot"}}, "temperature"},
      {{{"top_p", 0}}, "top_p"},
      {{{"top_p", 1.5}}, "top_p"},
      {{{"min_p", 1.5}}, "min_p"},
      {{{"presence_penalty", 2.5}}, "presence_penalty"},
      {{{"frequency_penalty", -3}}, "frequency_penalty"},
      {{{"repetition_penalty", 0}}, "repetition_penalty"},
      {{{"logit_bias", {{"1000", 1}}}}, "logit_bias"},
      {{{"logit_bias", {{"-1", 1}}}}, "logit_bias"},
      {{{"logit_bias", {{"abc", 1}}}}, "logit_bias"},
      {{{"logit_bias", {{"5", 101}}}}, "logit_bias"},
      {{{"logit_bias", {{"5", "x"}}}}, "logit_bias"},
      {{{"logit_bias", json::array()}}, "logit_bias"},
      {{{"stop", json::array({"a", "b", "c", "d", "e"})}}, "stop"},
      {{{"stop", 5}}, "stop"},
      {{{"stop", json::array({""})}}, "stop"},
      {{{"logprobs", 21}}, "logprobs"},
      {{{"logprobs", true}}, "logprobs"},
      {{{"seed", "x"}}, "seed"},
      {{{"stream", "yes"}}, "stream"},
      {{{"stream_options", {{"include_usage", true}}}}, "stream_options"},
      {{{"prompt", ""}}, "prompt"},
      {{{"prompt", json::array()}}, "prompt"},
      {{{"prompt", 5}}, "prompt"},
      {{{"prompt", json::array({1, 1000})}}, "prompt"},
      {{{"prompt", json::array({1, -1})}}, "prompt"},
      {{{"prompt", json::array({json::array()})}}, "prompt"},
      {{{"model", ""}}, "model"},
      {{{"model", 3}}, "model"},
      {{{"echo", "no"}}, "echo"},
      {{{"stop_token_ids", json::array({5000})}}, "stop_token_ids"},
  };
  for (const Case& c : cases) {
    auto [status, param] = refusal(completion(c.extra));
    EXPECT_EQ(status, 400) << c.extra.dump();
    EXPECT_EQ(param, c.param) << c.extra.dump();
  }
  json no_prompt = {{"model", "m"}};
  EXPECT_EQ(refusal(no_prompt).second, "prompt");
  EXPECT_EQ(refusal(json::array({1, 2})).first, 400);
  EXPECT_EQ(refusal(json("text")).first, 400);
}

TEST(RequestParser, NullMeansAbsent) {
  auto r = parse_completion_request(
      completion({{"max_tokens", nullptr}, {"stop", nullptr}, {"temperature", nullptr}}), limits());
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_TRUE(r.stop.empty());
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
}

TEST(RequestParser, ChatMessagesAreFlattened) {
  json messages = json::array(
      {{{"role", "system"}, {"content", "be brief"}},
       {{"role", "user"},
        {"content",
         json::array({{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}})}},
       {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({{{"id", "1"}}})}},
       {{"role", "tool"}, {"content", "42"}, {"tool_call_id", "1"}}});
  OpenAiRequest r = parse_chat_request(chat({{"messages", messages},
                                             {"logprobs", true},
                                             {"top_logprobs", 2},
                                             {"stream", true},
                                             {"stream_options", {{"include_usage", true}}}}),
                                       limits());
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[1]["content"], "a\nb");
  EXPECT_TRUE(r.messages[2]["content"].is_null());
  EXPECT_EQ(r.messages[3]["tool_call_id"], "1");
  EXPECT_TRUE(r.sampling.logprobs);
  EXPECT_EQ(r.sampling.n_top_logprobs, 2);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

TEST(RequestParser, ChatRefusals) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"messages", json::array()}}, "messages"},
      {{{"messages", "hi"}}, "messages"},
      {{{"messages", json::array({"hi"})}}, "messages[0]"},
      {{{"messages", json::array({{{"content", "x"}}})}}, "messages[0].role"},
      {{{"messages", json::array({{{"role", "wizard"}, {"content", "x"}}})}}, "messages[0].role"},
      {{{"messages", json::array({{{"role", "user"}}})}}, "messages[0].content"},
      {{{"messages", json::array({{{"role", "user"}, {"content", 5}}})}}, "messages[0].content"},
      {{{"messages",
         json::array({{{"role", "user"}, {"content", json::array({{{"type", "image_url"}}})}}})}},
       "messages[0].content[0].type"},
      {{{"top_logprobs", 21}, {"logprobs", true}}, "top_logprobs"},
      {{{"top_logprobs", 2}}, "top_logprobs"},
      {{{"logprobs", 3}}, "logprobs"},
      {{{"tools", "x"}}, "tools"},
  };
  for (const auto& [extra, param] : cases) {
    auto [status, p] = refusal(chat(extra), /*chat=*/true);
    EXPECT_EQ(status, 400) << extra.dump();
    EXPECT_EQ(p, param) << extra.dump();
  }
  json no_messages = {{"model", "m"}};
  EXPECT_EQ(refusal(no_messages, true).second, "messages");
}

TEST(RequestParser, ErrorJsonShape) {
  ApiError e(400, "temperature: out of range", "temperature");
  json j = e.to_json();
  EXPECT_EQ(j["error"]["message"], "temperature: out of range");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "temperature");
  EXPECT_TRUE(j["error"]["code"].is_null());
  ApiError nf(404, "no such model", "model", "model_not_found");
  EXPECT_EQ(nf.to_json()["error"]["type"], "not_found_error");
  EXPECT_EQ(nf.to_json()["error"]["code"], "model_not_found");
  EXPECT_EQ(ApiError(429, "busy").to_json()["error"]["type"], "rate_limit_error");
}

TEST(RequestParser, TokenizeBodies) {
  TokenizeRequest t = parse_tokenize_request({{"prompt", "abc"}, {"add_special_tokens", false}});
  EXPECT_FALSE(t.is_chat);
  EXPECT_EQ(t.prompt, "abc");
  EXPECT_FALSE(t.add_special_tokens);
  EXPECT_THROW(parse_tokenize_request({{"prompt", 3}}), ApiError);
  EXPECT_EQ(parse_detokenize_request({{"tokens", {1, 2}}}, 10), (std::vector<int32_t>{1, 2}));
  EXPECT_THROW(parse_detokenize_request({{"tokens", {1, 20}}}, 10), ApiError);
  EXPECT_THROW(parse_detokenize_request({{"tokens", "x"}}, 10), ApiError);
}

}  // namespace
}  // namespace llms::server
