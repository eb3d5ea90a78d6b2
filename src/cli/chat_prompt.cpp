#include "chat_prompt.h"

namespace llms::cli {

std::string chat_template_for(const gguf::GgufFile& file) {
  if (auto t = file.get_string("tokenizer.chat_template"); t && !t->empty()) return *t;
  std::string arch = file.get_string("general.architecture").value_or("");
  if (arch.rfind("gemma", 0) == 0) return std::string(jinja::builtin_chat_template("gemma"));
  if (arch == "llama") return std::string(jinja::builtin_chat_template("llama3"));
  return std::string(jinja::builtin_chat_template("chatml"));
}

ChatPrompt encode_chat(const gguf::GgufFile& file, const tokenizer::Tokenizer& tok,
                       jinja::ChatInputs chat) {
  if (chat.bos_token.empty() && tok.bos_id() != tokenizer::kNoToken) {
    chat.bos_token = std::string(tok.token_text(tok.bos_id()));
  }
  if (chat.eos_token.empty() && tok.eos_id() != tokenizer::kNoToken) {
    chat.eos_token = std::string(tok.token_text(tok.eos_id()));
  }
  ChatPrompt out;
  out.text = jinja::render_chat(chat_template_for(file), chat);

  // The template already placed BOS where the model wants it, so nothing is added here.
  auto append = [&](std::string_view text, bool scaffolding) {
    auto part = tok.encode(text, {.add_special = false, .parse_special = scaffolding});
    out.ids.insert(out.ids.end(), part.begin(), part.end());
  };
  std::string_view rendered = out.text;
  size_t pos = 0;
  for (const auto& message : chat.messages) {
    if (!message.is_object() || !message.contains("content") || !message["content"].is_string()) {
      continue;
    }
    const std::string& content = message["content"].get_ref<const std::string&>();
    if (content.empty()) continue;
    size_t at = rendered.find(content, pos);
    if (at == std::string_view::npos) continue;
    append(rendered.substr(pos, at - pos), true);
    append(content, false);
    pos = at + content.size();
  }
  append(rendered.substr(pos), true);
  return out;
}

std::vector<int32_t> encode_chat_prompt(const gguf::GgufFile& file,
                                        const tokenizer::Tokenizer& tok, const std::string& system,
                                        const std::string& user) {
  jinja::ChatInputs chat;
  if (!system.empty()) chat.messages.push_back({{"role", "system"}, {"content", system}});
  chat.messages.push_back({{"role", "user"}, {"content", user}});
  chat.add_generation_prompt = true;
  return encode_chat(file, tok, std::move(chat)).ids;
}

}  // namespace llms::cli
