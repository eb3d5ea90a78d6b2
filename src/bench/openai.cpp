// bench/openai: request bodies and response chunks of OpenAI-compatible servers (see openai.h).
#include "bench/openai.h"

#include "util/error.h"

namespace llms::bench {

namespace {

using json = nlohmann::json;

int64_t int_or(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer()) return -1;
  return it->get<int64_t>();
}

Usage read_usage(const json& u) {
  Usage usage;
  usage.prompt_tokens = int_or(u, "prompt_tokens");
  usage.completion_tokens = int_or(u, "completion_tokens");
  if (auto d = u.find("prompt_tokens_details"); d != u.end() && d->is_object()) {
    usage.cached_tokens = int_or(*d, "cached_tokens");
  }
  return usage;
}

size_t string_bytes(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get_ref<const std::string&>().size() : 0;
}

// Content bytes of one choice; `tool_calls` count as content even though they are not text.
size_t choice_content(const json& choice, bool& has_tool_calls) {
  size_t n = string_bytes(choice, "text");
  for (const char* holder : {"delta", "message"}) {
    auto d = choice.find(holder);
    if (d == choice.end() || !d->is_object()) continue;
    n += string_bytes(*d, "content") + string_bytes(*d, "reasoning_content") +
         string_bytes(*d, "reasoning");
    if (auto t = d->find("tool_calls"); t != d->end() && t->is_array() && !t->empty()) {
      has_tool_calls = true;
    }
  }
  return n;
}

ChunkInfo read_object(std::string_view text) {
  ChunkInfo info;
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    info.is_malformed = true;
    return info;
  }
  if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
    if (e->is_string()) {
      info.error = e->get<std::string>();
    } else if (e->is_object() && e->contains("message") && (*e)["message"].is_string()) {
      info.error = (*e)["message"].get<std::string>();
    } else {
      info.error = e->dump();
    }
    return info;
  }
  if (auto o = j.find("object"); o != j.end() && o->is_string() && *o == "error") {
    auto m = j.find("message");
    info.error = m != j.end() && m->is_string() ? m->get<std::string>() : std::string("error");
    return info;
  }
  bool has_tool_calls = false;
  if (auto c = j.find("choices"); c != j.end() && c->is_array()) {
    for (const auto& choice : *c) {
      if (choice.is_object()) info.content_bytes += choice_content(choice, has_tool_calls);
    }
  }
  info.has_content = info.content_bytes > 0 || has_tool_calls;
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) info.usage = read_usage(*u);
  return info;
}

}  // namespace

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
  return read_object(data);
}

ChunkInfo read_full_response(std::string_view body) {
  ChunkInfo info = read_object(body);
  info.is_done = !info.is_malformed && !info.error;
  return info;
}

std::string error_message_of(std::string_view body) {
  ChunkInfo info = read_object(body);
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
