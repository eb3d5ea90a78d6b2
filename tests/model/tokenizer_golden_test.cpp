// Golden tokenizer test: our Tokenizer against Hugging Face on the real model files.
//
// tests/data/tokenizer/golden_<family>.jsonl was made by tools/make_tokenizer_golden.py from
// transformers' GGUF tokenizer conversion (versions in its header line). Every corpus string must
// encode to exactly HF's ids (with and without special-token parsing, with and without BOS/EOS)
// and decode to exactly HF's text; every decode case (ids cutting characters apart, byte tokens,
// special tokens) must decode to HF's text, in one call and streamed token by token. Skips when
// the model file is not cached (LLMS_MODEL_DIR, default ~/.cache/llmserve/models).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "model_dir.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "util/utf8.h"

namespace llms {
namespace {

using tokenizer::DecodeOptions;
using tokenizer::EncodeOptions;
using tokenizer::Tokenizer;
using Json = nlohmann::json;

using testing::model_dir;

std::filesystem::path data_dir() {
#ifdef LLMS_TEST_DATA_DIR
  return std::filesystem::path(LLMS_TEST_DATA_DIR) / "tokenizer";
#else
  return std::filesystem::path(__FILE__).parent_path().parent_path() / "data" / "tokenizer";
#endif
}

std::vector<Json> read_jsonl(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::vector<Json> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) lines.push_back(Json::parse(line));
  }
  return lines;
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::string corpus_text(const Json& entry) {
  return entry.contains("hex") ? from_hex(entry["hex"].get<std::string>())
                               : entry["text"].get<std::string>();
}

std::string show(const std::string& s) {
  std::string out;
  for (unsigned char c : s.substr(0, 80)) {
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return s.size() > 80 ? out + "..." : out;
}

std::string show(const std::vector<int32_t>& ids) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < ids.size() && i < 40; ++i) os << (i ? "," : "") << ids[i];
  if (ids.size() > 40) os << ",... (" << ids.size() << ")";
  os << "]";
  return os.str();
}

struct Model {
  const char* family;
  const char* file;
};

// Loads each model's tokenizer once for all tests of the suite.
const Tokenizer* load(const Model& m) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[m.file];
  if (!slot) {
    auto file = gguf::GgufFile::open(model_dir() / m.file);
    slot = std::make_unique<Tokenizer>(Tokenizer::from_gguf(file));
  }
  return slot.get();
}

class TokenizerGolden : public ::testing::TestWithParam<Model> {
 protected:
  void SetUp() override {
    const Model& m = GetParam();
    if (!std::filesystem::exists(model_dir() / m.file)) {
      GTEST_SKIP() << (model_dir() / m.file) << " not cached (llmserve pull --all)";
    }
    tok_ = load(m);
    corpus_ = read_jsonl(data_dir() / "corpus.jsonl");
    auto golden = read_jsonl(data_dir() / (std::string("golden_") + m.family + ".jsonl"));
    ASSERT_FALSE(golden.empty());
    header_ = golden[0]["header"];
    for (size_t i = 1; i < golden.size(); ++i) {
      (golden[i].contains("decode") ? decode_cases_ : records_).push_back(golden[i]);
    }
    ASSERT_EQ(records_.size(), corpus_.size()) << "golden file is stale: rerun the script";
  }

  const Tokenizer* tok_ = nullptr;
  std::vector<Json> corpus_;
  Json header_;
  std::vector<Json> records_;
  std::vector<Json> decode_cases_;
};

TEST_P(TokenizerGolden, VocabularyAndSpecialTokensMatchHf) {
  EXPECT_EQ(tok_->n_vocab(), header_["n_vocab"].get<int32_t>());
  std::vector<int32_t> expected;
  for (const auto& range : header_["special_ids"]) {
    for (int32_t id = range[0].get<int32_t>(); id <= range[1].get<int32_t>(); ++id) {
      expected.push_back(id);
    }
  }
  std::vector<int32_t> ours;
  for (int32_t id = 0; id < tok_->n_vocab(); ++id) {
    if (tok_->is_special(id)) ours.push_back(id);
  }
  EXPECT_EQ(ours, expected);
  EXPECT_EQ(tok_->encode("", {.add_special = true}),
            header_["add_special_empty"].get<std::vector<int32_t>>());
}

TEST_P(TokenizerGolden, EndOfGenerationTokens) {
  const std::vector<int32_t> expected = std::string(GetParam().family) == "qwen2"
                                            ? std::vector<int32_t>{151645, 151643}  // im_end, eot
                                            : std::vector<int32_t>{1, 106};  // eos, end_of_turn
  EXPECT_EQ(tok_->end_of_generation_ids(), expected);
}

TEST_P(TokenizerGolden, EncodeMatchesHf) {
  size_t n_checked = 0;
  size_t n_wrong = 0;
  auto check = [&](size_t i, const char* what, const std::string& text, EncodeOptions options,
                   const Json& expected_json) {
    const auto expected = expected_json.get<std::vector<int32_t>>();
    const auto got = tok_->encode(text, options);
    ++n_checked;
    if (got != expected) {
      if (++n_wrong <= 15) {
        ADD_FAILURE() << "corpus[" << i << "] " << what << " \"" << show(text) << "\"\n  expected "
                      << show(expected) << "\n  got      " << show(got);
      }
    }
  };
  for (size_t i = 0; i < records_.size(); ++i) {
    const Json& rec = records_[i];
    const std::string text = corpus_text(corpus_[i]);
    check(i, "ids", text, {.add_special = false, .parse_special = false}, rec["ids"]);
    check(i, "ids_parse", text, {.add_special = false, .parse_special = true},
          rec.contains("ids_parse") ? rec["ids_parse"] : rec["ids"]);
    if (rec.contains("ids_add")) {
      check(i, "ids_add", text, {.add_special = true, .parse_special = false}, rec["ids_add"]);
      check(i, "ids_add_parse", text, {.add_special = true, .parse_special = true},
            rec["ids_add_parse"]);
    }
  }
  EXPECT_EQ(n_wrong, 0u) << "of " << n_checked << " encodings";
  EXPECT_GE(n_checked, 2 * corpus_.size());
}

TEST_P(TokenizerGolden, DecodeMatchesHf) {
  size_t n_checked = 0;
  size_t n_wrong = 0;
  auto check = [&](const std::string& where, const std::vector<int32_t>& ids, bool skip,
                   const std::string& expected) {
    ++n_checked;
    const std::string got = tok_->decode(ids, {.skip_special = skip});
    // Streaming must give the same text, token by token.
    tokenizer::IncrementalDetokenizer detok(*tok_, {.stop_strings = {}, .skip_special = skip});
    std::string streamed;
    for (int32_t id : ids) streamed += detok.push(id).text;
    streamed += detok.finish().text;
    if (got != expected || streamed != expected) {
      if (++n_wrong <= 15) {
        ADD_FAILURE() << where << (skip ? " (skip_special)" : "") << " ids " << show(ids)
                      << "\n  expected \"" << show(expected) << "\"\n  got      \"" << show(got)
                      << "\"\n  streamed \"" << show(streamed) << "\"";
      }
    }
  };
  for (size_t i = 0; i < records_.size(); ++i) {
    const Json& rec = records_[i];
    const auto ids = rec["ids"].get<std::vector<int32_t>>();
    // Invalid UTF-8 input decodes to its repair (what HF was given).
    const std::string text =
        rec.contains("text") ? rec["text"].get<std::string>() : utf8_lossy(corpus_text(corpus_[i]));
    check("corpus[" + std::to_string(i) + "]", ids, false, text);
    check("corpus[" + std::to_string(i) + "]", ids, true,
          rec.contains("text_skip") ? rec["text_skip"].get<std::string>() : text);
  }
  for (size_t i = 0; i < decode_cases_.size(); ++i) {
    const Json& c = decode_cases_[i];
    const auto ids = c["decode"].get<std::vector<int32_t>>();
    const std::string text = c["text"].get<std::string>();
    check("decode case " + std::to_string(i), ids, false, text);
    check("decode case " + std::to_string(i), ids, true,
          c.contains("text_skip") ? c["text_skip"].get<std::string>() : text);
  }
  EXPECT_EQ(n_wrong, 0u) << "of " << n_checked << " decodings";
}

INSTANTIATE_TEST_SUITE_P(
    Models, TokenizerGolden,
    ::testing::Values(Model{"qwen2", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"},
                      Model{"qwen2", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"},
                      Model{"gemma3", "gemma-3-270m-q4_k_m.gguf"}),
    [](const ::testing::TestParamInfo<Model>& param_info) {
      std::string name = param_info.param.file;
      for (char& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return name;
    });

}  // namespace
}  // namespace llms
