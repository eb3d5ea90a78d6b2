// Helpers for the tokenizer unit tests: hand-made vocabularies and the HF-made tiny golden data.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "util/utf8.h"

namespace llms::tokenizer::testing {

inline std::filesystem::path data_dir() {
  return std::filesystem::path(LLMS_TEST_DATA_DIR) / "tokenizer";
}

inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

// GPT-2's bytes_to_unicode, written out independently of the library's table.
inline std::string byte_char(uint8_t b) {
  int n = 0;
  for (int x = 0; x < 256; ++x) {
    const bool printable = (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174;
    const char32_t cp = printable ? static_cast<char32_t>(x) : static_cast<char32_t>(256 + n++);
    if (x == b) {
      std::string s;
      append_utf8(cp, s);
      return s;
    }
  }
  return {};
}

// The byte alphabet spelling of raw bytes ("Ġhello" for " hello").
inline std::string spell(std::string_view raw) {
  std::string s;
  for (char c : raw) s += byte_char(static_cast<uint8_t>(c));
  return s;
}

// A byte-level vocabulary: the 256 byte tokens (id == byte), then `extra` tokens given in raw
// bytes (spelled here), with merges given as pairs of raw strings.
struct ByteLevelBuilder {
  VocabSpec spec;
  ByteLevelBuilder(std::string pre = "qwen2") {
    spec.kind = ModelKind::kByteLevelBpe;
    spec.pre = std::move(pre);
    for (int b = 0; b < 256; ++b) {
      spec.tokens.push_back(byte_char(static_cast<uint8_t>(b)));
      spec.token_types.push_back(1);
    }
  }
  // Adds a merge of two raw strings and the token they make (if new); returns its id.
  int32_t merge(std::string_view left, std::string_view right) {
    spec.merges.push_back(spell(left) + " " + spell(right));
    return add(spell(std::string(left) + std::string(right)));
  }
  int32_t add(std::string spelled_text, int32_t type = 1) {
    for (size_t i = 0; i < spec.tokens.size(); ++i) {
      if (spec.tokens[i] == spelled_text) return static_cast<int32_t>(i);
    }
    spec.tokens.push_back(std::move(spelled_text));
    spec.token_types.push_back(type);
    return static_cast<int32_t>(spec.tokens.size() - 1);
  }
  Tokenizer build() const { return Tokenizer::from_spec(spec); }
};

// The VocabSpec of one vocabulary of tests/data/tokenizer/tiny.json.
inline VocabSpec spec_from_tiny_json(const nlohmann::json& j) {
  VocabSpec spec;
  spec.kind =
      j["tokenizer_type"] == "gpt2" ? ModelKind::kByteLevelBpe : ModelKind::kSentencePieceBpe;
  spec.architecture = j["architecture"].get<std::string>();
  spec.pre = j.value("pre_tokenizer_type", std::string("default"));
  spec.tokens = j["tokens"].get<std::vector<std::string>>();
  spec.token_types = j["token_type"].get<std::vector<int32_t>>();
  if (j.contains("merges")) spec.merges = j["merges"].get<std::vector<std::string>>();
  if (j.contains("scores")) spec.scores = j["scores"].get<std::vector<float>>();
  spec.bos_id = j.value("bos_token_id", kNoToken);
  spec.eos_id = j.value("eos_token_id", kNoToken);
  spec.unk_id = j.value("unk_token_id", kNoToken);
  spec.pad_id = j.value("pad_token_id", kNoToken);
  if (j.contains("add_prefix_space")) spec.add_space_prefix = j["add_prefix_space"].get<bool>();
  return spec;
}

inline std::string streamed(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip) {
  DecodeStream stream(tok, {.skip_special = skip});
  std::string out;
  for (int32_t id : ids) stream.push(id, out);
  stream.finish(out);
  return out;
}

}  // namespace llms::tokenizer::testing
