// server/openai_response: OpenAI response bodies and stream chunks for one HTTP request.
//
// A request is n_prompts x n choices (choice index = prompt * n + sample). The builder is fed the
// engine's RequestOutput events for each choice and produces either the stream chunks for each
// event (chat.completion.chunk / text_completion) or, once everything finished, the whole
// response (chat.completion / text_completion). Usage is the sum over the prompts, with
// prompt_tokens_details.cached_tokens.
//
// Not thread-safe: used on the connection's strand only.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/request.h"
#include "server/openai_request.h"
#include "server/reasoning.h"
#include "server/tool_calls.h"

namespace llms::tokenizer {
class Tokenizer;
}

namespace llms::server {

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
};

nlohmann::json usage_json(const Usage& usage);

class ResponseBuilder {
 public:
  // `tok` (for logprob token strings) must outlive the builder.
  ResponseBuilder(Endpoint endpoint, std::string id, int64_t created, std::string model,
                  int32_t n_choices, bool logprobs, const tokenizer::Tokenizer& tok);

  // Chat with tools: each choice's text is parsed for tool calls in `format` (content and
  // message.tool_calls / delta.tool_calls, finish_reason "tool_calls" when it made any).
  void enable_tool_calls(ToolCallFormat format);
  // Chat with a reasoning model: thinking goes to message.reasoning_content /
  // delta.reasoning_content (before tool calls are looked for in the rest).
  void enable_reasoning(bool starts_inside);

  // Echo (completions): text placed before choice `index`'s output.
  void set_prefix(int32_t index, std::string text);
  // Adds one prompt's final metrics to the usage.
  void add_usage(const engine::RequestMetrics& metrics);

  // Records an event for choice `index` (non-streaming use).
  void accumulate(int32_t index, const engine::RequestOutput& out);
  // The stream chunks an event produces (chat: the role chunk first for a new choice; a chunk
  // with the text; the finish_reason on the chunk of the last event). Appends SSE events to `sse`.
  void stream_event(int32_t index, const engine::RequestOutput& out, bool include_usage_field,
                    std::string& sse);
  // The final usage chunk (stream_options.include_usage).
  nlohmann::json usage_chunk() const;
  // The whole response; call when every choice finished.
  nlohmann::json final_response() const;

  const Usage& usage() const { return usage_; }
  const std::string& id() const { return id_; }

 private:
  struct Choice {
    std::string text;
    std::vector<engine::TokenOutput> tokens;  // when logprobs were asked
    std::string finish_reason;
    std::string stop_reason;
    bool started = false;                         // stream: first chunk sent
    std::unique_ptr<ToolCallParser> tool_parser;  // chat with tools
    std::vector<ToolCall> tool_calls;
    std::unique_ptr<ReasoningParser> reasoning_parser;  // chat with a reasoning model
    std::string reasoning;
  };
  // Runs an event's text through the choice's parsers: appends to `reasoning`, `content` and the
  // choice's tool calls what the text surely adds.
  void split_output(Choice& c, std::string_view text, bool finished, std::string& reasoning,
                    std::string& content);
  // A finished choice's finish_reason: "tool_calls" instead of "stop" when it made calls.
  static std::string finish_reason_of(const Choice& c, const std::string& finish);
  static nlohmann::json tool_call_json(const ToolCall& call, size_t index, bool streamed);

  nlohmann::json logprobs_json(const std::vector<engine::TokenOutput>& tokens,
                               size_t text_offset) const;
  nlohmann::json chunk_base() const;
  void begin_chunk(std::string& sse) const;
  void end_chunk(std::string& sse, bool include_usage_field);

  Endpoint endpoint_;
  std::string id_;
  int64_t created_;
  std::string model_;
  bool logprobs_;
  const tokenizer::Tokenizer& tok_;
  std::vector<Choice> choices_;
  std::string stream_content_;    // scratch: content a stream event releases
  std::string stream_reasoning_;  // scratch: reasoning a stream event releases
  std::string answer_scratch_;    // scratch: the answer part before tool calls are looked for
  Usage usage_;
  std::string chunk_tail_;  // ,"created":..,"id":..,"model":..,"object":.. of every chunk
};

// "stop" / "length"; an abort is reported as "abort" (the caller decides what to send instead).
std::string finish_reason_string(engine::FinishReason reason);

}  // namespace llms::server
