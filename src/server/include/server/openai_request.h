// server/openai_request: OpenAI request bodies (/v1/completions, /v1/chat/completions) checked
// field by field and turned into plain values, with OpenAI's error semantics.
//
// Contract: every refusal is an ApiError 400 whose param names the field (messages[0].content,
// logit_bias, ...); unknown fields are ignored; null counts as absent. The checks here need only
// the vocabulary size and the caps in ParseLimits; what depends on the prompt's length (the
// context) is checked later, once the prompt is tokenized. Nothing here tokenizes.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "sampling/sampler.h"
#include "server/structured_output_request.h"

namespace llms::server {

enum class Endpoint { kCompletions, kChat };

struct ParseLimits {
  int32_t n_vocab = 0;
  int32_t max_n = 16;                // samples per prompt
  int32_t max_prompts = 64;          // prompts in one completions request
  int32_t max_stop = 4;              // stop strings
  int32_t max_top_logprobs = 20;     // alternatives per token
  int64_t max_tokens_cap = 1 << 24;  // larger max_tokens are refused outright
};

// One completions prompt: text, or token ids given by the client.
struct PromptInput {
  bool is_ids = false;
  std::string text;
  std::vector<int32_t> ids;
};

struct OpenAiRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;
  std::vector<PromptInput> prompts;  // completions: one or more
  nlohmann::json messages;           // chat: content parts flattened to strings
  nlohmann::json tools;              // chat: null or the array, passed to the template
  // chat: "auto", "none", "required", or the name of the function the request forces.
  std::string tool_choice = "auto";
  bool tool_choice_named = false;  // tool_choice names a function
  bool parallel_tool_calls = true;
  bool add_generation_prompt = true;
  std::optional<int32_t> max_tokens;  // none: up to the end of the context
  int32_t n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: prompt text before the output
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool skip_special_tokens = true;
  int32_t priority = 0;
  int32_t num_speculative_tokens = -1;  // extension: -1 the server's setting, 0 off, 1..16 a cap
  StructuredOutput structured;          // response_format, structured_outputs, guided_*
  sampling::SamplingParams sampling;    // logprobs / n_top_logprobs included
};

OpenAiRequest parse_completion_request(const nlohmann::json& body, const ParseLimits& limits);
OpenAiRequest parse_chat_request(const nlohmann::json& body, const ParseLimits& limits);

// The "model" field: must be a non-empty string when present; returns "" when absent.
std::string parse_model_field(const nlohmann::json& body);

// /tokenize and /detokenize bodies.
struct TokenizeRequest {
  bool is_chat = false;
  std::string prompt;
  nlohmann::json messages;
  bool add_special_tokens = true;
  bool add_generation_prompt = true;
};
TokenizeRequest parse_tokenize_request(const nlohmann::json& body);
std::vector<int32_t> parse_detokenize_request(const nlohmann::json& body, int32_t n_vocab);

// The engine request for one tokenized prompt of r: its sampling parameters, n, stops, priority
// and flags. max_tokens is the caller's (r.max_tokens or its own default), which differs between
// the server (up to the context) and `llmserve batch` (16).
engine::GenerationRequest generation_request(const OpenAiRequest& r, std::vector<int32_t> prompt,
                                             int32_t max_tokens);

}  // namespace llms::server
