// tokenizer/hf_vocab: see the header.
#include "tokenizer/hf_vocab.h"

#include <array>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "util/error.h"
#include "util/text_file.h"

namespace llms::tokenizer {

namespace {

using nlohmann::json;

[[noreturn]] void fail(Error::Kind kind, const std::string& message) {
  throw Error(kind, "tokenizer.json: " + message);
}

// The Split regexes of Hugging Face tokenizer.json files (as the JSON string holds them, so "\r"
// is a backslash and an r) and the GGUF pre-tokenizer names llama.cpp gives them.
struct PreRegex {
  std::string_view gguf_name;
  std::string_view regex;
};

constexpr std::array<PreRegex, 5> kPreRegexes = {{
    {"qwen2",
     R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
    {"llama-bpe",
     R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
    {"qwen35",
     R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
    {"tekken",
     R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
    {"gpt-4o",
     R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
}};

const json* member(const json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(std::string(key));
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::string string_member(const json& object, std::string_view key) {
  const json* v = member(object, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

// The pre-tokenizers of tokenizer.json in order (a Sequence flattened).
std::vector<const json*> pre_tokenizer_steps(const json& tokenizer) {
  std::vector<const json*> steps;
  const json* pre = member(tokenizer, "pre_tokenizer");
  if (pre == nullptr) return steps;
  if (string_member(*pre, "type") == "Sequence") {
    const json* list = member(*pre, "pretokenizers");
    if (list == nullptr || !list->is_array())
      fail(Error::Kind::kInvalidFile, "a Sequence pre-tokenizer without 'pretokenizers'");
    for (const json& step : *list) steps.push_back(&step);
  } else {
    steps.push_back(pre);
  }
  return steps;
}

std::string pre_tokenizer_name(const json& tokenizer) {
  std::vector<const json*> steps = pre_tokenizer_steps(tokenizer);
  const json* byte_level = nullptr;
  std::optional<std::string> split_regex;
  for (const json* step : steps) {
    const std::string type = string_member(*step, "type");
    if (type == "ByteLevel") {
      byte_level = step;
    } else if (type == "Split") {
      const json* pattern = member(*step, "pattern");
      if (split_regex || pattern == nullptr || member(*pattern, "Regex") == nullptr) {
        fail(Error::Kind::kUnsupported,
             "a pre-tokenizer Split other than one regex is not converted to GGUF");
      }
      split_regex = string_member(*pattern, "Regex");
    } else {
      fail(Error::Kind::kUnsupported,
           "pre-tokenizer '" + type + "' is not converted to GGUF (byte-level BPE only)");
    }
  }
  if (byte_level == nullptr) {
    fail(Error::Kind::kUnsupported,
         "the tokenizer is not byte-level (no ByteLevel pre-tokenizer): SentencePiece-style "
         "tokenizers are not converted to GGUF yet");
  }
  const json* use_regex = member(*byte_level, "use_regex");
  const bool byte_level_splits =
      use_regex == nullptr || (use_regex->is_boolean() && use_regex->get<bool>());
  if (!split_regex) {
    if (!byte_level_splits) {
      fail(Error::Kind::kUnsupported, "a ByteLevel pre-tokenizer without a regex is not converted");
    }
    return "gpt2";
  }
  if (byte_level_splits) {
    fail(Error::Kind::kUnsupported,
         "a Split regex followed by ByteLevel's own regex is not converted to GGUF");
  }
  for (const PreRegex& known : kPreRegexes) {
    if (*split_regex == known.regex) return std::string(known.gguf_name);
  }
  fail(Error::Kind::kUnsupported, "the pre-tokenizer regex " + json(*split_regex).dump() +
                                      " has no GGUF pre-tokenizer name (known: qwen2, llama-bpe, "
                                      "qwen35, tekken, gpt-4o, gpt2)");
}

// `where` names the file and field.
int32_t checked_id(const json& value, uint64_t n_vocab, const std::string& where) {
  if (!value.is_number_integer()) {
    throw Error(Error::Kind::kInvalidFile, where + " is not an integer id");
  }
  const int64_t id = value.get<int64_t>();
  if (id < 0 || static_cast<uint64_t>(id) >= n_vocab) {
    throw Error(Error::Kind::kInvalidFile, where + " = " + std::to_string(id) +
                                               " is outside the model's vocabulary of " +
                                               std::to_string(n_vocab));
  }
  return static_cast<int32_t>(id);
}

struct Vocabulary {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<bool> given;
  std::unordered_map<std::string, int32_t> ids;

  void put(int32_t id, const std::string& text, TokenType type, const std::string& where) {
    if (given[id] && tokens[id] != text) {
      fail(Error::Kind::kInvalidFile, where + ": id " + std::to_string(id) + " is given to both " +
                                          json(tokens[id]).dump() + " and " + json(text).dump());
    }
    given[id] = true;
    tokens[id] = text;
    types[id] = static_cast<int32_t>(type);
    ids[text] = id;
  }
};

Vocabulary read_vocabulary(const json& tokenizer, uint64_t n_vocab) {
  const json* model = member(tokenizer, "model");
  if (model == nullptr) fail(Error::Kind::kInvalidFile, "no 'model'");
  const std::string type = string_member(*model, "type");
  if (type != "BPE") {
    fail(Error::Kind::kUnsupported,
         "model type '" + type + "' is not converted to GGUF (byte-level BPE only)");
  }
  const json* byte_fallback = member(*model, "byte_fallback");
  if (byte_fallback != nullptr && byte_fallback->is_boolean() && byte_fallback->get<bool>()) {
    fail(Error::Kind::kUnsupported,
         "a BPE with byte fallback (SentencePiece style) is not converted to GGUF yet");
  }
  const json* vocab = member(*model, "vocab");
  if (vocab == nullptr || !vocab->is_object())
    fail(Error::Kind::kInvalidFile, "model.vocab is not an object");
  if (n_vocab > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    fail(Error::Kind::kInvalidFile,
         "the vocabulary size " + std::to_string(n_vocab) + " is absurd");
  }

  Vocabulary v;
  v.tokens.resize(n_vocab);
  v.types.assign(n_vocab, static_cast<int32_t>(TokenType::kUnused));
  v.given.assign(n_vocab, false);
  v.ids.reserve(n_vocab);
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    const int32_t id = checked_id(it.value(), n_vocab,
                                  "tokenizer.json: model.vocab[" + json(it.key()).dump() + "]");
    // "[PAD<id>]" is the placeholder converters write for a padding row (transformers keeps the
    // GGUF's as vocabulary entries): unused, as in the GGUF it came from.
    const bool placeholder = it.key() == "[PAD" + std::to_string(id) + "]";
    v.put(id, it.key(), placeholder ? TokenType::kUnused : TokenType::kNormal, "model.vocab");
  }
  if (const json* added = member(tokenizer, "added_tokens")) {
    if (!added->is_array()) fail(Error::Kind::kInvalidFile, "added_tokens is not an array");
    for (const json& token : *added) {
      const json* id = member(token, "id");
      const json* content = member(token, "content");
      if (id == nullptr || content == nullptr || !content->is_string()) {
        fail(Error::Kind::kInvalidFile, "an added token without an id and a content string");
      }
      const json* special = member(token, "special");
      const bool is_special = special != nullptr && special->is_boolean() && special->get<bool>();
      v.put(checked_id(*id, n_vocab, "tokenizer.json: added_tokens id"),
            content->get<std::string>(), is_special ? TokenType::kControl : TokenType::kUserDefined,
            "added_tokens");
    }
  }
  for (uint64_t id = 0; id < n_vocab; ++id) {
    if (!v.given[id]) v.tokens[id] = "[PAD" + std::to_string(id) + "]";
  }
  return v;
}

std::vector<std::string> read_merges(const json& tokenizer) {
  std::vector<std::string> merges;
  const json* list = member(*member(tokenizer, "model"), "merges");
  if (list == nullptr) return merges;
  if (!list->is_array()) fail(Error::Kind::kInvalidFile, "model.merges is not an array");
  merges.reserve(list->size());
  for (const json& merge : *list) {
    if (merge.is_string()) {
      const std::string& text = merge.get_ref<const std::string&>();
      if (text.find(' ') == std::string::npos || text.find(' ') != text.rfind(' ')) {
        fail(Error::Kind::kInvalidFile, "merge " + merge.dump() + " is not two tokens");
      }
      merges.push_back(text);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      const std::string& left = merge[0].get_ref<const std::string&>();
      const std::string& right = merge[1].get_ref<const std::string&>();
      // GGUF spells a merge "left right": a token with a space in it would read back wrong.
      if (left.find(' ') != std::string::npos || right.find(' ') != std::string::npos) {
        fail(Error::Kind::kUnsupported,
             "merge " + merge.dump().substr(0, 80) +
                 " has a space in a token, which GGUF's \"left right\" merges cannot hold");
      }
      merges.push_back(left + " " + right);
    } else {
      fail(Error::Kind::kInvalidFile, "merge " + merge.dump().substr(0, 80) + " is not a pair");
    }
  }
  return merges;
}

// tokenizer_config.json's "bos_token" etc.: a string or an AddedToken object.
std::optional<std::string> config_token_text(const json* tokenizer_config, const char* key) {
  if (tokenizer_config == nullptr) return std::nullopt;
  const json* v = member(*tokenizer_config, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_string()) return v->get<std::string>();
  if (const json* content = member(*v, "content"); content != nullptr && content->is_string()) {
    return content->get<std::string>();
  }
  return std::nullopt;
}

int32_t special_id(const gguf::HfModelDir& dir, const Vocabulary& v, uint64_t n_vocab,
                   const char* role) {
  const std::string token_key = std::string(role) + "_token";
  if (auto text = config_token_text(dir.tokenizer_config(), token_key.c_str())) {
    auto it = v.ids.find(*text);
    if (it == v.ids.end()) {
      throw Error(Error::Kind::kInvalidFile, "tokenizer_config.json: " + token_key + " " +
                                                 json(*text).dump() + " is not in the vocabulary");
    }
    return it->second;
  }
  const std::string id_key = token_key + "_id";
  for (const json* source : {&dir.config(), dir.generation_config()}) {
    if (source == nullptr) continue;
    const json* value = member(*source, id_key);
    if (value != nullptr && value->is_array() && !value->empty()) value = &(*value)[0];
    if (value != nullptr) {
      const char* file = source == &dir.config() ? "config.json" : "generation_config.json";
      return checked_id(*value, n_vocab, std::string(file) + ": " + id_key);
    }
  }
  return kNoToken;
}

// Whether the post-processor's single-sequence template starts (front) or ends with a special
// token; nullopt without a TemplateProcessing.
std::optional<bool> template_adds(const json& tokenizer, bool front) {
  const json* post = member(tokenizer, "post_processor");
  if (post == nullptr) return std::nullopt;
  const json* processing = nullptr;
  if (string_member(*post, "type") == "TemplateProcessing") {
    processing = post;
  } else if (string_member(*post, "type") == "Sequence") {
    if (const json* list = member(*post, "processors"); list != nullptr && list->is_array()) {
      for (const json& p : *list) {
        if (string_member(p, "type") == "TemplateProcessing") processing = &p;
      }
    }
  }
  if (processing == nullptr) return std::nullopt;
  const json* single = member(*processing, "single");
  if (single == nullptr || !single->is_array() || single->empty()) return false;
  const json& piece = front ? single->front() : single->back();
  return member(piece, "SpecialToken") != nullptr;
}

std::optional<bool> config_flag(const json* tokenizer_config, const char* key) {
  if (tokenizer_config == nullptr) return std::nullopt;
  const json* v = member(*tokenizer_config, key);
  if (v == nullptr || !v->is_boolean()) return std::nullopt;
  return v->get<bool>();
}

std::string read_chat_template(const gguf::HfModelDir& dir) {
  if (const json* config = dir.tokenizer_config()) {
    if (const json* t = member(*config, "chat_template")) {
      if (t->is_string()) return t->get<std::string>();
      if (t->is_array()) {
        for (const json& entry : *t) {
          if (string_member(entry, "name") == "default") return string_member(entry, "template");
        }
      }
    }
  }
  const std::filesystem::path file = dir.path() / "chat_template.jinja";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) return {};
  constexpr uint64_t kMaxTemplateBytes = uint64_t{1} << 20;
  const uint64_t size = std::filesystem::file_size(file, ec);
  if (ec) throw Error(Error::Kind::kIo, file.string() + ": " + ec.message());
  if (size > kMaxTemplateBytes) {
    throw Error(Error::Kind::kInvalidFile, file.string() + " is larger than 1 MiB");
  }
  return read_text_file(file.string(), "chat template");
}

}  // namespace

HfVocab vocab_from_hf(const gguf::HfModelDir& dir, uint64_t n_vocab) {
  const json* tokenizer = dir.tokenizer();
  if (tokenizer == nullptr) {
    throw Error(Error::Kind::kNotFound, (dir.path() / "tokenizer.json").string() +
                                            " is missing: a GGUF file needs the model's tokenizer");
  }
  HfVocab out;
  VocabSpec& spec = out.spec;
  spec.kind = ModelKind::kByteLevelBpe;
  spec.pre = pre_tokenizer_name(*tokenizer);
  Vocabulary v = read_vocabulary(*tokenizer, n_vocab);
  spec.merges = read_merges(*tokenizer);
  spec.bos_id = special_id(dir, v, n_vocab, "bos");
  spec.eos_id = special_id(dir, v, n_vocab, "eos");
  spec.pad_id = special_id(dir, v, n_vocab, "pad");
  spec.unk_id = special_id(dir, v, n_vocab, "unk");
  spec.add_bos = config_flag(dir.tokenizer_config(), "add_bos_token");
  if (!spec.add_bos) spec.add_bos = template_adds(*tokenizer, true);
  spec.add_eos = config_flag(dir.tokenizer_config(), "add_eos_token");
  if (!spec.add_eos) spec.add_eos = template_adds(*tokenizer, false);
  spec.tokens = std::move(v.tokens);
  spec.token_types = std::move(v.types);
  out.chat_template = read_chat_template(dir);
  return out;
}

void write_vocab(const HfVocab& vocab, gguf::GgufWriter& w) {
  const VocabSpec& spec = vocab.spec;
  w.set_string("tokenizer.ggml.model", spec.kind == ModelKind::kByteLevelBpe ? "gpt2" : "llama");
  if (!spec.pre.empty()) w.set_string("tokenizer.ggml.pre", spec.pre);
  w.set_strings("tokenizer.ggml.tokens", spec.tokens);
  if (!spec.token_types.empty()) w.set_i32s("tokenizer.ggml.token_type", spec.token_types);
  // A byte-level vocabulary always has the key (llama.cpp and Tokenizer::from_gguf want it), even
  // when it merges nothing.
  if (spec.kind == ModelKind::kByteLevelBpe || !spec.merges.empty()) {
    w.set_strings("tokenizer.ggml.merges", spec.merges);
  }
  if (!spec.scores.empty()) w.set_f32s("tokenizer.ggml.scores", spec.scores);
  auto set_id = [&](const char* key, int32_t id) {
    if (id != kNoToken) w.set_u32(key, static_cast<uint32_t>(id));
  };
  set_id("tokenizer.ggml.bos_token_id", spec.bos_id);
  set_id("tokenizer.ggml.eos_token_id", spec.eos_id);
  set_id("tokenizer.ggml.unknown_token_id", spec.unk_id);
  set_id("tokenizer.ggml.padding_token_id", spec.pad_id);
  if (spec.add_bos) w.set_bool("tokenizer.ggml.add_bos_token", *spec.add_bos);
  if (spec.add_eos) w.set_bool("tokenizer.ggml.add_eos_token", *spec.add_eos);
  if (spec.add_space_prefix) w.set_bool("tokenizer.ggml.add_space_prefix", *spec.add_space_prefix);
  if (!vocab.chat_template.empty()) w.set_string("tokenizer.chat_template", vocab.chat_template);
}

}  // namespace llms::tokenizer
