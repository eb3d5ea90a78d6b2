// libFuzzer target for chat prompts (tokenizer/chat_prompt.h): arbitrary message contents through
// a built-in template and a small tokenizer, checking the contract rather than "no crash":
//  - ChatML + byte-level BPE: every id is in range, the ids decode back to the rendered text, and
//    the control tokens are exactly the template's own (one <|im_start|> per message plus the
//    generation prompt, one <|im_end|> per message) whatever special-token text the contents hold;
//    the chat is never refused (ChatML never branches on content).
//  - Gemma + SentencePiece-style vocabulary: the same for <start_of_turn> / <end_of_turn> (a system
//    message has no turn of its own) when the template accepts the chat (it may raise on roles it
//    does not allow).
// Input: contents separated by 0x00 bytes (up to 6 messages, roles alternating user/assistant,
// the first may be system); the first byte picks options.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_vocabularies.h"
#include "jinja/chat_template.h"
#include "tokenizer/chat_prompt.h"
#include "util/error.h"
#include "util/utf8.h"

namespace {

using llms::tokenizer::Tokenizer;

void check(bool ok) {
  if (!ok) std::abort();
}

int32_t id_of(const Tokenizer& tok, const std::string& text) {
  auto matches = tok.find_special(text);
  check(matches.size() == 1 && matches[0].begin == 0 && matches[0].end == text.size());
  return matches[0].id;
}

size_t count(const std::vector<int32_t>& ids, int32_t id) {
  size_t n = 0;
  for (int32_t x : ids) n += x == id ? 1 : 0;
  return n;
}

// `turns`: how many messages get a turn of their own (Gemma folds a system message into the first
// user turn).
void run(const Tokenizer& tok, const llms::jinja::Template& tmpl,
         const llms::jinja::ChatInputs& chat, const std::string& open, const std::string& close,
         size_t turns, bool may_refuse) {
  llms::tokenizer::ChatPrompt p;
  try {
    p = llms::tokenizer::encode_chat(tmpl, tok, chat);
  } catch (const llms::Error&) {
    check(may_refuse);
    return;
  }
  for (int32_t id : p.ids) check(id >= 0 && id < tok.n_vocab());
  check(tok.decode(p.ids) == p.text);
  check(count(p.ids, id_of(tok, open)) == turns + (chat.add_generation_prompt ? 1 : 0));
  check(count(p.ids, id_of(tok, close)) == turns);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Tokenizer byte_level = llms::fuzz::make_byte_level();
  static const Tokenizer sentencepiece = llms::fuzz::make_sentencepiece();
  static const auto chatml =
      llms::jinja::Template::parse(llms::jinja::builtin_chat_template("chatml"));
  static const auto gemma =
      llms::jinja::Template::parse(llms::jinja::builtin_chat_template("gemma"));
  if (size == 0 || size > 4096) return 0;
  const uint8_t flags = data[0];
  std::vector<std::string> contents(1);
  for (size_t i = 1; i < size; ++i) {
    if (data[i] == 0) {
      if (contents.size() == 6) break;
      contents.emplace_back();
    } else {
      contents.back().push_back(static_cast<char>(data[i]));
    }
  }
  llms::jinja::ChatInputs chat;
  chat.add_generation_prompt = (flags & 1) != 0;
  const bool with_system = (flags & 2) != 0;
  for (size_t i = 0; i < contents.size(); ++i) {
    const char* role = with_system && i == 0 ? "system" : ((i % 2 == 0) ? "user" : "assistant");
    // Requests carry valid UTF-8 (the server refuses anything else before rendering).
    chat.messages.push_back({{"role", role}, {"content", llms::utf8_lossy(contents[i])}});
  }
  const size_t n = chat.messages.size();
  run(byte_level, chatml, chat, "<|im_start|>", "<|im_end|>", n, false);
  run(sentencepiece, gemma, chat, "<start_of_turn>", "<end_of_turn>", with_system ? n - 1 : n,
      true);
  return 0;
}
