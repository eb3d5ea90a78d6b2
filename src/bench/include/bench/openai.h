// bench/openai: the OpenAI-compatible wire format as the benchmark client needs it.
//
// Builds request bodies for /v1/completions and /v1/chat/completions, and reads what comes back:
// one streamed chunk at a time (the data of one SSE event) or a whole non-streamed response.
// "Content" is what a user would see appear: a non-empty choices[].text (completions) or
// choices[].delta.content / reasoning_content / reasoning / tool_calls (chat). A chat chunk that
// only announces the role, and the final usage-only chunk, carry no content. Usage is taken from
// "usage" (prompt_tokens, completion_tokens, prompt_tokens_details.cached_tokens); any field the
// server leaves out or sets to null stays -1.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "bench/dataset.h"

namespace llms::bench {

enum class Api { kCompletions, kChat };

// "/v1/completions" or "/v1/chat/completions".
const char* api_path(Api api);

struct RequestOptions {
  Api api = Api::kCompletions;
  std::string model;
  bool stream = true;
  bool ignore_eos = false;
  std::optional<double> temperature;
  nlohmann::json extra_body = nlohmann::json::object();  // merged last, overriding our fields
};

// The JSON body for one prompt. A text prompt sent to the chat API becomes one user message; chat
// messages cannot be sent to the completions API (throws llms::Error naming the endpoint).
std::string build_request_body(const RequestOptions& opts, const Prompt& prompt);

struct Usage {
  int64_t prompt_tokens = -1;
  int64_t completion_tokens = -1;
  int64_t cached_tokens = -1;
};

struct ChunkInfo {
  bool is_done = false;       // the "[DONE]" sentinel
  bool is_malformed = false;  // not JSON
  bool has_content = false;
  size_t content_bytes = 0;
  std::optional<Usage> usage;        // present when the chunk carries a usage object
  std::optional<std::string> error;  // the server reported an error inside the stream
};

// Reads the data of one SSE event of a streamed response.
ChunkInfo read_stream_chunk(std::string_view data);

// Reads a whole non-streamed response body (same fields; is_done is set when it parsed).
ChunkInfo read_full_response(std::string_view body);

// The message of an OpenAI-style error body ({"error": {"message": ...}}, {"message": ...}) or,
// failing that, the first 200 bytes of the body.
std::string error_message_of(std::string_view body);

}  // namespace llms::bench
