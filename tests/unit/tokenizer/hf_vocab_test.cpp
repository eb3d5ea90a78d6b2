// tokenizer/hf_vocab against transformers: tests/data/tokenizer/hf/<case>/ holds the
// tokenizer.json and tokenizer_config.json that transformers wrote for the byte-level
// vocabularies of tiny.json (tools/make_hf_tokenizer_fixture.py), with the ids its saved tokenizer
// gives a few texts. Read back into GGUF metadata they must give the spec they came from, and a
// tokenizer built from that metadata (directly, and through a written GGUF) must encode as
// transformers did. Also: the refusals.
#include "tokenizer/hf_vocab.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf/hf_model_dir.h"
#include "temp_dir.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"
#include "util/error.h"

namespace llms::tokenizer {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr uint64_t kVocab = 281;  // tiny.json's byte-level vocabularies

// A Hugging Face directory: a tiny model's config.json and weights (HfModelDir needs them) and
// the case's tokenizer files, optionally with tokenizer.json replaced.
class HfDir {
 public:
  explicit HfDir(const std::string& name, const json* tokenizer = nullptr) {
    const fs::path model = fs::path(LLMS_TEST_DATA_DIR) / "tiny_hf" / "qwen3";
    fs::copy_file(model / "config.json", dir_.path() / "config.json");
    fs::copy_file(model / "model.safetensors", dir_.path() / "model.safetensors");
    for (const auto& entry : fs::directory_iterator(testing::data_dir() / "hf" / name)) {
      if (entry.path().filename() == "golden.json") continue;
      fs::copy_file(entry.path(), dir_.path() / entry.path().filename());
    }
    if (tokenizer != nullptr) {
      fs::remove(dir_.path() / "tokenizer.json");
      dir_.write("tokenizer.json", tokenizer->dump());
    }
  }
  gguf::HfModelDir open() const { return gguf::HfModelDir::open(dir_.path()); }
  const fs::path& path() const { return dir_.path(); }
  void write(const std::string& name, const std::string& text) const {
    fs::remove(dir_.path() / name);
    dir_.write(name, text);
  }

 private:
  llms::testing::TempDir dir_;
};

json golden(const std::string& name) {
  return testing::read_json(testing::data_dir() / "hf" / name / "golden.json");
}

json tokenizer_json(const std::string& name) {
  return testing::read_json(testing::data_dir() / "hf" / name / "tokenizer.json");
}

struct Case {
  const char* name;
  const char* pre;
  bool add_bos;
};

class HfVocabGolden : public ::testing::TestWithParam<Case> {};

TEST_P(HfVocabGolden, GivesTheSpecTheTokenizerCameFrom) {
  const Case c = GetParam();
  const json g = golden(c.name);
  const json& spec = g["spec"];
  HfDir dir(c.name);
  HfVocab vocab = vocab_from_hf(dir.open(), kVocab);
  const VocabSpec& got = vocab.spec;

  EXPECT_EQ(got.kind, ModelKind::kByteLevelBpe);
  EXPECT_EQ(got.pre, c.pre);
  const auto tokens = spec["tokens"].get<std::vector<std::string>>();
  const auto types = spec["token_type"].get<std::vector<int32_t>>();
  ASSERT_EQ(got.tokens.size(), kVocab);
  ASSERT_EQ(got.token_types.size(), kVocab);
  // What transformers' conversion changed on the way, so the directory holds it so:
  //   - "<| |>" and "中文", which are not spelled in the byte alphabet, became vocabulary
  //     entries spelled in it (each UTF-8 byte as its byte character), typed normal (the spec
  //     marks "<| |>" control, but transformers made no added token of it);
  //   - the unused "[PAD0]" is a plain vocabulary entry, so normal;
  //   - the duplicate merge "a b" kept only its later rank (tokenizers' rule for duplicates).
  // Everything else is the spec's.
  for (size_t id = 0; id < kVocab; ++id) {
    SCOPED_TRACE("token " + std::to_string(id) + " " + tokens[id]);
    if (tokens[id] == "<| |>" || tokens[id] == "中文") {
      std::string byte_spelled;
      for (unsigned char b : tokens[id]) byte_spelled += testing::byte_char(b);
      EXPECT_EQ(got.tokens[id], byte_spelled);
      EXPECT_EQ(got.token_types[id], static_cast<int32_t>(TokenType::kNormal));
    } else if (tokens[id] == "[PAD0]") {
      EXPECT_EQ(got.tokens[id], tokens[id]);
      EXPECT_EQ(got.token_types[id], static_cast<int32_t>(TokenType::kNormal));
    } else {
      EXPECT_EQ(got.tokens[id], tokens[id]);
      EXPECT_EQ(got.token_types[id], types[id]);
    }
  }
  auto merges = spec["merges"].get<std::vector<std::string>>();
  const auto first_ab = std::find(merges.begin(), merges.end(), "a b");
  ASSERT_NE(std::find(first_ab + 1, merges.end(), "a b"), merges.end());
  merges.erase(first_ab);
  EXPECT_EQ(got.merges, merges);
  EXPECT_EQ(got.bos_id, spec["bos_token_id"].get<int32_t>());
  EXPECT_EQ(got.eos_id, spec["eos_token_id"].get<int32_t>());
  EXPECT_EQ(got.pad_id, spec["pad_token_id"].get<int32_t>());
  EXPECT_EQ(got.unk_id, kNoToken);
  ASSERT_TRUE(got.add_bos.has_value());
  EXPECT_EQ(*got.add_bos, c.add_bos);
  ASSERT_TRUE(got.add_eos.has_value());
  EXPECT_FALSE(*got.add_eos);
}

TEST_P(HfVocabGolden, EncodesAsTransformersDidDirectlyAndThroughAGgufFile) {
  const Case c = GetParam();
  const json g = golden(c.name);
  HfDir dir(c.name);
  HfVocab vocab = vocab_from_hf(dir.open(), kVocab);

  gguf::GgufWriter w;
  w.set_string("general.architecture", g["spec"]["architecture"].get<std::string>());
  write_vocab(vocab, w);
  const std::vector<uint8_t> bytes = w.to_bytes();
  gguf::GgufFile file = gguf::GgufFile::from_bytes(bytes);
  VocabSpec direct_spec = vocab.spec;
  direct_spec.architecture = g["spec"]["architecture"].get<std::string>();
  for (const Tokenizer& tok : {Tokenizer::from_spec(direct_spec), Tokenizer::from_gguf(file)}) {
    for (const json& e : g["encode"]) {
      const std::string text = e["text"].get<std::string>();
      SCOPED_TRACE(text);
      EXPECT_EQ(tok.encode(text, {.add_special = false, .parse_special = true}),
                e["ids"].get<std::vector<int32_t>>());
      EXPECT_EQ(tok.encode(text, {.add_special = true, .parse_special = true}),
                e["ids_with_special"].get<std::vector<int32_t>>());
    }
  }
  EXPECT_EQ(file.get_string("tokenizer.ggml.pre").value_or(""), c.pre);
  EXPECT_EQ(file.get_strings("tokenizer.ggml.tokens").value(), vocab.spec.tokens);
}

INSTANTIATE_TEST_SUITE_P(Cases, HfVocabGolden,
                         ::testing::Values(Case{"byte_level_qwen2", "qwen2", false},
                                           Case{"byte_level_llama3", "llama-bpe", true},
                                           Case{"byte_level_gpt2", "gpt2", false}),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

TEST(HfVocab, ChatTemplateFromItsFileOrTokenizerConfig) {
  HfDir dir("byte_level_qwen2");
  std::ifstream in(dir.path() / "chat_template.jinja");
  const std::string in_file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_NE(in_file.find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(vocab_from_hf(dir.open(), kVocab).chat_template, in_file);

  json config = testing::read_json(dir.path() / "tokenizer_config.json");
  config["chat_template"] = json::array({json{{"name", "tool_use"}, {"template", "T"}},
                                         json{{"name", "default"}, {"template", "D"}}});
  dir.write("tokenizer_config.json", config.dump());
  EXPECT_EQ(vocab_from_hf(dir.open(), kVocab).chat_template, "D");
  config["chat_template"] = "S";
  dir.write("tokenizer_config.json", config.dump());
  EXPECT_EQ(vocab_from_hf(dir.open(), kVocab).chat_template, "S");
}

TEST(HfVocab, PadsToTheModelsVocabularyWithUnusedTokens) {
  HfDir dir("byte_level_qwen2");
  HfVocab vocab = vocab_from_hf(dir.open(), kVocab + 3);
  ASSERT_EQ(vocab.spec.tokens.size(), kVocab + 3);
  EXPECT_EQ(vocab.spec.tokens[kVocab], "[PAD281]");
  EXPECT_EQ(vocab.spec.tokens[kVocab + 2], "[PAD283]");
  for (uint64_t id = kVocab; id < kVocab + 3; ++id) {
    EXPECT_EQ(vocab.spec.token_types[id], static_cast<int32_t>(TokenType::kUnused));
  }
}

TEST(HfVocab, APaddingPlaceholderInTheVocabularyIsUnused) {
  // As transformers writes a GGUF's padding rows: vocabulary entries "[PAD<id>]". A token spelled
  // like a placeholder of another id (tiny.json's "[PAD0]") stays normal.
  json t = tokenizer_json("byte_level_qwen2");
  t["model"]["vocab"]["[PAD281]"] = 281;
  HfDir dir("byte_level_qwen2", &t);
  HfVocab vocab = vocab_from_hf(dir.open(), kVocab + 1);
  EXPECT_EQ(vocab.spec.tokens[281], "[PAD281]");
  EXPECT_EQ(vocab.spec.token_types[281], static_cast<int32_t>(TokenType::kUnused));
  const auto pad0 = std::find(vocab.spec.tokens.begin(), vocab.spec.tokens.end(), "[PAD0]");
  ASSERT_NE(pad0, vocab.spec.tokens.end());
  EXPECT_EQ(vocab.spec.token_types[pad0 - vocab.spec.tokens.begin()],
            static_cast<int32_t>(TokenType::kNormal));
}

TEST(HfVocab, ReadsBothMergeSpellings) {
  json t = tokenizer_json("byte_level_qwen2");
  json merges = json::array();
  for (const json& m : t["model"]["merges"]) {
    merges.push_back(m.is_array() ? json(m[0].get<std::string>() + " " + m[1].get<std::string>())
                                  : m);
  }
  t["model"]["merges"] = merges;
  HfDir pairs("byte_level_qwen2");
  HfDir strings("byte_level_qwen2", &t);
  EXPECT_EQ(vocab_from_hf(strings.open(), kVocab).spec.merges,
            vocab_from_hf(pairs.open(), kVocab).spec.merges);
}

// The message of the Error vocab_from_hf throws, checking its kind.
std::string refusal(const HfDir& dir, Error::Kind kind, uint64_t n_vocab = kVocab) {
  try {
    vocab_from_hf(dir.open(), n_vocab);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "not refused";
  return {};
}

TEST(HfVocab, RefusesWhatItCannotConvert) {
  {
    HfDir dir("byte_level_qwen2");
    fs::remove(dir.path() / "tokenizer.json");
    EXPECT_NE(refusal(dir, Error::Kind::kNotFound).find("tokenizer.json is missing"),
              std::string::npos);
  }
  {
    json t = tokenizer_json("byte_level_qwen2");
    t["model"]["type"] = "Unigram";
    EXPECT_NE(refusal(HfDir("byte_level_qwen2", &t), Error::Kind::kUnsupported).find("Unigram"),
              std::string::npos);
  }
  {
    json t = tokenizer_json("byte_level_qwen2");
    t["model"]["byte_fallback"] = true;
    EXPECT_NE(
        refusal(HfDir("byte_level_qwen2", &t), Error::Kind::kUnsupported).find("byte fallback"),
        std::string::npos);
  }
  {
    json t = tokenizer_json("byte_level_qwen2");
    t["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+";
    EXPECT_NE(refusal(HfDir("byte_level_qwen2", &t), Error::Kind::kUnsupported).find("\\\\w+"),
              std::string::npos);
  }
  {
    json t = tokenizer_json("byte_level_qwen2");
    t["pre_tokenizer"] = json{{"type", "Metaspace"}};
    EXPECT_NE(refusal(HfDir("byte_level_qwen2", &t), Error::Kind::kUnsupported).find("Metaspace"),
              std::string::npos);
  }
  {
    HfDir dir("byte_level_qwen2");
    EXPECT_NE(refusal(dir, Error::Kind::kInvalidFile, 200).find("outside the model's vocabulary"),
              std::string::npos);
  }
  {
    json t = tokenizer_json("byte_level_qwen2");
    t["model"]["merges"][0] = json::array({"a"});
    EXPECT_NE(refusal(HfDir("byte_level_qwen2", &t), Error::Kind::kInvalidFile).find("not a pair"),
              std::string::npos);
  }
  {
    json t = tokenizer_json("byte_level_qwen2");
    t["model"]["merges"][0] = json::array({"a b", "c"});
    EXPECT_NE(refusal(HfDir("byte_level_qwen2", &t), Error::Kind::kUnsupported)
                  .find("has a space in a token"),
              std::string::npos);
  }
  {
    json t = tokenizer_json("byte_level_qwen2");
    t["added_tokens"][0]["id"] = 5;  // "<|endoftext|>" onto the byte token "ą"
    EXPECT_NE(
        refusal(HfDir("byte_level_qwen2", &t), Error::Kind::kInvalidFile).find("is given to both"),
        std::string::npos);
  }
  {
    HfDir dir("byte_level_qwen2");
    json config = testing::read_json(dir.path() / "tokenizer_config.json");
    config["eos_token"] = "<|nowhere|>";
    dir.write("tokenizer_config.json", config.dump());
    EXPECT_NE(refusal(dir, Error::Kind::kInvalidFile).find("eos_token \"<|nowhere|>\""),
              std::string::npos);
  }
}

}  // namespace
}  // namespace llms::tokenizer
