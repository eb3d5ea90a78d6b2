// The hand-written stream chunks and JSON string escaper against nlohmann's output: the bytes
// must be exactly what dump_json gives for the same JSON tree (the path they replaced), for
// every kind of chunk and for tricky strings (quotes, backslashes, control characters,
// multi-byte UTF-8, invalid UTF-8).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/json_body.h"
#include "server/openai_response.h"
#include "server_test_util.h"
#include "tokenizer/tokenizer.h"

namespace llms::server {
namespace {

using nlohmann::json;

std::vector<std::string> tricky_strings() {
  std::vector<std::string> out = {
      "",
      "plain text",
      "quote \" and backslash \\ and slash /",
      "\"\\\"\\\\",
      "line1\nline2\r\n\ttab\bback\fform",
      std::string("nul\0byte", 8),
      "\x01\x02\x1f\x7f del",
      "caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80 emoji",
      "\xEF\xBB\xBF bom and U+2028 \xE2\x80\xA8 U+FFFF \xEF\xBF\xBF",
      "\xF4\x8F\xBF\xBF max code point",
      // Invalid UTF-8: lone continuation, truncated sequences (inside and at the end), overlong
      // forms, surrogates, above U+10FFFF, bytes that never occur.
      "lone \x80 continuation",
      "truncated \xE4\xB8 then text",
      "ends in a truncated sequence \xF0\x9F\x98",
      "\xC3",
      "overlong \xC0\xAF and \xE0\x80\xAF",
      "surrogate \xED\xA0\x80 half",
      "above max \xF4\x90\x80\x80",
      "\xFE\xFF bytes",
      "mixed \xC3\xA9\x80\xC3 \" \x01 \xE2\x82",
  };
  std::string all_bytes;
  for (int c = 0; c < 256; ++c) all_bytes.push_back(static_cast<char>(c));
  out.push_back(all_bytes);
  std::string controls;
  for (int c = 0; c < 0x20; ++c) controls.push_back(static_cast<char>(c));
  out.push_back(controls);
  return out;
}

TEST(AppendJsonString, MatchesNlohmannDump) {
  for (const std::string& s : tricky_strings()) {
    std::string got = "prefix:";
    append_json_string(got, s);
    EXPECT_EQ(got, "prefix:" + dump_json(json(s)))
        << json(s).dump(-1, ' ', true, json::error_handler_t::replace);
  }
}

TEST(AppendJsonString, EscapesAsExpected) {
  std::string out;
  append_json_string(out, "a\"b\\c\n\x01\xC3\xA9");
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\u0001\xC3\xA9\"");
  out.clear();
  append_json_string(out, "bad \xC3 x");  // a truncated sequence becomes U+FFFD
  EXPECT_EQ(out, "\"bad \xEF\xBF\xBD x\"");
}

using testing::tiny_tokenizer;

// The chunk the old nlohmann path built for an event (logprobs aside), dumped the same way.
std::string reference_chunk(Endpoint endpoint, const std::string& id, int64_t created,
                            const std::string& model, int32_t index, const std::string& text,
                            const engine::RequestOutput& out, bool include_usage,
                            const json& logprobs) {
  json choice = {{"index", index},
                 {"logprobs", logprobs},
                 {"finish_reason",
                  out.finished ? json(finish_reason_string(out.finish_reason)) : json(nullptr)}};
  if (endpoint == Endpoint::kChat) {
    choice["delta"] = text.empty() ? json::object() : json{{"content", text}};
  } else {
    choice["text"] = text;
  }
  if (out.finished) {
    choice["stop_reason"] = out.stop_reason.empty() ? json(nullptr) : json(out.stop_reason);
  }
  json chunk = {
      {"id", id},
      {"object", endpoint == Endpoint::kChat ? "chat.completion.chunk" : "text_completion"},
      {"created", created},
      {"model", model},
      {"choices", json::array({choice})}};
  if (include_usage) chunk["usage"] = nullptr;
  return "data: " + dump_json(chunk) + "\n\n";
}

std::string reference_role_chunk(const std::string& id, int64_t created, const std::string& model,
                                 int32_t index, bool include_usage) {
  json chunk = {{"id", id},
                {"object", "chat.completion.chunk"},
                {"created", created},
                {"model", model},
                {"choices", json::array({{{"index", index},
                                          {"delta", {{"role", "assistant"}, {"content", ""}}},
                                          {"logprobs", nullptr},
                                          {"finish_reason", nullptr}}})}};
  if (include_usage) chunk["usage"] = nullptr;
  return "data: " + dump_json(chunk) + "\n\n";
}

engine::RequestOutput output(std::string text, bool finished = false,
                             engine::FinishReason reason = engine::FinishReason::kNone,
                             std::string stop_reason = "") {
  engine::RequestOutput o;
  o.text = std::move(text);
  o.tokens.push_back({0, -0.5f, {}});
  o.finished = finished;
  o.finish_reason = reason;
  o.stop_reason = std::move(stop_reason);
  return o;
}

TEST(StreamChunk, EveryShapeMatchesTheNlohmannPath) {
  tokenizer::Tokenizer tok = tiny_tokenizer();
  const std::string id = "cmpl-\"odd\\id\"";
  const std::string model = "m\xC3\xA9\n";
  int n_checked = 0;
  for (Endpoint endpoint : {Endpoint::kChat, Endpoint::kCompletions}) {
    for (bool usage : {false, true}) {
      for (const std::string& text : tricky_strings()) {
        ResponseBuilder b(endpoint, id, 1700000000123, model, 3, /*logprobs=*/false, tok);
        const std::vector<engine::RequestOutput> events = {
            output(text), output(""),
            output(text, true, engine::FinishReason::kStop, "st\"op\x01\xC3"),
            output("", true, engine::FinishReason::kLength)};
        const int32_t index = endpoint == Endpoint::kChat ? 2 : 1;
        for (size_t e = 0; e < events.size(); ++e) {
          std::string got;
          b.stream_event(index, events[e], usage, got);
          std::string want;
          if (e == 0 && endpoint == Endpoint::kChat) {
            want += reference_role_chunk(id, 1700000000123, model, index, usage);
          }
          want += reference_chunk(endpoint, id, 1700000000123, model, index, events[e].text,
                                  events[e], usage, nullptr);
          EXPECT_EQ(got, want);
          ++n_checked;
        }
      }
    }
  }
  EXPECT_EQ(n_checked, 2 * 2 * static_cast<int>(tricky_strings().size()) * 4);
}

TEST(StreamChunk, EmptyEventWithoutTokensSendsNothing) {
  tokenizer::Tokenizer tok = tiny_tokenizer();
  ResponseBuilder b(Endpoint::kCompletions, "c", 1, "m", 1, false, tok);
  engine::RequestOutput o;  // no text, no tokens, not finished
  std::string got;
  b.stream_event(0, o, false, got);
  EXPECT_EQ(got, "");
}

TEST(StreamChunk, EchoGoesWithTheFirstChunkOnly) {
  tokenizer::Tokenizer tok = tiny_tokenizer();
  ResponseBuilder b(Endpoint::kCompletions, "c", 5, "m", 1, false, tok);
  b.set_prefix(0, "P\":");
  std::string got;
  b.stream_event(0, output("ab"), false, got);
  EXPECT_EQ(got, reference_chunk(Endpoint::kCompletions, "c", 5, "m", 0, "P\":ab", output("ab"),
                                 false, nullptr));
  got.clear();
  b.stream_event(0, output("c"), false, got);
  EXPECT_EQ(got, reference_chunk(Endpoint::kCompletions, "c", 5, "m", 0, "c", output("c"), false,
                                 nullptr));
}

TEST(StreamChunk, LogprobsMatchTheNlohmannPath) {
  tokenizer::Tokenizer tok = tiny_tokenizer();
  engine::RequestOutput o;
  o.text = "ab";
  o.tokens.push_back({0, -0.5f, {{0, -0.5f}, {3, -2.0f}}});
  o.tokens.push_back({1, -std::numeric_limits<float>::infinity(), {}});
  {
    ResponseBuilder b(Endpoint::kCompletions, "c", 1, "m", 1, true, tok);
    std::string got;
    b.stream_event(0, o, true, got);
    const json lp = {{"tokens", {"a", "b"}},
                     {"token_logprobs", {-0.5, -9999.0}},
                     {"top_logprobs", {{{"a", -0.5}, {"!", -2.0}}, json::object()}},
                     {"text_offset", {0, 1}}};
    EXPECT_EQ(got, reference_chunk(Endpoint::kCompletions, "c", 1, "m", 0, "ab", o, true, lp));
  }
  {
    ResponseBuilder b(Endpoint::kChat, "c", 1, "m", 1, true, tok);
    std::string got;
    b.stream_event(0, o, false, got);
    const json lp = {{"content",
                      {{{"token", "a"},
                        {"logprob", -0.5},
                        {"bytes", {97}},
                        {"top_logprobs",
                         {{{"token", "a"}, {"logprob", -0.5}, {"bytes", {97}}},
                          {{"token", "!"}, {"logprob", -2.0}, {"bytes", {33}}}}}},
                       {{"token", "b"},
                        {"logprob", -9999.0},
                        {"bytes", {98}},
                        {"top_logprobs", json::array()}}}}};
    EXPECT_EQ(got, reference_role_chunk("c", 1, "m", 0, false) +
                       reference_chunk(Endpoint::kChat, "c", 1, "m", 0, "ab", o, false, lp));
  }
}

}  // namespace
}  // namespace llms::server
