// jinja/chat_template: render a chat (messages, tools) through a model's chat template the way
// transformers' tokenizer.apply_chat_template(..., tokenize=False) does.
//
// Contract, following transformers: messages must be a non-empty array of objects; keys whose
// value is null are dropped from each message; a message with reasoning ("reasoning_content",
// "thinking" or "reasoning") gets it under both "thinking" and "reasoning_content"; the template
// sees messages, tools (null when absent), documents (null when absent), add_generation_prompt,
// bos_token / eos_token (only when non-empty, like a tokenizer's special tokens) and the extra
// variables, which may override bos_token / eos_token but not the others.
// Use ordered_json so that tojson prints object keys in the order the client sent them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/template.h"

namespace llms::jinja {

struct ChatInputs {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;      // null, or an array of tool schemas (OpenAI function format)
  nlohmann::ordered_json documents;  // null, or an array of objects (RAG documents)
  bool add_generation_prompt = false;
  std::string bos_token;  // empty: not defined for the template
  std::string eos_token;  // empty: not defined for the template
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // more template variables
};

// The context object the template sees (after transformers' normalization of the inputs).
nlohmann::ordered_json chat_context(const ChatInputs& in);

std::string render_chat(const Template& chat_template, const ChatInputs& in,
                        const RenderOptions& options = {});
std::string render_chat(std::string_view template_source, const ChatInputs& in,
                        const RenderOptions& options = {});

// Built-in templates for model files that carry none: "chatml", "llama3", "gemma".
// Throws llms::Error (kNotFound) for other names.
std::string_view builtin_chat_template(std::string_view name);
std::vector<std::string_view> builtin_chat_template_names();

}  // namespace llms::jinja
