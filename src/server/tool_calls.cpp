// server/tool_calls: see tool_calls.h.
#include "server/tool_calls.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace llms::server {
namespace {

using json = nlohmann::json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistralTag = "[TOOL_CALLS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";

// Length of the longest suffix of `text` that is a proper prefix of `tag` (a tag that may
// still be completing).
size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

std::string_view trim(std::string_view s) {
  const auto ws = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!s.empty() && ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && ws(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

ToolCallFormat tool_call_format_for_template(std::string_view t) {
  if (t.find(kHermesOpen) != std::string_view::npos) return ToolCallFormat::kHermes;
  if (t.find(kMistralTag) != std::string_view::npos) return ToolCallFormat::kMistral;
  // Llama 3.1+ templates describe the call as JSON with "parameters" and use <|eom_id|> or
  // <|python_tag|> around tools.
  if (t.find("<|start_header_id|>") != std::string_view::npos &&
      t.find("parameters") != std::string_view::npos) {
    return ToolCallFormat::kLlama3Json;
  }
  return ToolCallFormat::kNone;
}

const char* tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kLlama3Json:
      return "llama3_json";
    case ToolCallFormat::kMistral:
      return "mistral";
    case ToolCallFormat::kNone:
      break;
  }
  return "none";
}

ToolCallParser::ToolCallParser(ToolCallFormat format, std::string id_prefix)
    : format_(format), id_prefix_(std::move(id_prefix)) {}

bool ToolCallParser::make_call(std::string_view json_text, std::vector<ToolCall>& calls) {
  const json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return false;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) return false;
  json args = json::object();
  if (auto a = j.find("arguments"); a != j.end()) {
    args = *a;
  } else if (auto p = j.find("parameters"); p != j.end()) {
    args = *p;
  }
  // Some models write the arguments as a JSON string already.
  std::string arguments = args.is_string() ? args.get<std::string>() : args.dump();
  calls.push_back(ToolCall{"call_" + id_prefix_ + std::to_string(n_calls_),
                           name->get<std::string>(), std::move(arguments)});
  ++n_calls_;
  return true;
}

bool ToolCallParser::make_calls_from_list(std::string_view json_text,
                                          std::vector<ToolCall>& calls) {
  const json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return false;
  const json list = j.is_array() ? j : json::array({j});
  std::vector<ToolCall> parsed;
  const int32_t before = n_calls_;
  for (const json& item : list) {
    if (!make_call(item.dump(), parsed)) {
      n_calls_ = before;  // all or nothing
      return false;
    }
  }
  calls.insert(calls.end(), parsed.begin(), parsed.end());
  return true;
}

void ToolCallParser::push_hermes(std::string& content, std::vector<ToolCall>& calls) {
  for (;;) {
    if (!in_call_) {
      const size_t open = pending_.find(kHermesOpen);
      if (open == std::string::npos) {
        const size_t keep = partial_tag_suffix(pending_, kHermesOpen);
        content.append(pending_, 0, pending_.size() - keep);
        pending_.erase(0, pending_.size() - keep);
        return;
      }
      content.append(pending_, 0, open);
      pending_.erase(0, open + kHermesOpen.size());
      in_call_ = true;
    }
    const size_t close = pending_.find(kHermesClose);
    if (close == std::string::npos) return;  // the call is still being written
    const std::string body = pending_.substr(0, close);
    if (!make_call(trim(body), calls)) {
      // Not a call after all: the model's text, tags included, is content.
      content.append(kHermesOpen).append(body).append(kHermesClose);
    }
    pending_.erase(0, close + kHermesClose.size());
    in_call_ = false;
  }
}

std::vector<std::string_view> ToolCallParser::leads() const {
  if (format_ == ToolCallFormat::kMistral) return {kMistralTag};
  return {"{", kPythonTag};
}

void ToolCallParser::push(std::string_view text, std::string& content,
                          std::vector<ToolCall>& calls) {
  pending_.append(text);
  switch (format_) {
    case ToolCallFormat::kNone:
      content += pending_;
      pending_.clear();
      return;
    case ToolCallFormat::kHermes:
      push_hermes(content, calls);
      return;
    case ToolCallFormat::kLlama3Json:
    case ToolCallFormat::kMistral: {
      if (!decided_) {
        // Calls are the whole output: they start at its first non-blank character, with a
        // lead the format fixes.
        const std::string_view head = trim(pending_);
        if (head.empty()) return;
        bool undecided = false;
        for (const std::string_view lead : leads()) {
          if (head.substr(0, lead.size()) == lead) {
            decided_ = true;
            is_calls_ = true;
            break;
          }
          if (lead.substr(0, head.size()) == head) undecided = true;  // a lead may be starting
        }
        if (!decided_ && undecided) return;
        decided_ = true;
      }
      if (!is_calls_) {
        content += pending_;
        pending_.clear();
      }
      return;  // calls are parsed whole at the end
    }
  }
}

void ToolCallParser::finish(std::string& content, std::vector<ToolCall>& calls) {
  switch (format_) {
    case ToolCallFormat::kNone:
      break;
    case ToolCallFormat::kHermes:
      // An unterminated call: what the model wrote is content.
      if (in_call_) content.append(kHermesOpen);
      break;
    case ToolCallFormat::kLlama3Json: {
      std::string_view body = trim(pending_);
      if (body.substr(0, kPythonTag.size()) == kPythonTag)
        body = trim(body.substr(kPythonTag.size()));
      // Several calls may be separated by ';' (Llama 3.2's convention) or be one object.
      if (is_calls_ && make_calls_from_list(body, calls)) {
        pending_.clear();
      } else if (is_calls_) {
        std::vector<ToolCall> parsed;
        bool all = true;
        const int32_t before = n_calls_;
        size_t start = 0;
        while (start < body.size() && all) {
          size_t end = body.find(';', start);
          if (end == std::string_view::npos) end = body.size();
          all = make_call(trim(body.substr(start, end - start)), parsed);
          start = end + 1;
        }
        if (all && !parsed.empty()) {
          calls.insert(calls.end(), parsed.begin(), parsed.end());
          pending_.clear();
        } else {
          n_calls_ = before;
        }
      }
      break;
    }
    case ToolCallFormat::kMistral: {
      std::string_view body = trim(pending_);
      if (is_calls_ && body.substr(0, kMistralTag.size()) == kMistralTag &&
          make_calls_from_list(trim(body.substr(kMistralTag.size())), calls)) {
        pending_.clear();
      }
      break;
    }
  }
  content += pending_;
  pending_.clear();
  in_call_ = false;
}

}  // namespace llms::server
