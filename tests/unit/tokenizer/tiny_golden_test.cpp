// Tiny vocabularies checked against Hugging Face: tests/data/tokenizer/tiny.json was made by
// tools/make_tokenizer_golden.py --tiny, which hands the same token lists to transformers' GGUF
// conversion (convert_gguf_tokenizer) and records what `tokenizers` does with them. They cover
// what the real models rarely hit: duplicate merges (the later wins), bytes without a token
// (dropped in byte-level BPE), byte tokens missing in SentencePiece (<unk>, fused, and ordered
// after the byte tokens of later characters, as tokenizers does), respelled space tokens,
// control tokens that are not in the byte alphabet, Llama's prefix U+2581 and Phi-3's.
#include <gtest/gtest.h>

#include "tokenizer_test_util.h"

namespace llms::tokenizer {
namespace {

using testing::data_dir;
using testing::read_json;
using testing::spec_from_tiny_json;
using testing::streamed;

class TinyGolden : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const auto all = read_json(data_dir() / "tiny.json");
    for (const auto& v : all["vocabularies"]) {
      if (v["spec"]["name"] == GetParam()) vocab_ = v;
    }
    ASSERT_FALSE(vocab_.is_null()) << "no vocabulary " << GetParam();
  }
  nlohmann::json vocab_;
};

TEST_P(TinyGolden, MatchesHf) {
  const Tokenizer tok = Tokenizer::from_spec(spec_from_tiny_json(vocab_["spec"]));

  std::vector<int32_t> special;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    if (tok.is_special(id)) special.push_back(id);
  }
  // Outside a from_pretrained load, LlamaTokenizer appends its default <s> and </s> when the
  // vocabulary lacks them (ids past the end); a GGUF names its own, so only ids inside count.
  std::vector<int32_t> expected_special;
  for (int32_t id : vocab_["special_ids"].get<std::vector<int32_t>>()) {
    if (id < tok.n_vocab()) expected_special.push_back(id);
  }
  EXPECT_EQ(special, expected_special);

  size_t n_cases = 0;
  for (const auto& c : vocab_["encode"]) {
    const std::string text = c["text"].get<std::string>();
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    const auto ids_parse =
        c.contains("ids_parse") ? c["ids_parse"].get<std::vector<int32_t>>() : ids;
    EXPECT_EQ(tok.encode(text, {.add_special = false, .parse_special = false}), ids)
        << "text \"" << text << "\"";
    EXPECT_EQ(tok.encode(text, {.add_special = false, .parse_special = true}), ids_parse)
        << "text \"" << text << "\" (parse_special)";
    const std::string decoded = c["decoded"].get<std::string>();
    const std::string decoded_skip = c.value("decoded_skip", decoded);
    EXPECT_EQ(tok.decode(ids), decoded) << "text \"" << text << "\"";
    EXPECT_EQ(tok.decode(ids, {.skip_special = true}), decoded_skip) << "text \"" << text << "\"";
    EXPECT_EQ(streamed(tok, ids, false), decoded) << "text \"" << text << "\"";
    ++n_cases;
  }
  for (const auto& c : vocab_["decode"]) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    const std::string decoded = c["decoded"].get<std::string>();
    EXPECT_EQ(tok.decode(ids), decoded);
    EXPECT_EQ(tok.decode(ids, {.skip_special = true}), c.value("decoded_skip", decoded));
    EXPECT_EQ(streamed(tok, ids, false), decoded);
    ++n_cases;
  }
  EXPECT_GT(n_cases, 50u);
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, TinyGolden,
                         ::testing::Values("byte_level_qwen2", "byte_level_llama3",
                                           "byte_level_gpt2", "byte_level_holes", "spm_gemma",
                                           "spm_gemma_holes", "spm_llama", "spm_phi3"));

}  // namespace
}  // namespace llms::tokenizer
