// `llmserve tokenize MODEL TEXT`: ids and pieces of a text; `--chat FILE` renders a conversation
// through the model's chat template first; `--decode IDS` goes back from ids to text.
#include "tokenize_command.h"

#include <fmt/core.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "jinja/chat_template.h"
#include "model_registry.h"
#include "tokenizer/chat_prompt.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace llms::cli {

namespace {

struct TokenizeOptions {
  std::string model;
  std::string text;
  std::string chat_file;
  std::string decode;
  std::string cache_dir;
  bool no_special = false;     // do not add BOS/EOS
  bool parse_special = false;  // recognise special-token text in TEXT
  bool as_json = false;
};

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::string cleaned = text;
  for (char& c : cleaned) {
    if (c == ',' || c == '[' || c == ']') c = ' ';
  }
  std::istringstream in(cleaned);
  std::string word;
  while (in >> word) {
    try {
      size_t used = 0;
      long long v = std::stoll(word, &used);
      if (used != word.size() || v < INT32_MIN || v > INT32_MAX) throw std::invalid_argument(word);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      throw Error(Error::Kind::kInvalidArgument, "--decode: '" + word + "' is not a token id");
    }
  }
  return ids;
}

// Token text made printable: control bytes as \xNN, the rest as the vocabulary spells it.
std::string printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

int run_tokenize(const TokenizeOptions& opts) {
  auto path = resolve_model(opts.model, opts.cache_dir);
  gguf::GgufFile file = gguf::GgufFile::open(path);
  tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(file);

  if (!opts.decode.empty()) {
    std::puts(tok.decode(parse_ids(opts.decode)).c_str());
    return 0;
  }

  std::vector<int32_t> ids;
  std::string rendered;
  if (!opts.chat_file.empty()) {
    std::ifstream in(opts.chat_file);
    if (!in) throw Error(Error::Kind::kNotFound, "cannot read " + opts.chat_file);
    nlohmann::ordered_json doc;
    try {
      doc = nlohmann::ordered_json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw Error(Error::Kind::kInvalidArgument, opts.chat_file + ": " + e.what());
    }
    jinja::ChatInputs chat;
    chat.messages = doc.is_array() ? doc : doc.value("messages", nlohmann::ordered_json::array());
    if (doc.is_object() && doc.contains("tools")) chat.tools = doc["tools"];
    chat.add_generation_prompt = doc.is_object() ? doc.value("add_generation_prompt", true) : true;
    tokenizer::ChatPrompt prompt = tokenizer::encode_chat(file, tok, chat);
    rendered = prompt.text;
    ids = prompt.ids;
  } else {
    ids = tok.encode(opts.text,
                     {.add_special = !opts.no_special, .parse_special = opts.parse_special});
  }

  if (opts.as_json) {
    nlohmann::ordered_json j;
    if (!rendered.empty()) j["prompt"] = rendered;
    j["ids"] = ids;
    nlohmann::ordered_json pieces = nlohmann::ordered_json::array();
    for (int32_t id : ids) pieces.push_back(std::string(tok.token_text(id)));
    j["pieces"] = pieces;
    j["count"] = ids.size();
    std::puts(j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  if (!rendered.empty()) fmt::print("{}\n---\n", rendered);
  for (int32_t id : ids) fmt::print("{:>8}  {}\n", id, printable(tok.token_text(id)));
  fmt::print("{} tokens\n", ids.size());
  return 0;
}

}  // namespace

void add_tokenize_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<TokenizeOptions>();
  auto* cmd = app.add_subcommand("tokenize", "Text to token ids and pieces (and back)");
  cmd->add_option("model", opts->model, "GGUF file or registered model")->required();
  cmd->add_option("text", opts->text, "Text to tokenize");
  cmd->add_option("--chat", opts->chat_file,
                  "JSON file with messages (or {messages, tools}) to render and tokenize");
  cmd->add_option("--decode", opts->decode, "Token ids to decode, e.g. \"9707,11,1879\"");
  cmd->add_flag("--no-special", opts->no_special, "Do not add BOS/EOS");
  cmd->add_flag("--parse-special", opts->parse_special,
                "Recognise special-token text (e.g. <|im_end|>) in TEXT");
  cmd->add_flag("--json", opts->as_json, "Print JSON");
  cmd->add_option("--cache-dir", opts->cache_dir, "Cache root for registered models");
  cmd->callback([opts, &exit_code] { exit_code = run_tokenize(*opts); });
}

}  // namespace llms::cli
