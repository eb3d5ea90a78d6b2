// server/openai_response: response and chunk shapes (see openai_response.h).
#include "server/openai_response.h"

#include <fmt/core.h>

#include <cmath>

#include "server/json_body.h"
#include "server/sse.h"
#include "tokenizer/tokenizer.h"

namespace llms::server {

namespace {

using nlohmann::json;

// vLLM reports -inf logprobs as -9999.0 (JSON has no infinity).
double finite_logprob(float lp) { return std::isfinite(lp) ? static_cast<double>(lp) : -9999.0; }

json byte_list(std::string_view bytes) {
  json out = json::array();
  for (unsigned char c : bytes) out.push_back(static_cast<int>(c));
  return out;
}

}  // namespace

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

std::string finish_reason_string(engine::FinishReason reason) {
  switch (reason) {
    case engine::FinishReason::kStop:
      return "stop";
    case engine::FinishReason::kLength:
      return "length";
    case engine::FinishReason::kAbort:
      return "abort";
    case engine::FinishReason::kError:
      return "error";
    case engine::FinishReason::kNone:
      break;
  }
  return "";
}

ResponseBuilder::ResponseBuilder(Endpoint endpoint, std::string id, int64_t created,
                                 std::string model, int32_t n_choices, bool logprobs,
                                 const tokenizer::Tokenizer& tok)
    : endpoint_(endpoint),
      id_(std::move(id)),
      created_(created),
      model_(std::move(model)),
      logprobs_(logprobs),
      tok_(tok),
      choices_(static_cast<size_t>(n_choices)) {}

void ResponseBuilder::enable_tool_calls(ToolCallFormat format) {
  if (format == ToolCallFormat::kNone) return;
  for (size_t i = 0; i < choices_.size(); ++i) {
    choices_[i].tool_parser = std::make_unique<ToolCallParser>(
        format, fmt::format("{}_{}_", id_.substr(id_.size() > 12 ? id_.size() - 12 : 0), i));
  }
}

void ResponseBuilder::enable_reasoning(bool starts_inside) {
  for (Choice& c : choices_) c.reasoning_parser = std::make_unique<ReasoningParser>(starts_inside);
}

void ResponseBuilder::split_output(Choice& c, std::string_view text, bool finished,
                                   std::string& reasoning, std::string& content) {
  std::string_view answer = text;
  if (c.reasoning_parser) {
    answer_scratch_.clear();
    c.reasoning_parser->push(text, reasoning, answer_scratch_);
    if (finished) c.reasoning_parser->finish(reasoning, answer_scratch_);
    answer = answer_scratch_;
  }
  if (c.tool_parser) {
    c.tool_parser->push(answer, content, c.tool_calls);
    if (finished) c.tool_parser->finish(content, c.tool_calls);
  } else {
    content.append(answer);
  }
}

std::string ResponseBuilder::finish_reason_of(const Choice& c, const std::string& finish) {
  return finish == "stop" && !c.tool_calls.empty() ? "tool_calls" : finish;
}

json ResponseBuilder::tool_call_json(const ToolCall& call, size_t index, bool streamed) {
  json j = {{"id", call.id},
            {"type", "function"},
            {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
  if (streamed) j["index"] = index;
  return j;
}

void ResponseBuilder::set_prefix(int32_t index, std::string text) {
  choices_.at(static_cast<size_t>(index)).text = std::move(text);
}

void ResponseBuilder::add_usage(const engine::RequestMetrics& m) {
  usage_.prompt_tokens += m.n_prompt_tokens;
  usage_.completion_tokens += m.n_generated_tokens;
  usage_.cached_tokens += m.n_cached_tokens;
}

void ResponseBuilder::accumulate(int32_t index, const engine::RequestOutput& out) {
  Choice& c = choices_.at(static_cast<size_t>(index));
  split_output(c, out.text, out.finished, c.reasoning, c.text);
  if (logprobs_) c.tokens.insert(c.tokens.end(), out.tokens.begin(), out.tokens.end());
  if (out.finished) {
    c.finish_reason = finish_reason_of(c, finish_reason_string(out.finish_reason));
    c.stop_reason = out.stop_reason;
  }
}

json ResponseBuilder::logprobs_json(const std::vector<engine::TokenOutput>& tokens,
                                    size_t text_offset) const {
  if (endpoint_ == Endpoint::kChat) {
    json content = json::array();
    for (const engine::TokenOutput& t : tokens) {
      const std::string_view bytes = tok_.token_bytes(t.id);
      json top = json::array();
      for (const sampling::TokenLogprob& alt : t.top_logprobs) {
        const std::string_view b = tok_.token_bytes(alt.token);
        top.push_back({{"token", std::string(b)},
                       {"logprob", finite_logprob(alt.logprob)},
                       {"bytes", byte_list(b)}});
      }
      content.push_back({{"token", std::string(bytes)},
                         {"logprob", finite_logprob(t.logprob)},
                         {"bytes", byte_list(bytes)},
                         {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}};
  }
  json toks = json::array();
  json lps = json::array();
  json tops = json::array();
  json offsets = json::array();
  size_t offset = text_offset;
  for (const engine::TokenOutput& t : tokens) {
    const std::string_view bytes = tok_.token_bytes(t.id);
    toks.push_back(std::string(bytes));
    lps.push_back(finite_logprob(t.logprob));
    json top = json::object();
    for (const sampling::TokenLogprob& alt : t.top_logprobs) {
      top[std::string(tok_.token_bytes(alt.token))] = finite_logprob(alt.logprob);
    }
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += bytes.size();
  }
  return {{"tokens", std::move(toks)},
          {"token_logprobs", std::move(lps)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

json ResponseBuilder::chunk_base() const {
  return {{"id", id_},
          {"object", endpoint_ == Endpoint::kChat ? "chat.completion.chunk" : "text_completion"},
          {"created", created_},
          {"model", model_}};
}

// Stream chunks are written directly, one per token, in the bytes dump_json would give for the
// same JSON tree: keys in sorted order (nlohmann's object map), no spaces. The fields after
// "choices" are the same in every chunk of the response and are rendered once.
void ResponseBuilder::begin_chunk(std::string& sse) const { sse += "data: {\"choices\":[{"; }

void ResponseBuilder::end_chunk(std::string& sse, bool include_usage_field) {
  if (chunk_tail_.empty()) {
    chunk_tail_ = fmt::format(",\"created\":{},\"id\":", created_);
    append_json_string(chunk_tail_, id_);
    chunk_tail_ += ",\"model\":";
    append_json_string(chunk_tail_, model_);
    chunk_tail_ += endpoint_ == Endpoint::kChat ? ",\"object\":\"chat.completion.chunk\""
                                                : ",\"object\":\"text_completion\"";
  }
  sse += "}]";
  sse += chunk_tail_;
  sse += include_usage_field ? ",\"usage\":null}\n\n" : "}\n\n";
}

void ResponseBuilder::stream_event(int32_t index, const engine::RequestOutput& out,
                                   bool include_usage_field, std::string& sse) {
  Choice& c = choices_.at(static_cast<size_t>(index));
  const bool first = !c.started;
  c.started = true;
  if (endpoint_ == Endpoint::kChat && first) {
    begin_chunk(sse);
    sse += "\"delta\":{\"content\":\"\",\"role\":\"assistant\"},\"finish_reason\":null,\"index\":";
    sse += std::to_string(index);
    sse += ",\"logprobs\":null";
    end_chunk(sse, include_usage_field);
  }
  // Echo (completions): the prompt goes out with the first chunk.
  const bool echo = first && endpoint_ == Endpoint::kCompletions && !c.text.empty();
  // With tools, the text is what the parser releases as content, and calls go out whole.
  std::string_view text = out.text;
  std::string_view reasoning;
  const size_t first_new_call = c.tool_calls.size();
  if (c.tool_parser || c.reasoning_parser) {
    stream_content_.clear();
    stream_reasoning_.clear();
    split_output(c, out.text, out.finished, stream_reasoning_, stream_content_);
    text = stream_content_;
    reasoning = stream_reasoning_;
  }
  const bool new_calls = c.tool_calls.size() > first_new_call;
  const std::string finish =
      out.finished ? finish_reason_of(c, finish_reason_string(out.finish_reason)) : "";
  if (!echo && text.empty() && reasoning.empty() && !new_calls && out.tokens.empty() &&
      finish.empty()) {
    return;
  }
  begin_chunk(sse);
  if (endpoint_ == Endpoint::kChat) {
    if (!reasoning.empty() && !new_calls) {
      json delta = json::object();
      if (!text.empty()) delta["content"] = std::string(text);
      delta["reasoning_content"] = std::string(reasoning);
      sse += "\"delta\":";
      sse += dump_json(delta);
      sse += ",";
    } else if (new_calls) {
      json delta = json::object();
      if (!text.empty()) delta["content"] = std::string(text);
      if (!reasoning.empty()) delta["reasoning_content"] = std::string(reasoning);
      json calls = json::array();
      for (size_t i = first_new_call; i < c.tool_calls.size(); ++i) {
        calls.push_back(tool_call_json(c.tool_calls[i], i, /*streamed=*/true));
      }
      delta["tool_calls"] = std::move(calls);
      sse += "\"delta\":";
      sse += dump_json(delta);
      sse += ",";
    } else if (text.empty()) {
      sse += "\"delta\":{},";
    } else {
      sse += "\"delta\":{\"content\":";
      append_json_string(sse, text);
      sse += "},";
    }
  }
  sse += "\"finish_reason\":";
  if (finish.empty()) {
    sse += "null";
  } else {
    append_json_string(sse, finish);
  }
  sse += ",\"index\":";
  sse += std::to_string(index);
  sse += ",\"logprobs\":";
  if (logprobs_ && !out.tokens.empty()) {
    sse += dump_json(logprobs_json(out.tokens, 0));
  } else {
    sse += "null";
  }
  if (out.finished) {
    sse += ",\"stop_reason\":";
    if (out.stop_reason.empty()) {
      sse += "null";
    } else {
      append_json_string(sse, out.stop_reason);
    }
  }
  if (endpoint_ == Endpoint::kCompletions) {
    sse += ",\"text\":";
    append_json_string(sse, echo ? c.text + out.text : out.text);
  }
  end_chunk(sse, include_usage_field);
}

json ResponseBuilder::usage_chunk() const {
  json chunk = chunk_base();
  chunk["choices"] = json::array();
  chunk["usage"] = usage_json(usage_);
  return chunk;
}

json ResponseBuilder::final_response() const {
  json choices = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    json choice = {
        {"index", i},
        {"finish_reason", c.finish_reason.empty() ? json(nullptr) : json(c.finish_reason)},
        {"stop_reason", c.stop_reason.empty() ? json(nullptr) : json(c.stop_reason)}};
    json lp = logprobs_ ? logprobs_json(c.tokens, 0) : json(nullptr);
    if (endpoint_ == Endpoint::kChat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
      if (c.reasoning_parser) {
        choice["message"]["reasoning_content"] =
            c.reasoning.empty() ? json(nullptr) : json(c.reasoning);
      }
      if (!c.tool_calls.empty()) {
        json calls = json::array();
        for (size_t k = 0; k < c.tool_calls.size(); ++k) {
          calls.push_back(tool_call_json(c.tool_calls[k], k, /*streamed=*/false));
        }
        choice["message"]["tool_calls"] = std::move(calls);
        // OpenAI sends null content beside tool calls when the model said nothing else.
        if (c.text.empty()) choice["message"]["content"] = nullptr;
      }
    } else {
      choice["text"] = c.text;
    }
    choice["logprobs"] = std::move(lp);
    choices.push_back(std::move(choice));
  }
  return {{"id", id_},
          {"object", endpoint_ == Endpoint::kChat ? "chat.completion" : "text_completion"},
          {"created", created_},
          {"model", model_},
          {"choices", std::move(choices)},
          {"usage", usage_json(usage_)},
          {"system_fingerprint", nullptr}};
}

}  // namespace llms::server
