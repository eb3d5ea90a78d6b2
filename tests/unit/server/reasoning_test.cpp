// ReasoningParser: thinking up to </think> is reasoning, the rest content; an output that never
// opens the tag is content, one cut while thinking is reasoning; a prompt that opened the tag
// starts inside; any piece size gives the same split; the builder puts it in
// message.reasoning_content and delta.reasoning_content and still finds tool calls in the answer.
#include "server/reasoning.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/openai_response.h"
#include "server_test_util.h"
#include "tokenizer/tokenizer.h"

namespace llms::server {
namespace {

std::pair<std::string, std::string> split(const std::string& text, bool inside) {
  std::pair<std::string, std::string> whole;
  for (size_t piece : {text.size() + 1, size_t{1}, size_t{2}, size_t{3}, size_t{5}}) {
    ReasoningParser p(inside);
    std::string reasoning, content;
    for (size_t i = 0; i < text.size(); i += piece) {
      p.push(std::string_view(text).substr(i, piece), reasoning, content);
    }
    p.finish(reasoning, content);
    if (piece == text.size() + 1) {
      whole = {reasoning, content};
    } else {
      EXPECT_EQ(reasoning, whole.first) << "piece " << piece;
      EXPECT_EQ(content, whole.second) << "piece " << piece;
    }
  }
  return whole;
}

TEST(Reasoning, ThinkingThenAnswer) {
  EXPECT_EQ(split("<think>\nLet me see: 2+2.\n</think>\n\nIt is 4.", false),
            std::make_pair(std::string("\nLet me see: 2+2.\n"), std::string("It is 4.")));
  EXPECT_EQ(split("  <think>a</think>b", false),
            std::make_pair(std::string("a"), std::string("b")));
  // The prompt opened the tag (DeepSeek-R1's template).
  EXPECT_EQ(split("hmm, 4.</think>Four.", true),
            std::make_pair(std::string("hmm, 4."), std::string("Four.")));
}

TEST(Reasoning, NoTagIsContentAndACutThoughtIsReasoning) {
  EXPECT_EQ(split("Just an answer <think> inline.", false),
            std::make_pair(std::string(), std::string("Just an answer <think> inline.")));
  EXPECT_EQ(split("<thin", false), std::make_pair(std::string(), std::string("<thin")));
  EXPECT_EQ(split("<think>still thinking </thi", false),
            std::make_pair(std::string("still thinking </thi"), std::string()));
  EXPECT_TRUE(template_has_reasoning("{{ '<think>' }} ... </think>"));
  EXPECT_FALSE(template_has_reasoning("{{ messages }}"));
}

TEST(Reasoning, TheBuilderReportsItBesideContentAndToolCalls) {
  tokenizer::Tokenizer tok = testing::tiny_tokenizer();
  const std::string out =
      "<think>call the tool</think>\n<tool_call>{\"name\": \"f\", "
      "\"arguments\": {\"x\": 1}}</tool_call>";
  engine::RequestOutput o;
  o.text = out;
  o.finished = true;
  o.finish_reason = engine::FinishReason::kStop;
  ResponseBuilder whole(Endpoint::kChat, "chatcmpl-1", 1, "m", 1, false, tok);
  whole.enable_reasoning(false);
  whole.enable_tool_calls(ToolCallFormat::kHermes);
  whole.accumulate(0, o);
  const nlohmann::json msg = whole.final_response()["choices"][0]["message"];
  EXPECT_EQ(msg["reasoning_content"], "call the tool");
  EXPECT_TRUE(msg["content"].is_null());
  ASSERT_EQ(msg["tool_calls"].size(), 1u);
  EXPECT_EQ(whole.final_response()["choices"][0]["finish_reason"], "tool_calls");

  ResponseBuilder streamed(Endpoint::kChat, "chatcmpl-2", 1, "m", 1, false, tok);
  streamed.enable_reasoning(false);
  std::string sse;
  for (size_t i = 0; i < out.size(); i += 4) {
    engine::RequestOutput piece;
    piece.text = out.substr(i, 4);
    piece.finished = i + 4 >= out.size();
    piece.finish_reason =
        piece.finished ? engine::FinishReason::kStop : engine::FinishReason::kNone;
    streamed.stream_event(0, piece, false, sse);
  }
  std::string reasoning, content;
  size_t pos = 0;
  while ((pos = sse.find("data: ", pos)) != std::string::npos) {
    const size_t end = sse.find("\n\n", pos);
    const auto ev = nlohmann::json::parse(sse.substr(pos + 6, end - pos - 6));
    const auto& d = ev["choices"][0]["delta"];
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content")) content += d["content"].get<std::string>();
    pos = end;
  }
  EXPECT_EQ(reasoning, "call the tool");
  EXPECT_EQ(content,
            "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}}</tool_call>");  // no tools
}

}  // namespace
}  // namespace llms::server
