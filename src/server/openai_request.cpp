// server/openai_request: field-by-field checks of OpenAI request bodies (see openai_request.h).
#include "server/openai_request.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "server/api_error.h"
#include "spec/speculative_config.h"

namespace llms::server {

namespace {

using nlohmann::json;

const json* field(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

bool get_bool(const json& body, const char* key, bool fallback) {
  const json* v = field(body, key);
  if (!v) return fallback;
  if (!v->is_boolean()) throw_invalid(key, fmt::format("{}: must be a boolean", key));
  return v->get<bool>();
}

// An integer in [lo, hi]; floats with a fractional part and other types are refused.
int64_t get_int(const json& body, const char* key, int64_t fallback, int64_t lo, int64_t hi) {
  const json* v = field(body, key);
  if (!v) return fallback;
  const auto refuse = [&] {
    throw_invalid(key, fmt::format("{}: must be an integer between {} and {}", key, lo, hi));
  };
  int64_t value = 0;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) refuse();
    value = static_cast<int64_t>(u);
  } else if (v->is_number_integer()) {
    value = v->get<int64_t>();
  } else if (v->is_number_float()) {
    const double d = v->get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || d < -9.0e18 || d > 9.0e18) refuse();
    value = static_cast<int64_t>(d);
  } else {
    refuse();
  }
  if (value < lo || value > hi) refuse();
  return value;
}

// A number in [lo, hi] (or (lo, hi] when lo_open).
double get_number(const json& body, const char* key, double fallback, double lo, double hi,
                  bool lo_open = false) {
  const json* v = field(body, key);
  if (!v) return fallback;
  const double d = v->is_number() ? v->get<double>() : std::numeric_limits<double>::quiet_NaN();
  const bool ok = std::isfinite(d) && (lo_open ? d > lo : d >= lo) && d <= hi;
  if (!ok) {
    throw_invalid(
        key, fmt::format("{}: must be a number in {}{}, {}]", key, lo_open ? "(" : "[", lo, hi));
  }
  return d;
}

std::string get_string(const json& body, const char* key, const std::string& fallback) {
  const json* v = field(body, key);
  if (!v) return fallback;
  if (!v->is_string()) throw_invalid(key, fmt::format("{}: must be a string", key));
  return v->get<std::string>();
}

int32_t token_id(const json& v, int32_t n_vocab, const std::string& param) {
  if (!v.is_number_integer()) throw_invalid(param, param + ": token ids must be integers");
  const int64_t id = v.is_number_unsigned()
                         ? static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), 1ull << 40))
                         : v.get<int64_t>();
  if (id < 0 || id >= n_vocab) {
    throw_invalid(param, fmt::format("{}: token id {} is outside the vocabulary [0, {})", param, id,
                                     n_vocab));
  }
  return static_cast<int32_t>(id);
}

std::vector<int32_t> token_ids(const json& arr, int32_t n_vocab, const std::string& param) {
  std::vector<int32_t> ids;
  ids.reserve(arr.size());
  for (const json& v : arr) ids.push_back(token_id(v, n_vocab, param));
  return ids;
}

void parse_prompts(const json& body, const ParseLimits& limits, OpenAiRequest& r) {
  const json* p = field(body, "prompt");
  if (!p) throw_invalid("prompt", "prompt: is required");
  if (p->is_string()) {
    r.prompts.push_back({.is_ids = false, .text = p->get<std::string>(), .ids = {}});
  } else if (p->is_array()) {
    if (p->empty()) throw_invalid("prompt", "prompt: must not be an empty list");
    if ((*p)[0].is_number()) {
      r.prompts.push_back(
          {.is_ids = true, .text = {}, .ids = token_ids(*p, limits.n_vocab, "prompt")});
    } else {
      if (p->size() > static_cast<size_t>(limits.max_prompts)) {
        throw_invalid("prompt",
                      fmt::format("prompt: at most {} prompts per request", limits.max_prompts));
      }
      for (const json& item : *p) {
        if (item.is_string()) {
          r.prompts.push_back({.is_ids = false, .text = item.get<std::string>(), .ids = {}});
        } else if (item.is_array() && !item.empty()) {
          r.prompts.push_back(
              {.is_ids = true, .text = {}, .ids = token_ids(item, limits.n_vocab, "prompt")});
        } else {
          throw_invalid("prompt",
                        "prompt: must be a string, a list of strings, a list of token ids or a "
                        "list of non-empty token id lists");
        }
      }
    }
  } else {
    throw_invalid("prompt", "prompt: must be a string, a list of strings or token ids");
  }
  for (const PromptInput& in : r.prompts) {
    if (in.is_ids ? in.ids.empty() : in.text.empty()) {
      throw_invalid("prompt", "prompt: must not be empty");
    }
  }
}

// Content as the template wants it: a string (text parts joined by newlines) or null.
json flatten_content(const json& content, const std::string& param) {
  if (content.is_null() || content.is_string()) return content;
  if (!content.is_array()) {
    throw_invalid(param, param + ": must be a string or an array of content parts");
  }
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const json& part = content[j];
    const std::string p = fmt::format("{}[{}]", param, j);
    if (!part.is_object()) throw_invalid(p, p + ": a content part must be an object");
    auto type = part.find("type");
    if (type == part.end() || !type->is_string()) {
      throw_invalid(p + ".type", p + ".type: is required");
    }
    if (*type != "text") {
      throw_invalid(p + ".type", fmt::format("{}.type: '{}' is not supported (only text)", p,
                                             type->get<std::string>()));
    }
    auto t = part.find("text");
    if (t == part.end() || !t->is_string())
      throw_invalid(p + ".text", p + ".text: must be a string");
    if (j > 0) text += '\n';
    text += t->get<std::string>();
  }
  return text;
}

// An assistant message's tool calls as the chat templates expect them: OpenAI sends each call's
// arguments as JSON text, templates write them with `tojson` (Qwen2.5's, Llama 3's), which would
// quote the text a second time. Arguments that are not JSON text stay as they are.
void arguments_as_objects(json& calls, const std::string& p) {
  if (!calls.is_array()) throw_invalid(p, p + ": must be an array");
  for (size_t k = 0; k < calls.size(); ++k) {
    json& call = calls[k];
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) {
      continue;  // the template decides what it makes of it
    }
    json& fn = call["function"];
    if (fn.contains("arguments") && fn["arguments"].is_string()) {
      json parsed = json::parse(fn["arguments"].get<std::string>(), nullptr, false);
      if (!parsed.is_discarded()) fn["arguments"] = std::move(parsed);
    }
  }
}

json parse_messages(const json& body) {
  const json* m = field(body, "messages");
  if (!m) throw_invalid("messages", "messages: is required");
  if (!m->is_array() || m->empty())
    throw_invalid("messages", "messages: must be a non-empty array");
  json out = json::array();
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const std::string p = fmt::format("messages[{}]", i);
    if (!msg.is_object()) throw_invalid(p, p + ": must be an object");
    auto role = msg.find("role");
    if (role == msg.end() || !role->is_string())
      throw_invalid(p + ".role", p + ".role: is required");
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "user" && r != "assistant" && r != "tool" && r != "developer") {
      throw_invalid(p + ".role", fmt::format("{}.role: '{}' is not one of system, user, assistant, "
                                             "tool, developer",
                                             p, r));
    }
    json copy = msg;
    auto content = msg.find("content");
    const bool has_calls = msg.contains("tool_calls") && !msg["tool_calls"].is_null();
    if (content == msg.end() || content->is_null()) {
      if (r != "assistant" || !has_calls) {
        throw_invalid(p + ".content", p + ".content: is required");
      }
      copy["content"] = nullptr;
    } else {
      copy["content"] = flatten_content(*content, p + ".content");
    }
    if (r == "developer") copy["role"] = "system";
    if (has_calls) arguments_as_objects(copy["tool_calls"], p + ".tool_calls");
    out.push_back(std::move(copy));
  }
  return out;
}

void parse_stop(const json& body, const ParseLimits& limits, OpenAiRequest& r) {
  if (const json* ids = field(body, "stop_token_ids")) {
    if (!ids->is_array()) throw_invalid("stop_token_ids", "stop_token_ids: must be a list");
    r.stop_token_ids = token_ids(*ids, limits.n_vocab, "stop_token_ids");
  }
  const json* s = field(body, "stop");
  if (!s) return;
  if (s->is_string()) {
    r.stop.push_back(s->get<std::string>());
  } else if (s->is_array()) {
    if (s->size() > static_cast<size_t>(limits.max_stop)) {
      throw_invalid("stop", fmt::format("stop: at most {} stop sequences", limits.max_stop));
    }
    for (const json& v : *s) {
      if (!v.is_string()) throw_invalid("stop", "stop: must be a string or a list of strings");
      r.stop.push_back(v.get<std::string>());
    }
  } else {
    throw_invalid("stop", "stop: must be a string or a list of strings");
  }
  for (const std::string& t : r.stop) {
    if (t.empty()) throw_invalid("stop", "stop: stop sequences must not be empty");
  }
}

void parse_common(const json& body, const ParseLimits& limits, OpenAiRequest& r) {
  r.model = parse_model_field(body);
  // max_completion_tokens (the newer name) wins over max_tokens.
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (field(body, key)) {
      r.max_tokens = static_cast<int32_t>(get_int(body, key, 0, 1, limits.max_tokens_cap));
    }
  }
  r.n = static_cast<int32_t>(get_int(body, "n", 1, 1, limits.max_n));
  r.stream = get_bool(body, "stream", false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) throw_invalid("stream_options", "stream_options: must be an object");
    if (!r.stream) {
      throw_invalid("stream_options", "stream_options: only allowed when stream is true");
    }
    r.include_usage = get_bool(*so, "include_usage", false);
  }
  parse_stop(body, limits, r);
  r.ignore_eos = get_bool(body, "ignore_eos", false);
  r.skip_special_tokens = get_bool(body, "skip_special_tokens", true);
  r.priority = static_cast<int32_t>(get_int(body, "priority", 0, -1'000'000, 1'000'000));
  r.structured = parse_structured_output(body);
  r.num_speculative_tokens = static_cast<int32_t>(
      get_int(body, "num_speculative_tokens", -1, 0, spec::kMaxSpeculativeTokens));
  (void)get_string(body, "user", "");

  sampling::SamplingParams& s = r.sampling;
  s.temperature = static_cast<float>(get_number(body, "temperature", 1.0, 0.0, 2.0));
  s.top_p = static_cast<float>(get_number(body, "top_p", 1.0, 0.0, 1.0, /*lo_open=*/true));
  s.top_k = static_cast<int32_t>(get_int(body, "top_k", 0, -1, limits.n_vocab));
  s.min_p = static_cast<float>(get_number(body, "min_p", 0.0, 0.0, 1.0));
  s.presence_penalty = static_cast<float>(get_number(body, "presence_penalty", 0.0, -2.0, 2.0));
  s.frequency_penalty = static_cast<float>(get_number(body, "frequency_penalty", 0.0, -2.0, 2.0));
  s.repetition_penalty =
      static_cast<float>(get_number(body, "repetition_penalty", 1.0, 0.0, 2.0, /*lo_open=*/true));
  if (field(body, "seed")) {
    s.seed = static_cast<uint64_t>(get_int(body, "seed", 0, std::numeric_limits<int64_t>::min(),
                                           std::numeric_limits<int64_t>::max()));
  }
  if (const json* lb = field(body, "logit_bias")) {
    if (!lb->is_object()) throw_invalid("logit_bias", "logit_bias: must be an object");
    for (const auto& [key, value] : lb->items()) {
      int64_t id = -1;
      size_t used = 0;
      try {
        id = std::stoll(key, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != key.size()) {
        throw_invalid("logit_bias", fmt::format("logit_bias: key '{}' is not a token id", key));
      }
      if (id < 0 || id >= limits.n_vocab) {
        throw_invalid("logit_bias", fmt::format("logit_bias: token id {} is outside the "
                                                "vocabulary [0, {})",
                                                id, limits.n_vocab));
      }
      const double bias = value.is_number() ? value.get<double>() : 1e9;
      if (!(bias >= -100.0 && bias <= 100.0)) {
        throw_invalid("logit_bias", fmt::format("logit_bias: the bias of token {} must be a number "
                                                "in [-100, 100]",
                                                id));
      }
      s.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(bias));
    }
  }
}

}  // namespace

std::string parse_model_field(const json& body) {
  const json* m = field(body, "model");
  if (!m) return {};
  if (!m->is_string() || m->get<std::string>().empty()) {
    throw_invalid("model", "model: must be a non-empty string");
  }
  return m->get<std::string>();
}

OpenAiRequest parse_completion_request(const json& body, const ParseLimits& limits) {
  if (!body.is_object()) throw ApiError(400, "The request body must be a JSON object");
  OpenAiRequest r;
  r.endpoint = Endpoint::kCompletions;
  parse_prompts(body, limits, r);
  parse_common(body, limits, r);
  r.echo = get_bool(body, "echo", false);
  // Completions: logprobs is the number of alternatives (0..max), null for none.
  if (field(body, "logprobs")) {
    if (field(body, "logprobs")->is_boolean()) {
      throw_invalid("logprobs", fmt::format("logprobs: must be an integer between 0 and {}",
                                            limits.max_top_logprobs));
    }
    r.sampling.logprobs = true;
    r.sampling.n_top_logprobs =
        static_cast<int32_t>(get_int(body, "logprobs", 0, 0, limits.max_top_logprobs));
  }
  if (r.echo && r.sampling.logprobs) {
    throw_invalid("echo", "echo: prompt logprobs are not supported; use echo without logprobs");
  }
  return r;
}

// tools: [{"type": "function", "function": {"name", "description", "parameters", "strict"}}];
// tool_choice: "none", "auto", "required" or {"type": "function", "function": {"name"}} naming
// one of them; parallel_tool_calls: a boolean.
static void parse_tools(const json& body, OpenAiRequest& r) {
  std::vector<std::string> names;
  if (const json* tools = field(body, "tools")) {
    if (!tools->is_array()) throw_invalid("tools", "tools: must be an array");
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      const std::string at = fmt::format("tools[{}]", i);
      if (!t.is_object()) throw_invalid(at, at + ": must be an object");
      const json* type = field(t, "type");
      if (type == nullptr || *type != "function") {
        throw_invalid(at + ".type", at + ".type: must be \"function\"");
      }
      const json* fn = field(t, "function");
      if (fn == nullptr || !fn->is_object()) {
        throw_invalid(at + ".function", at + ".function: must be an object with a name");
      }
      const json* name = field(*fn, "name");
      if (name == nullptr || !name->is_string() || name->get<std::string>().empty()) {
        throw_invalid(at + ".function.name", at + ".function.name: must be a non-empty string");
      }
      if (const json* params = field(*fn, "parameters");
          params != nullptr && !params->is_object()) {
        throw_invalid(at + ".function.parameters",
                      at + ".function.parameters: must be a JSON Schema object");
      }
      names.push_back(name->get<std::string>());
    }
    if (!tools->empty()) r.tools = *tools;
  }
  if (const json* choice = field(body, "tool_choice")) {
    if (choice->is_string()) {
      const std::string c = choice->get<std::string>();
      if (c != "none" && c != "auto" && c != "required") {
        throw_invalid("tool_choice",
                      "tool_choice: must be none, auto, required or a named function");
      }
      r.tool_choice = c;
    } else if (choice->is_object()) {
      const json* fn = field(*choice, "function");
      const json* name = fn != nullptr && fn->is_object() ? field(*fn, "name") : nullptr;
      if (name == nullptr || !name->is_string()) {
        throw_invalid("tool_choice.function.name",
                      "tool_choice.function.name: must name one of the tools");
      }
      r.tool_choice = name->get<std::string>();
      r.tool_choice_named = true;
      if (std::find(names.begin(), names.end(), r.tool_choice) == names.end()) {
        throw_invalid(
            "tool_choice.function.name",
            fmt::format("tool_choice.function.name: '{}' is not one of the tools", r.tool_choice));
      }
    } else {
      throw_invalid("tool_choice", "tool_choice: must be a string or an object");
    }
    if ((r.tool_choice == "required" || r.tool_choice_named) && names.empty()) {
      throw_invalid("tool_choice", "tool_choice: needs tools");
    }
  }
  r.parallel_tool_calls = get_bool(body, "parallel_tool_calls", true);
}

OpenAiRequest parse_chat_request(const json& body, const ParseLimits& limits) {
  if (!body.is_object()) throw ApiError(400, "The request body must be a JSON object");
  OpenAiRequest r;
  r.endpoint = Endpoint::kChat;
  r.messages = parse_messages(body);
  parse_tools(body, r);
  r.add_generation_prompt = get_bool(body, "add_generation_prompt", true);
  parse_common(body, limits, r);
  r.sampling.logprobs = get_bool(body, "logprobs", false);
  r.sampling.n_top_logprobs =
      static_cast<int32_t>(get_int(body, "top_logprobs", 0, 0, limits.max_top_logprobs));
  if (r.sampling.n_top_logprobs > 0 && !r.sampling.logprobs) {
    throw_invalid("top_logprobs", "top_logprobs: requires logprobs to be true");
  }
  return r;
}

TokenizeRequest parse_tokenize_request(const json& body) {
  if (!body.is_object()) throw ApiError(400, "The request body must be a JSON object");
  (void)parse_model_field(body);
  TokenizeRequest r;
  if (field(body, "messages")) {
    r.is_chat = true;
    r.messages = parse_messages(body);
    r.add_generation_prompt = get_bool(body, "add_generation_prompt", true);
  } else {
    const json* p = field(body, "prompt");
    if (!p || !p->is_string()) throw_invalid("prompt", "prompt: a string is required");
    r.prompt = p->get<std::string>();
  }
  r.add_special_tokens = get_bool(body, "add_special_tokens", true);
  return r;
}

std::vector<int32_t> parse_detokenize_request(const json& body, int32_t n_vocab) {
  if (!body.is_object()) throw ApiError(400, "The request body must be a JSON object");
  (void)parse_model_field(body);
  const json* t = field(body, "tokens");
  if (!t || !t->is_array()) throw_invalid("tokens", "tokens: a list of token ids is required");
  return token_ids(*t, n_vocab, "tokens");
}

engine::GenerationRequest generation_request(const OpenAiRequest& r, std::vector<int32_t> prompt,
                                             int32_t max_tokens) {
  engine::GenerationRequest g;
  g.prompt = std::move(prompt);
  g.max_tokens = max_tokens;
  g.sampling = r.sampling;
  g.n = r.n;
  g.stop = r.stop;
  g.stop_token_ids = r.stop_token_ids;
  g.ignore_eos = r.ignore_eos;
  g.skip_special_tokens = r.skip_special_tokens;
  g.priority = r.priority;
  g.num_speculative_tokens = r.num_speculative_tokens;
  return g;
}

}  // namespace llms::server
