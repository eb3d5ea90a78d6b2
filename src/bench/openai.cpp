// bench/openai: request bodies and response chunks of OpenAI-compatible servers (see openai.h).
#include "bench/openai.h"

#include "chunk_reader.h"
#include "util/error.h"

namespace llms::bench {

using json = nlohmann::json;

const char* api_path(Api api) {
  return api == Api::kChat ? "/v1/chat/completions" : "/v1/completions";
}

std::string build_request_body(const RequestOptions& opts, const Prompt& prompt) {
  json body = json::object();
  if (!opts.model.empty()) body["model"] = opts.model;
  if (opts.api == Api::kChat) {
    body["messages"] = prompt.is_chat()
                           ? prompt.messages
                           : json::array({json{{"role", "user"}, {"content", prompt.text}}});
  } else {
    if (prompt.is_chat()) {
      throw Error(Error::Kind::kInvalidArgument,
                  "chat messages need the chat endpoint (/v1/chat/completions), not "
                  "/v1/completions");
    }
    body["prompt"] = prompt.text;
  }
  if (prompt.max_tokens > 0) body["max_tokens"] = prompt.max_tokens;
  if (opts.stream) {
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
  } else {
    body["stream"] = false;
  }
  if (opts.ignore_eos) body["ignore_eos"] = true;
  if (opts.temperature) body["temperature"] = *opts.temperature;
  if (opts.extra_body.is_object()) {
    for (const auto& [key, value] : opts.extra_body.items()) body[key] = value;
  }
  return body.dump();
}

ChunkInfo read_stream_chunk(std::string_view data) {
  // Servers pad the sentinel differently; compare it without surrounding whitespace.
  const size_t first = data.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos) {
    const size_t last = data.find_last_not_of(" \t\r\n");
    if (data.substr(first, last - first + 1) == "[DONE]") {
      ChunkInfo info;
      info.is_done = true;
      return info;
    }
  }
  return read_chunk_object(data);
}

ChunkInfo read_full_response(std::string_view body) {
  ChunkInfo info = read_chunk_object(body);
  info.is_done = !info.is_malformed && !info.error;
  return info;
}

std::string error_message_of(std::string_view body) {
  ChunkInfo info = read_chunk_object(body);
  if (info.error) return *info.error;
  json j = json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("message") && j["message"].is_string()) {
    return j["message"].get<std::string>();
  }
  std::string s(body.substr(0, 200));
  for (char& ch : s) {
    if (ch == '\n' || ch == '\r') ch = ' ';
  }
  return s;
}

}  // namespace llms::bench
