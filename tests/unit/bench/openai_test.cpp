// Reading OpenAI-style chunks and building request bodies.
#include "bench/openai.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace llms::bench {
namespace {

using json = nlohmann::json;

TEST(StreamChunk, CompletionText) {
  ChunkInfo c =
      read_stream_chunk(R"({"choices":[{"index":0,"text":" hello","finish_reason":null}]})");
  EXPECT_TRUE(c.has_content);
  EXPECT_EQ(c.content_bytes, 6u);
  EXPECT_FALSE(c.usage);
  EXPECT_FALSE(c.is_done);
}

TEST(StreamChunk, ChatRoleOnlyChunkHasNoContent) {
  ChunkInfo role = read_stream_chunk(
      R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]})");
  EXPECT_FALSE(role.has_content);
  ChunkInfo text = read_stream_chunk(R"({"choices":[{"index":0,"delta":{"content":"Hi"}}]})");
  EXPECT_TRUE(text.has_content);
  ChunkInfo reasoning =
      read_stream_chunk(R"({"choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]})");
  EXPECT_TRUE(reasoning.has_content);
  ChunkInfo tool = read_stream_chunk(
      R"({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":""}}]}}]})");
  EXPECT_TRUE(tool.has_content);
  ChunkInfo finish = read_stream_chunk(R"({"choices":[{"delta":{},"finish_reason":"stop"}]})");
  EXPECT_FALSE(finish.has_content);
}

TEST(StreamChunk, UsageWithAndWithoutCachedTokens) {
  ChunkInfo c = read_stream_chunk(
      R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46,)"
      R"("prompt_tokens_details":{"cached_tokens":8}}})");
  ASSERT_TRUE(c.usage);
  EXPECT_EQ(c.usage->prompt_tokens, 12);
  EXPECT_EQ(c.usage->completion_tokens, 34);
  EXPECT_EQ(c.usage->cached_tokens, 8);
  EXPECT_FALSE(c.has_content);
  ChunkInfo n = read_stream_chunk(
      R"({"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"prompt_tokens_details":null}})");
  ASSERT_TRUE(n.usage);
  EXPECT_EQ(n.usage->cached_tokens, -1);
  ChunkInfo none = read_stream_chunk(R"({"choices":[{"text":"x"}],"usage":null})");
  EXPECT_FALSE(none.usage);
}

TEST(StreamChunk, DoneErrorsAndGarbage) {
  EXPECT_TRUE(read_stream_chunk("[DONE]").is_done);
  EXPECT_TRUE(read_stream_chunk(" [DONE] \r").is_done);
  ChunkInfo e = read_stream_chunk(R"({"error":{"message":"overloaded","code":503}})");
  ASSERT_TRUE(e.error);
  EXPECT_EQ(*e.error, "overloaded");
  ChunkInfo v = read_stream_chunk(R"({"object":"error","message":"bad","code":400})");
  ASSERT_TRUE(v.error);
  EXPECT_EQ(*v.error, "bad");
  ChunkInfo odd = read_stream_chunk(R"({"object":"error","message":5})");
  ASSERT_TRUE(odd.error);
  EXPECT_EQ(*odd.error, "error");
  ChunkInfo odd2 = read_stream_chunk(R"({"error":"plain string"})");
  ASSERT_TRUE(odd2.error);
  EXPECT_EQ(*odd2.error, "plain string");
  ChunkInfo odd3 = read_stream_chunk(R"({"choices":[5,{"text":7},{"delta":"x"}],"usage":[]})");
  EXPECT_FALSE(odd3.has_content);
  EXPECT_FALSE(odd3.usage);
  EXPECT_TRUE(read_stream_chunk("{not json").is_malformed);
  EXPECT_TRUE(read_stream_chunk("[1,2]").is_malformed);
}

// The one-pass reader: fields at the wrong depth or of the wrong type do not count, nesting
// deeper than the fields read is skipped, and anything that is not one JSON object is malformed.
TEST(StreamChunk, OnePassReaderEdgeCases) {
  ChunkInfo nested = read_stream_chunk(
      R"({"x":{"choices":[{"text":"no"}],"text":"no"},"choices":[{"delta":{"content":"\u00e9\"",)"
      R"("tool_calls":[]},"logprobs":{"content":[{"token":"t","top":[[[[[[[[["deep"]]]]]]]]]}]},)"
      R"("message":{"reasoning":"ab"},"text":null}],"usage":{"prompt_tokens":3.5,)"
      R"("completion_tokens":4,"prompt_tokens_details":{"cached_tokens":"x"}},"error":null})");
  EXPECT_FALSE(nested.is_malformed);
  EXPECT_FALSE(nested.error.has_value());
  EXPECT_TRUE(nested.has_content);
  EXPECT_EQ(nested.content_bytes, 3u + 2u);  // "é"" (3 bytes decoded) + "ab"
  ASSERT_TRUE(nested.usage.has_value());
  EXPECT_EQ(nested.usage->prompt_tokens, -1);  // not an integer
  EXPECT_EQ(nested.usage->completion_tokens, 4);
  EXPECT_EQ(nested.usage->cached_tokens, -1);
  ChunkInfo tools = read_stream_chunk(R"({"choices":[{"delta":{"tool_calls":[{"id":"1"}]}}]})");
  EXPECT_TRUE(tools.has_content);
  EXPECT_EQ(tools.content_bytes, 0u);
  ChunkInfo big = read_stream_chunk(R"({"usage":{"prompt_tokens":18446744073709551615}})");
  ASSERT_TRUE(big.usage.has_value());
  EXPECT_EQ(big.usage->prompt_tokens, -1);  // as get<int64_t> of that unsigned value
  ChunkInfo err = read_stream_chunk(R"({"choices":[],"error":[1,2]})");
  EXPECT_EQ(err.error, "[1,2]");
  EXPECT_TRUE(read_stream_chunk(R"({"choices":[{"text":"x"}]} trailing)").is_malformed);
  EXPECT_TRUE(read_stream_chunk(R"({"choices":[{"text":"x"})").is_malformed);
  EXPECT_TRUE(read_stream_chunk("\"text\"").is_malformed);
  EXPECT_TRUE(read_stream_chunk("").is_malformed);
  EXPECT_TRUE(read_stream_chunk(R"({"text":"\ud800"})").is_malformed);  // a lone surrogate
}

TEST(FullResponse, ReadsMessageAndUsage) {
  ChunkInfo c = read_full_response(
      R"({"choices":[{"message":{"role":"assistant","content":"four"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}})");
  EXPECT_TRUE(c.is_done);
  EXPECT_TRUE(c.has_content);
  ASSERT_TRUE(c.usage);
  EXPECT_EQ(c.usage->completion_tokens, 1);
  EXPECT_EQ(error_message_of(R"({"error":{"message":"no such model"}})"), "no such model");
  EXPECT_EQ(error_message_of(R"({"message":"plain"})"), "plain");
  EXPECT_EQ(error_message_of("Bad\ngateway"), "Bad gateway");
}

TEST(RequestBody, CompletionsStreamingAsksForUsage) {
  RequestOptions o;
  o.model = "m";
  o.ignore_eos = true;
  o.temperature = 0.0;
  o.extra_body = {{"top_k", 5}, {"temperature", 0.5}};
  Prompt p;
  p.text = "hi";
  p.max_tokens = 7;
  json body = json::parse(build_request_body(o, p));
  EXPECT_EQ(body["model"], "m");
  EXPECT_EQ(body["prompt"], "hi");
  EXPECT_EQ(body["max_tokens"], 7);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(body["top_k"], 5);
  EXPECT_EQ(body["temperature"], 0.5);  // extra body wins
}

TEST(RequestBody, ChatWrapsTextAndKeepsMessages) {
  RequestOptions o;
  o.api = Api::kChat;
  o.stream = false;
  Prompt p;
  p.text = "question";
  json body = json::parse(build_request_body(o, p));
  EXPECT_FALSE(body.contains("model"));
  EXPECT_EQ(body["messages"], json::parse(R"([{"role":"user","content":"question"}])"));
  EXPECT_EQ(body["stream"], false);
  EXPECT_FALSE(body.contains("stream_options"));
  EXPECT_FALSE(body.contains("max_tokens"));
  Prompt chat;
  chat.messages = json::parse(R"([{"role":"system","content":"s"},{"role":"user","content":"u"}])");
  EXPECT_EQ(json::parse(build_request_body(o, chat))["messages"], chat.messages);
  o.api = Api::kCompletions;
  EXPECT_THROW(build_request_body(o, chat), Error);
  EXPECT_STREQ(api_path(Api::kChat), "/v1/chat/completions");
}

}  // namespace
}  // namespace llms::bench
