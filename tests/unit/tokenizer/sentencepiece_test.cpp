// SentencePiece-style BPE on the tiny vocabularies of tiny.json: cases HF's conversion does not
// cover (add_space_prefix=false honoured), BOS defaults, ByteFallback decoding, and a property
// test showing that cutting long segments into chunks never changes the result.
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "tokenizer_test_util.h"

namespace llms::tokenizer {
namespace {

using testing::data_dir;
using testing::read_json;
using testing::spec_from_tiny_json;

VocabSpec tiny_spec(const std::string& name) {
  const auto all = read_json(data_dir() / "tiny.json");
  for (const auto& v : all["vocabularies"]) {
    if (v["spec"]["name"] == name) return spec_from_tiny_json(v["spec"]);
  }
  ADD_FAILURE() << "no vocabulary " << name;
  return {};
}

int32_t id_of(const Tokenizer& tok, std::string_view text) {
  const auto id = tok.find_token(text);
  EXPECT_TRUE(id.has_value()) << text;
  return id.value_or(-1);
}

int32_t byte_token(const Tokenizer& tok, int b) {
  char name[8];
  std::snprintf(name, sizeof name, "<0x%02X>", b);
  return id_of(tok, name);
}

const EncodeOptions kPlain{.add_special = false, .parse_special = false};

TEST(SentencePiece, GemmaAddsBosByDefaultAndNoPrefix) {
  const Tokenizer tok = Tokenizer::from_spec(tiny_spec("spm_gemma"));
  EXPECT_TRUE(tok.add_bos());
  EXPECT_EQ(tok.encode("hello"), (std::vector<int32_t>{2, id_of(tok, "hello")}));
  // "▁w" outranks "wor", so "▁world" is never reached (HF agrees: tiny.json).
  EXPECT_EQ(tok.encode("hello world", kPlain),
            (std::vector<int32_t>{id_of(tok, "hello"), id_of(tok, "▁w"), id_of(tok, "or"),
                                  id_of(tok, "ld")}));
  EXPECT_EQ(tok.decode(tok.encode(" hello")), "<bos> hello");
  EXPECT_EQ(tok.decode(tok.encode(" hello"), {.skip_special = true}), " hello");
}

TEST(SentencePiece, LlamaPrefixFollowsAddSpacePrefix) {
  VocabSpec spec = tiny_spec("spm_llama");
  const Tokenizer with_prefix = Tokenizer::from_spec(spec);
  EXPECT_EQ(with_prefix.encode("hello world", kPlain)[0], id_of(with_prefix, "▁hello"));
  EXPECT_EQ(with_prefix.decode(with_prefix.encode("hello world", kPlain)), "hello world");

  // An explicit false (HF's GGUF conversion ignores the flag; llama.cpp and we honour it).
  spec.add_space_prefix = false;
  const Tokenizer without = Tokenizer::from_spec(spec);
  const auto ids = without.encode("hello world", kPlain);
  EXPECT_EQ(ids[0], id_of(without, "hello"));
  EXPECT_EQ(ids.size(), 4u);
  EXPECT_EQ(without.decode(ids), "hello world");
  EXPECT_EQ(without.decode(std::vector<int32_t>{id_of(without, "▁hello")}), " hello");
}

TEST(SentencePiece, ByteFallbackRunsDecodeWholeOrAsReplacementPerByte) {
  const Tokenizer tok = Tokenizer::from_spec(tiny_spec("spm_gemma"));
  const int32_t a = id_of(tok, "a");
  const std::vector<int32_t> zhong = {byte_token(tok, 0xE4), byte_token(tok, 0xB8),
                                      byte_token(tok, 0xAD)};
  EXPECT_EQ(tok.decode(zhong), "中");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{zhong[0], zhong[1]}), "\uFFFD\uFFFD");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{zhong[0], a, zhong[2]}), "\uFFFDa\uFFFD");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{zhong[0], zhong[1], zhong[2], zhong[0]}),
            "\uFFFD\uFFFD\uFFFD\uFFFD");
  // 文 has no token: it is spelled in bytes, and decodes back.
  const auto wen = tok.encode("文", kPlain);
  EXPECT_EQ(wen, (std::vector<int32_t>{byte_token(tok, 0xE6), byte_token(tok, 0x96),
                                       byte_token(tok, 0x87)}));
  EXPECT_EQ(tok.decode(wen), "文");
  EXPECT_EQ(tok.token_bytes(byte_token(tok, 0xE6)), "\xE6");
  EXPECT_EQ(tok.token_text(byte_token(tok, 0xE6)), "<0xE6>");
}

TEST(SentencePiece, RespelledSpaceTokensKeepTheirFileText) {
  const Tokenizer tok = Tokenizer::from_spec(tiny_spec("spm_gemma"));
  const auto ids = tok.encode("  ", kPlain);
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(tok.token_text(ids[0]), "  ");  // as in the file
  EXPECT_EQ(tok.token_bytes(ids[0]), "  ");
  EXPECT_EQ(tok.decode(ids), "  ");
}

// The merges transformers derives for Gemma (generate_merges with positions), written plainly.
std::map<std::pair<int32_t, int32_t>, std::pair<int64_t, int32_t>> gemma_rules(
    const std::vector<std::string>& tokens) {
  std::map<std::string, int32_t> vocab;
  for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = static_cast<int32_t>(i);
  std::map<std::pair<int32_t, int32_t>, std::pair<int64_t, int32_t>> rules;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    std::vector<size_t> cuts;
    for (size_t b = 1; b < t.size(); ++b) {
      if ((static_cast<uint8_t>(t[b]) & 0xC0) != 0x80) cuts.push_back(b);
    }
    for (size_t k = 0; k < cuts.size(); ++k) {
      const auto l = vocab.find(t.substr(0, cuts[k]));
      const auto r = vocab.find(t.substr(cuts[k]));
      if (l == vocab.end() || r == vocab.end()) continue;
      // Rank: by token position, then longer left part first.
      const int64_t rank = static_cast<int64_t>(i) * 1000 + static_cast<int64_t>(cuts.size() - k);
      rules[{l->second, r->second}] = {rank, static_cast<int32_t>(i)};
    }
  }
  return rules;
}

TEST(SentencePiece, ChunkedSegmentsMergeLikeOneWord) {
  const VocabSpec spec = tiny_spec("spm_gemma");
  // Respell as transformers does (only the "  " token here).
  std::vector<std::string> tokens = spec.tokens;
  for (auto& t : tokens) {
    if (t == "  ") t = "▁▁";
  }
  const auto rules = gemma_rules(tokens);
  std::map<std::string, int32_t> vocab;
  for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = static_cast<int32_t>(i);
  const Tokenizer tok = Tokenizer::from_spec(spec);

  std::mt19937 rng(99);
  const std::vector<std::string> alphabet = {"a", "b", "c", "d", "o", "l", "h",
                                             "e", "w", "r", " ", "<", ">", "x"};
  for (int trial = 0; trial < 300; ++trial) {
    std::string text;
    std::vector<int32_t> ids;
    const size_t len = 1 + rng() % 120;
    for (size_t i = 0; i < len; ++i) {
      const std::string& c = alphabet[rng() % alphabet.size()];
      text += c;
      ids.push_back(vocab.at(c == " " ? "▁" : c));
    }
    // Reference: one word, lowest rank first, leftmost on ties.
    while (true) {
      size_t best = ids.size();
      int64_t best_rank = std::numeric_limits<int64_t>::max();
      for (size_t i = 0; i + 1 < ids.size(); ++i) {
        const auto it = rules.find({ids[i], ids[i + 1]});
        if (it != rules.end() && it->second.first < best_rank) {
          best_rank = it->second.first;
          best = i;
        }
      }
      if (best == ids.size()) break;
      ids[best] = rules.at({ids[best], ids[best + 1]}).second;
      ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    }
    EXPECT_EQ(tok.encode(text, kPlain), ids) << "\"" << text << "\"";
  }
}

}  // namespace
}  // namespace llms::tokenizer
