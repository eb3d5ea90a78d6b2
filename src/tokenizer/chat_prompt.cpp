// tokenizer/chat_prompt: render, then tokenize the whole prompt with special tokens parsed only
// where the template wrote them (see chat_prompt.h for the contract and the two-render method).
#include "tokenizer/chat_prompt.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "gguf/gguf_file.h"
#include "util/error.h"
#include "util/utf8.h"

namespace llms::tokenizer {

namespace {

// Overwrites caller special-token text in the shadow render. Any byte would do as long as it
// differs from the token's own bytes somewhere; '~' survives what templates do to strings
// (trim, upper/lower, tojson, Python repr, HTML escaping) unchanged and at the same length.
constexpr char kFiller = '~';

// Deeper than the jinja bridge accepts (it refuses the render first); a guard for the recursion.
constexpr int kMaxDepth = 1024;

// Overwrites each special-token match in `s`; returns how many there were.
size_t overwrite_specials(const Tokenizer& tok, std::string& s) {
  if (!is_valid_utf8(s)) s = utf8_lossy(s);  // find_special's offsets are into the repair
  const std::vector<SpecialTokenMatch> matches = tok.find_special(s);
  for (const SpecialTokenMatch& m : matches) {
    std::fill(s.begin() + static_cast<std::ptrdiff_t>(m.begin),
              s.begin() + static_cast<std::ptrdiff_t>(m.end), kFiller);
  }
  return matches.size();
}

// The same over every string and object key of `value`; returns the number of matches.
size_t overwrite_specials(const Tokenizer& tok, nlohmann::ordered_json& value, int depth) {
  if (depth > kMaxDepth) {
    throw Error(Error::Kind::kInvalidArgument, "chat input is nested too deeply");
  }
  if (value.is_string()) return overwrite_specials(tok, value.get_ref<std::string&>());
  size_t n = 0;
  if (value.is_array()) {
    for (auto& item : value) n += overwrite_specials(tok, item, depth + 1);
    return n;
  }
  if (!value.is_object()) return 0;
  bool keys_changed = false;
  for (auto& [key, item] : value.items()) {
    std::string k = key;
    if (overwrite_specials(tok, k) > 0) keys_changed = true;
    n += overwrite_specials(tok, item, depth + 1);
  }
  if (keys_changed) {
    nlohmann::ordered_json rebuilt = nlohmann::ordered_json::object();
    for (auto& [key, item] : value.items()) {
      std::string k = key;
      n += overwrite_specials(tok, k);
      rebuilt[k] = std::move(item);
    }
    value = std::move(rebuilt);
  }
  return n;
}

// True when `shadow` differs from `text` only where it holds the filler.
bool is_aligned(std::string_view text, std::string_view shadow) {
  if (text.size() != shadow.size()) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != shadow[i] && shadow[i] != kFiller) return false;
  }
  return true;
}

std::string render_valid(const jinja::Template& chat_template, const jinja::ChatInputs& chat,
                         const jinja::RenderOptions& options) {
  std::string text = jinja::render_chat(chat_template, chat, options);
  if (!is_valid_utf8(text)) text = utf8_lossy(text);
  return text;
}

}  // namespace

std::string chat_template_for(const gguf::GgufFile& file) {
  if (auto t = file.get_string("tokenizer.chat_template"); t && !t->empty()) return *t;
  const std::string arch = file.get_string("general.architecture").value_or("");
  if (arch.rfind("gemma", 0) == 0) return std::string(jinja::builtin_chat_template("gemma"));
  if (arch == "llama") return std::string(jinja::builtin_chat_template("llama3"));
  return std::string(jinja::builtin_chat_template("chatml"));
}

ChatPrompt encode_chat(const jinja::Template& chat_template, const Tokenizer& tok,
                       jinja::ChatInputs chat, const jinja::RenderOptions& options) {
  if (chat.bos_token.empty() && tok.bos_id() != kNoToken) {
    chat.bos_token = std::string(tok.token_text(tok.bos_id()));
  }
  if (chat.eos_token.empty() && tok.eos_id() != kNoToken) {
    chat.eos_token = std::string(tok.token_text(tok.eos_id()));
  }
  ChatPrompt out;
  out.text = render_valid(chat_template, chat, options);
  // The template already placed BOS where the model wants it, so nothing is added here.
  const std::vector<SpecialTokenMatch> specials = tok.find_special(out.text);
  if (specials.empty()) {
    out.ids = tok.encode(out.text, {.add_special = false, .parse_special = false});
    return out;
  }

  size_t n_caller = 0;
  n_caller += overwrite_specials(tok, chat.messages, 0);
  n_caller += overwrite_specials(tok, chat.tools, 0);
  n_caller += overwrite_specials(tok, chat.documents, 0);
  n_caller += overwrite_specials(tok, chat.extra, 0);
  if (n_caller == 0) {  // the usual case: every special token is the template's
    out.ids = tok.encode(out.text, {.add_special = false, .parse_special = true});
    return out;
  }

  const char* const kCannotTell =
      "chat prompt: the template's output changes with the special-token text in the messages, "
      "so its own control tokens cannot be told apart from the caller's";
  std::string shadow;
  try {
    shadow = render_valid(chat_template, chat, options);
  } catch (const Error& e) {
    throw Error(Error::Kind::kInvalidArgument, std::string(kCannotTell) + " (" + e.what() + ")");
  }
  if (!is_aligned(out.text, shadow)) throw Error(Error::Kind::kInvalidArgument, kCannotTell);

  std::vector<SpecialTokenMatch> allowed;
  allowed.reserve(specials.size());
  const std::string_view text = out.text;
  for (const SpecialTokenMatch& m : specials) {
    const size_t n = m.end - m.begin;
    if (text.substr(m.begin, n) == std::string_view(shadow).substr(m.begin, n)) {
      allowed.push_back(m);
    } else {
      ++out.n_text_specials;
    }
  }
  out.ids = tok.encode_with_special_at(out.text, allowed, /*add_special=*/false);
  return out;
}

ChatPrompt encode_chat(const gguf::GgufFile& file, const Tokenizer& tok, jinja::ChatInputs chat) {
  return encode_chat(jinja::Template::parse(chat_template_for(file)), tok, std::move(chat));
}

std::vector<int32_t> encode_chat_prompt(const gguf::GgufFile& file, const Tokenizer& tok,
                                        const std::string& system, const std::string& user) {
  jinja::ChatInputs chat;
  if (!system.empty()) chat.messages.push_back({{"role", "system"}, {"content", system}});
  chat.messages.push_back({{"role", "user"}, {"content", user}});
  chat.add_generation_prompt = true;
  return encode_chat(file, tok, std::move(chat)).ids;
}

}  // namespace llms::tokenizer
