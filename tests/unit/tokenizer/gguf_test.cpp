// Tokenizer::from_gguf on small GGUF files written in memory: the keys it reads and the errors it
// gives for missing or bad metadata.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "tokenizer_test_util.h"
#include "util/error.h"

namespace llms::tokenizer {
namespace {

using testing::byte_char;

gguf::GgufWriter byte_level_writer() {
  gguf::GgufWriter w;
  w.set_string("general.architecture", "qwen2");
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "qwen2");
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(byte_char(static_cast<uint8_t>(b)));
    types.push_back(1);
  }
  tokens.push_back("hi");
  types.push_back(1);
  tokens.push_back("<|end|>");
  types.push_back(3);
  w.set_strings("tokenizer.ggml.tokens", tokens);
  w.set_i32s("tokenizer.ggml.token_type", types);
  const std::vector<std::string> merges = {"h i"};
  w.set_strings("tokenizer.ggml.merges", merges);
  w.set_u32("tokenizer.ggml.eos_token_id", 257);
  w.set_u32("tokenizer.ggml.bos_token_id", 257);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  return w;
}

Tokenizer load(const gguf::GgufWriter& w) {
  const auto bytes = w.to_bytes();
  const auto file = gguf::GgufFile::from_bytes(bytes);
  return Tokenizer::from_gguf(file);
}

std::string error_of(const gguf::GgufWriter& w) {
  try {
    load(w);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(TokenizerGguf, ReadsTheTokenizerKeys) {
  const Tokenizer tok = load(byte_level_writer());
  EXPECT_EQ(tok.kind(), ModelKind::kByteLevelBpe);
  EXPECT_EQ(tok.pre(), "qwen2");
  EXPECT_EQ(tok.n_vocab(), 258);
  EXPECT_EQ(tok.eos_id(), 257);
  EXPECT_TRUE(tok.add_bos());
  EXPECT_EQ(tok.encode("hi<|end|>", {.add_special = true, .parse_special = true}),
            (std::vector<int32_t>{257, 256, 257}));
  EXPECT_TRUE(tok.is_control(257));
  EXPECT_EQ(tok.end_of_generation_ids(), std::vector<int32_t>{257});
}

TEST(TokenizerGguf, SentencePieceFileWithoutMerges) {
  gguf::GgufWriter w;
  w.set_string("general.architecture", "gemma3");
  w.set_string("tokenizer.ggml.model", "llama");
  const std::vector<std::string> tokens = {"<pad>", "<eos>", "<bos>", "<unk>", "▁",
                                           "a",     "b",     "▁a",    "ab"};
  w.set_strings("tokenizer.ggml.tokens", tokens);
  const std::vector<float> scores(tokens.size(), 0.0f);
  w.set_f32s("tokenizer.ggml.scores", scores);
  const std::vector<int32_t> types = {3, 3, 3, 3, 1, 1, 1, 1, 1};
  w.set_i32s("tokenizer.ggml.token_type", types);
  w.set_u32("tokenizer.ggml.bos_token_id", 2);
  w.set_u32("tokenizer.ggml.eos_token_id", 1);
  const Tokenizer tok = load(w);
  EXPECT_EQ(tok.kind(), ModelKind::kSentencePieceBpe);
  // "▁a" (id 7) ranks before "ab" (id 8) by position: " ab" -> ▁a, b.
  EXPECT_EQ(tok.encode(" ab"), (std::vector<int32_t>{2, 7, 6}));
  EXPECT_EQ(tok.decode(tok.encode(" ab"), {.skip_special = true}), " ab");
}

TEST(TokenizerGguf, MissingOrBadMetadataIsNamed) {
  auto w = byte_level_writer();
  w.erase("tokenizer.ggml.model");
  EXPECT_NE(error_of(w).find("tokenizer.ggml.model is missing"), std::string::npos);

  w = byte_level_writer();
  w.set_string("tokenizer.ggml.model", "bert");
  EXPECT_NE(error_of(w).find("\"bert\" is not supported"), std::string::npos);

  w = byte_level_writer();
  w.erase("tokenizer.ggml.tokens");
  EXPECT_NE(error_of(w).find("tokenizer.ggml.tokens is missing"), std::string::npos);

  w = byte_level_writer();
  w.erase("tokenizer.ggml.merges");
  EXPECT_NE(error_of(w).find("tokenizer.ggml.merges"), std::string::npos);

  w = byte_level_writer();
  w.set_u32("tokenizer.ggml.eos_token_id", 9999);
  EXPECT_NE(error_of(w).find("tokenizer.ggml.eos_token_id"), std::string::npos);

  w = byte_level_writer();
  const std::vector<std::string> bad = {"h zz"};
  w.set_strings("tokenizer.ggml.merges", bad);
  EXPECT_NE(error_of(w).find("tokenizer.ggml.merges[0]"), std::string::npos);

  w = byte_level_writer();
  w.set_string("tokenizer.ggml.tokens", "not an array");
  EXPECT_NE(error_of(w).find("tokenizer.ggml.tokens"), std::string::npos);
}

}  // namespace
}  // namespace llms::tokenizer
