// SSE framing, Prometheus text and the OpenAI response/chunk shapes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "server/openai_response.h"
#include "server/prometheus.h"
#include "server/sse.h"
#include "server_test_util.h"
#include "tokenizer/tokenizer.h"

namespace llms::server {
namespace {

using nlohmann::json;

TEST(Sse, FramesOneLineEvents) {
  std::string out;
  append_sse_event(out, {{"text", "line1\nline2"}});
  EXPECT_EQ(out, "data: {\"text\":\"line1\\nline2\"}\n\n");
  EXPECT_EQ(std::string(kSseDone), "data: [DONE]\n\n");
}

engine::Histogram histogram() {
  engine::Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(5.0);
  return h;
}

TEST(Prometheus, RendersVllmNamesAndCumulativeBuckets) {
  engine::EngineMetrics m;
  m.n_running = 2;
  m.n_waiting = 3;
  m.kv_usage = 0.25;
  m.prompt_tokens_total = 100;
  m.generation_tokens_total = 40;
  m.kv_blocks_total = 10;
  m.kv_blocks_free = 7;
  m.time_to_first_token = histogram();
  ServerCounters s;
  s.aborted_by_client_total = 4;
  const std::string text = render_prometheus(m, s, "qw\"en");
  EXPECT_NE(text.find("# TYPE vllm:num_requests_running gauge\n"
                      "vllm:num_requests_running{model_name=\"qw\\\"en\"} 2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("vllm:num_requests_waiting{model_name=\"qw\\\"en\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("vllm:kv_cache_usage_perc{model_name=\"qw\\\"en\"} 0.25\n"),
            std::string::npos);
  EXPECT_NE(text.find("vllm:prompt_tokens_total{model_name=\"qw\\\"en\"} 100\n"),
            std::string::npos);
  EXPECT_NE(text.find("vllm:generation_tokens_total{model_name=\"qw\\\"en\"} 40\n"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE vllm:time_to_first_token_seconds histogram\n"), std::string::npos);
  EXPECT_NE(
      text.find("vllm:time_to_first_token_seconds_bucket{model_name=\"qw\\\"en\",le=\"0.1\"} 1\n"),
      std::string::npos);
  EXPECT_NE(
      text.find("vllm:time_to_first_token_seconds_bucket{model_name=\"qw\\\"en\",le=\"1\"} 2\n"),
      std::string::npos);
  EXPECT_NE(
      text.find("vllm:time_to_first_token_seconds_bucket{model_name=\"qw\\\"en\",le=\"+Inf\"} 3\n"),
      std::string::npos);
  EXPECT_NE(text.find("vllm:time_to_first_token_seconds_count{model_name=\"qw\\\"en\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("vllm:time_to_first_token_seconds_sum{model_name=\"qw\\\"en\"} 5.55\n"),
            std::string::npos);
  for (const char* name :
       {"vllm:prefix_cache_queries", "vllm:prefix_cache_hits", "vllm:num_preemptions_total",
        "vllm:inter_token_latency_seconds", "vllm:e2e_request_latency_seconds",
        "vllm:request_queue_time_seconds", "llmserve:kv_cache_blocks_free"}) {
    EXPECT_NE(text.find(std::string("# TYPE ") + name + " "), std::string::npos) << name;
  }
  EXPECT_NE(text.find("llmserve:kv_cache_blocks_free{model_name=\"qw\\\"en\"} 7\n"),
            std::string::npos);
  EXPECT_NE(text.find("llmserve:requests_aborted_by_client_total{model_name=\"qw\\\"en\"} 4\n"),
            std::string::npos);
  EXPECT_EQ(escape_label_value("a\\b\nc"), "a\\\\b\\nc");
}

using testing::tiny_tokenizer;

engine::RequestOutput event(int32_t index, std::string text, std::vector<int32_t> ids,
                            bool finished = false) {
  engine::RequestOutput o;
  o.index = index;
  o.text = std::move(text);
  for (int32_t id : ids) o.tokens.push_back({id, -0.5f, {{id, -0.5f}, {3, -2.0f}}});
  o.finished = finished;
  o.finish_reason = finished ? engine::FinishReason::kLength : engine::FinishReason::kNone;
  return o;
}

std::vector<json> parse_events(const std::string& sse) {
  std::vector<json> out;
  size_t pos = 0;
  while (pos < sse.size()) {
    EXPECT_EQ(sse.compare(pos, 6, "data: "), 0);
    const size_t end = sse.find("\n\n", pos);
    out.push_back(json::parse(sse.substr(pos + 6, end - pos - 6)));
    pos = end + 2;
  }
  return out;
}

TEST(ResponseBuilder, ChatStreamChunks) {
  tokenizer::Tokenizer tok = tiny_tokenizer();
  ResponseBuilder b(Endpoint::kChat, "chatcmpl-1", 123, "m", 1, /*logprobs=*/false, tok);
  std::string sse;
  b.stream_event(0, event(0, "ab", {0, 1}), /*include_usage_field=*/true, sse);
  b.stream_event(0, event(0, "c", {2}, true), true, sse);
  std::vector<json> ev = parse_events(sse);
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(ev[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(ev[0].contains("usage"));
  EXPECT_EQ(ev[1]["choices"][0]["delta"]["content"], "ab");
  EXPECT_TRUE(ev[1]["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(ev[2]["choices"][0]["delta"]["content"], "c");
  EXPECT_EQ(ev[2]["choices"][0]["finish_reason"], "length");
  engine::RequestMetrics m;
  m.n_prompt_tokens = 10;
  m.n_generated_tokens = 3;
  m.n_cached_tokens = 8;
  b.add_usage(m);
  json u = b.usage_chunk();
  EXPECT_TRUE(u["choices"].empty());
  EXPECT_EQ(u["usage"]["prompt_tokens"], 10);
  EXPECT_EQ(u["usage"]["completion_tokens"], 3);
  EXPECT_EQ(u["usage"]["total_tokens"], 13);
  EXPECT_EQ(u["usage"]["prompt_tokens_details"]["cached_tokens"], 8);
}

// Chat with tools: the Hermes calls of an output become message.tool_calls (content null when
// nothing else was said) with finish_reason "tool_calls"; streamed, the content goes out as
// it is released and each call as one delta.tool_calls entry with its index, id and arguments.
TEST(ResponseBuilder, ToolCallsWholeAndStreamed) {
  tokenizer::Tokenizer tok = tiny_tokenizer();
  const std::vector<std::string> pieces = {
      "<tool_", "call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
      "\n</tool_call>\n<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>"};
  auto stop_event = [](const std::string& text, bool finished) {
    engine::RequestOutput o;
    o.text = text;
    o.finished = finished;
    o.finish_reason = finished ? engine::FinishReason::kStop : engine::FinishReason::kNone;
    return o;
  };
  ResponseBuilder whole(Endpoint::kChat, "chatcmpl-7", 1, "m", 1, false, tok);
  whole.enable_tool_calls(ToolCallFormat::kHermes);
  for (size_t i = 0; i < pieces.size(); ++i) {
    whole.accumulate(0, stop_event(pieces[i], i + 1 == pieces.size()));
  }
  const json r = whole.final_response();
  const json& msg = r["choices"][0]["message"];
  EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(msg["content"], "\n");  // the newline between the calls is what the model said
  ASSERT_EQ(msg["tool_calls"].size(), 2u);
  EXPECT_EQ(msg["tool_calls"][0]["type"], "function");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["arguments"], "{\"city\":\"Paris\"}");
  EXPECT_FALSE(msg["tool_calls"][0].contains("index"));
  EXPECT_NE(msg["tool_calls"][0]["id"], msg["tool_calls"][1]["id"]);

  ResponseBuilder only(Endpoint::kChat, "chatcmpl-8", 1, "m", 1, false, tok);
  only.enable_tool_calls(ToolCallFormat::kHermes);
  only.accumulate(0,
                  stop_event("<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>", true));
  EXPECT_TRUE(only.final_response()["choices"][0]["message"]["content"].is_null());

  ResponseBuilder streamed(Endpoint::kChat, "chatcmpl-9", 1, "m", 1, false, tok);
  streamed.enable_tool_calls(ToolCallFormat::kHermes);
  std::string sse;
  for (size_t i = 0; i < pieces.size(); ++i) {
    streamed.stream_event(0, stop_event(pieces[i], i + 1 == pieces.size()), false, sse);
  }
  std::vector<json> ev = parse_events(sse);
  std::vector<json> calls;
  std::string content;
  std::string finish;
  for (const json& e : ev) {
    const json& c = e["choices"][0];
    if (c["delta"].contains("content")) content += c["delta"]["content"].get<std::string>();
    if (c["delta"].contains("tool_calls")) {
      for (const json& t : c["delta"]["tool_calls"]) calls.push_back(t);
    }
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  EXPECT_EQ(content, "\n");
  EXPECT_EQ(finish, "tool_calls");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[1]["index"], 1);
  EXPECT_EQ(calls[1]["function"]["name"], "get_time");
  EXPECT_EQ(calls[0]["function"]["arguments"], "{\"city\":\"Paris\"}");
  // The first piece, "<tool_", may begin a tag: it never went out as content.
  EXPECT_EQ(content.find("<tool"), std::string::npos);
}

TEST(ResponseBuilder, CompletionWithEchoAndLogprobs) {
  tokenizer::Tokenizer tok = tiny_tokenizer();
  ResponseBuilder b(Endpoint::kCompletions, "cmpl-1", 1, "m", 2, /*logprobs=*/true, tok);
  b.set_prefix(0, "P:");
  b.accumulate(0, event(0, "ab", {0, 1}));
  b.accumulate(0, event(0, "!", {3}, true));
  b.accumulate(1, event(1, "c", {2}, true));
  json r = b.final_response();
  EXPECT_EQ(r["object"], "text_completion");
  ASSERT_EQ(r["choices"].size(), 2u);
  EXPECT_EQ(r["choices"][0]["text"], "P:ab!");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["choices"][1]["index"], 1);
  const json& lp = r["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json::array({"a", "b", "!"}));
  EXPECT_EQ(lp["token_logprobs"].size(), 3u);
  EXPECT_EQ(lp["text_offset"], json::array({0, 1, 2}));
  EXPECT_DOUBLE_EQ(lp["top_logprobs"][0]["!"].get<double>(), -2.0);
  EXPECT_EQ(r["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}

TEST(ResponseBuilder, ChatLogprobsHaveBytes) {
  tokenizer::Tokenizer tok = tiny_tokenizer();
  ResponseBuilder b(Endpoint::kChat, "c", 1, "m", 1, /*logprobs=*/true, tok);
  b.accumulate(0, event(0, "a", {0}, true));
  json r = b.final_response();
  const json& c = r["choices"][0]["logprobs"]["content"][0];
  EXPECT_EQ(c["token"], "a");
  EXPECT_EQ(c["bytes"], json::array({97}));
  EXPECT_EQ(c["top_logprobs"].size(), 2u);
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(r["choices"][0]["message"]["content"], "a");
}

}  // namespace
}  // namespace llms::server
