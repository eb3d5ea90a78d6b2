// jinja/chat_template: transformers' input normalization for apply_chat_template, then render.
#include "jinja/chat_template.h"

namespace llms::jinja {

namespace {

using Json = nlohmann::ordered_json;

[[noreturn]] void bad_input(const std::string& message) {
  throw Error(Error::Kind::kInvalidArgument, "chat template input: " + message);
}

// Drops null-valued keys, then aliases reasoning fields (transformers'
// _normalize_chat_messages and _alias_reasoning_fields).
Json normalize_message(const Json& message, size_t index) {
  if (!message.is_object()) {
    bad_input("messages[" + std::to_string(index) + "] must be an object, got " +
              std::string(message.type_name()));
  }
  Json out = Json::object();
  for (auto it = message.begin(); it != message.end(); ++it) {
    if (!it.value().is_null()) out[it.key()] = it.value();
  }
  const Json* reasoning = nullptr;
  for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
    const auto it = out.find(key);
    if (it != out.end()) {
      reasoning = &*it;
      break;
    }
  }
  if (!reasoning) return out;
  Json aliased = Json::object();
  aliased["thinking"] = *reasoning;
  for (auto it = out.begin(); it != out.end(); ++it) aliased[it.key()] = it.value();
  aliased["reasoning_content"] = *reasoning;
  return aliased;
}

}  // namespace

Json chat_context(const ChatInputs& in) {
  if (!in.messages.is_array()) bad_input("messages must be an array");
  if (in.messages.empty()) {
    bad_input("Cannot apply chat template to an empty conversation. Provide at least one message.");
  }
  if (!in.tools.is_null() && !in.tools.is_array()) bad_input("tools must be an array or null");
  if (in.tools.is_array()) {
    for (const Json& tool : in.tools) {
      if (!tool.is_object()) bad_input("each tool must be a JSON schema object");
    }
  }
  if (!in.documents.is_null() && !in.documents.is_array()) {
    bad_input("documents must be an array or null");
  }
  if (in.documents.is_array()) {
    for (const Json& doc : in.documents) {
      if (!doc.is_object()) bad_input("each document must be an object");
    }
  }
  if (!in.extra.is_null() && !in.extra.is_object())
    bad_input("extra template variables must be an object");

  Json ctx = Json::object();
  if (!in.bos_token.empty()) ctx["bos_token"] = in.bos_token;
  if (!in.eos_token.empty()) ctx["eos_token"] = in.eos_token;
  for (auto it = in.extra.begin(); it != in.extra.end(); ++it) {
    const std::string& key = it.key();
    if (key == "messages" || key == "tools" || key == "documents" ||
        key == "add_generation_prompt") {
      bad_input("extra variable '" + key + "' would replace a reserved template variable");
    }
    ctx[key] = it.value();
  }
  Json messages = Json::array();
  for (size_t k = 0; k < in.messages.size(); ++k) {
    messages.push_back(normalize_message(in.messages[k], k));
  }
  ctx["messages"] = std::move(messages);
  ctx["tools"] = in.tools;
  ctx["documents"] = in.documents;
  ctx["add_generation_prompt"] = in.add_generation_prompt;
  return ctx;
}

std::string render_chat(const Template& chat_template, const ChatInputs& in,
                        const RenderOptions& options) {
  return chat_template.render(chat_context(in), options);
}

std::string render_chat(std::string_view template_source, const ChatInputs& in,
                        const RenderOptions& options) {
  return render_chat(Template::parse(template_source), in, options);
}

}  // namespace llms::jinja
