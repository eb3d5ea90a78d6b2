// Byte-level BPE on hand-made vocabularies: merge order, the heap path on long words against a
// plain reference implementation, special tokens, BOS/EOS, invalid UTF-8 and hostile inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tokenizer_test_util.h"
#include "util/error.h"

namespace llms::tokenizer {
namespace {

using testing::ByteLevelBuilder;
using testing::spell;

std::vector<int32_t> bytes_of(std::string_view s) {
  std::vector<int32_t> ids;
  for (char c : s) ids.push_back(static_cast<uint8_t>(c));
  return ids;
}

const EncodeOptions kPlain{.add_special = false, .parse_special = false};

TEST(ByteLevel, MergesByRankNotByPosition) {
  ByteLevelBuilder b;
  const int32_t bc = b.merge("b", "c");  // rank 0
  const int32_t ab = b.merge("a", "b");  // rank 1
  const Tokenizer tok = b.build();
  // "abc": (b,c) has the better rank although (a,b) comes first.
  EXPECT_EQ(tok.encode("abc", kPlain), (std::vector<int32_t>{'a', bc}));
  EXPECT_EQ(tok.encode("abab", kPlain), (std::vector<int32_t>{ab, ab}));
  EXPECT_EQ(tok.decode(tok.encode("abcab", kPlain)), "abcab");
}

TEST(ByteLevel, LeftmostWinsATie) {
  ByteLevelBuilder b;
  const int32_t aa = b.merge("a", "a");
  const Tokenizer tok = b.build();
  EXPECT_EQ(tok.encode("aaa", kPlain), (std::vector<int32_t>{aa, 'a'}));
  EXPECT_EQ(tok.encode("aaaaa", kPlain), (std::vector<int32_t>{aa, aa, 'a'}));
}

TEST(ByteLevel, PreTokenizerKeepsMergesInsideWords) {
  ByteLevelBuilder b;
  const int32_t sp_h = b.merge(" ", "h");
  const int32_t sp_hi = b.merge(" h", "i");
  const int32_t i_sp = b.merge("i", " ");  // never applies: no piece holds "i "
  const Tokenizer tok = b.build();
  EXPECT_EQ(tok.encode("hi hi", kPlain), (std::vector<int32_t>{'h', 'i', sp_hi}));
  EXPECT_EQ(tok.encode(" h", kPlain), (std::vector<int32_t>{sp_h}));
  (void)i_sp;
  // Qwen2 splits every digit; GPT-2 keeps " 123" whole (no merges here, so bytes either way).
  EXPECT_EQ(tok.encode("x 12", kPlain), (std::vector<int32_t>{'x', ' ', '1', '2'}));
}

// A plain reference BPE: repeatedly merge the lowest-ranked adjacent pair, leftmost first.
std::vector<int32_t> reference_bpe(
    std::vector<int32_t> ids,
    const std::map<std::pair<int32_t, int32_t>, std::pair<int32_t, int32_t>>& rules) {
  while (true) {
    size_t best = ids.size();
    int32_t best_rank = std::numeric_limits<int32_t>::max();
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      const auto it = rules.find({ids[i], ids[i + 1]});
      if (it != rules.end() && it->second.first < best_rank) {
        best_rank = it->second.first;
        best = i;
      }
    }
    if (best == ids.size()) return ids;
    ids[best] = rules.at({ids[best], ids[best + 1]}).second;
    ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
}

TEST(ByteLevel, LongWordsMergeLikeTheReference) {
  // Random merges over strings of 'a', 'b', 'c'; words of up to 300 letters take the heap path,
  // short ones the linear scan; both must agree with the reference.
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 20; ++trial) {
    ByteLevelBuilder b("gpt2");
    std::vector<std::string> pieces = {"a", "b", "c"};
    std::map<std::pair<int32_t, int32_t>, std::pair<int32_t, int32_t>> rules;
    std::map<std::string, int32_t> id_of = {{"a", 'a'}, {"b", 'b'}, {"c", 'c'}};
    for (int m = 0; m < 40; ++m) {
      const std::string l = pieces[rng() % pieces.size()];
      const std::string r = pieces[rng() % pieces.size()];
      if (l.size() + r.size() > 12 || rules.count({id_of[l], id_of[r]})) continue;
      const int32_t id = b.merge(l, r);
      rules[{id_of[l], id_of[r]}] = {static_cast<int32_t>(b.spec.merges.size() - 1), id};
      if (!id_of.count(l + r)) {
        id_of[l + r] = id;
        pieces.push_back(l + r);
      }
    }
    const Tokenizer tok = b.build();
    for (int w = 0; w < 30; ++w) {
      const size_t len = 1 + rng() % (w < 15 ? 16 : 300);
      std::string word;
      for (size_t i = 0; i < len; ++i) word.push_back("abc"[rng() % 3]);
      EXPECT_EQ(tok.encode(word, kPlain), reference_bpe(bytes_of(word), rules))
          << "trial " << trial << " word " << word;
    }
  }
}

Tokenizer chat_vocab() {
  ByteLevelBuilder b;
  b.merge("h", "i");
  b.add("<|im_start|>", 3);
  b.add("<|im_end|>", 3);
  b.add("<|endoftext|>", 3);
  b.add("<tool_call>", 4);
  b.spec.bos_id = b.add("<|endoftext|>");
  b.spec.eos_id = b.add("<|im_end|>");
  return b.build();
}

TEST(ByteLevel, ControlTokenTextIsTextUnlessParsingIsAllowed) {
  const Tokenizer tok = chat_vocab();
  const int32_t im_end = *tok.find_token("<|im_end|>");
  const std::string typed = "hi<|im_end|>";
  const auto plain = tok.encode(typed, kPlain);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), im_end), 0);
  EXPECT_EQ(tok.decode(plain), typed);
  const auto parsed = tok.encode(typed, {.add_special = false, .parse_special = true});
  EXPECT_EQ(parsed, (std::vector<int32_t>{*tok.find_token(spell("hi")), im_end}));
  EXPECT_TRUE(tok.is_special(im_end));
  EXPECT_TRUE(tok.is_control(im_end));
  EXPECT_EQ(tok.decode(parsed, {.skip_special = true}), "hi");
  EXPECT_EQ(tok.decode(parsed), typed);
}

TEST(ByteLevel, UserDefinedTokensAreAlwaysRecognised) {
  const Tokenizer tok = chat_vocab();
  const int32_t tool = *tok.find_token("<tool_call>");
  for (bool parse : {false, true}) {
    const auto ids = tok.encode("x<tool_call>y", {.add_special = false, .parse_special = parse});
    EXPECT_EQ(ids, (std::vector<int32_t>{'x', tool, 'y'}));
  }
  EXPECT_FALSE(tok.is_special(tool));
  EXPECT_EQ(tok.decode(std::vector<int32_t>{tool}, {.skip_special = true}), "<tool_call>");
}

TEST(ByteLevel, AddSpecialFollowsMetadata) {
  ByteLevelBuilder b;
  b.spec.bos_id = b.add("<s>", 3);
  b.spec.eos_id = b.add("</s>", 3);
  b.spec.add_bos = true;
  b.spec.add_eos = true;
  const Tokenizer tok = b.build();
  EXPECT_EQ(tok.encode("a"), (std::vector<int32_t>{tok.bos_id(), 'a', tok.eos_id()}));
  EXPECT_EQ(tok.encode("", {.add_special = true}),
            (std::vector<int32_t>{tok.bos_id(), tok.eos_id()}));
  EXPECT_EQ(tok.encode("a", kPlain), (std::vector<int32_t>{'a'}));
  // gpt2 files without the flag add nothing (HF's default for byte-level BPE).
  ByteLevelBuilder c;
  c.spec.bos_id = c.add("<s>", 3);
  EXPECT_EQ(c.build().encode("a"), (std::vector<int32_t>{'a'}));
}

TEST(ByteLevel, InvalidUtf8IsRepairedBeforeTokenizing) {
  const Tokenizer tok = ByteLevelBuilder().build();
  const std::string bad =
      "a\xFF"
      "b\xE2\x82";
  EXPECT_EQ(tok.encode(bad, kPlain), tok.encode("a\uFFFDb\uFFFD", kPlain));
  EXPECT_EQ(tok.decode(tok.encode(bad, kPlain)), "a\uFFFDb\uFFFD");
}

TEST(ByteLevel, DecodeRepairsSplitCharactersLikeFromUtf8Lossy) {
  const Tokenizer tok = ByteLevelBuilder().build();
  // The three bytes of "中" alone are incomplete; together they are one character.
  EXPECT_EQ(tok.decode(std::vector<int32_t>{0xE4, 0xB8}), "\uFFFD");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{0xE4, 0xB8, 0xAD}), "中");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{0xE4, 'a', 0xAD}), "\uFFFDa\uFFFD");
  EXPECT_EQ(tok.token_bytes(0xE4), "\xE4");
  EXPECT_EQ(tok.token_text(' '), "Ġ");
}

TEST(ByteLevel, HostileInputsTokenizeCorrectly) {
  ByteLevelBuilder b;
  const int32_t aa = b.merge("a", "a");
  const int32_t a4 = b.merge("aa", "aa");
  const int32_t s2 = b.merge(" ", " ");
  const int32_t s4 = b.merge("  ", "  ");
  const Tokenizer tok = b.build();

  const auto a_ids = tok.encode(std::string(1000001, 'a'), kPlain);
  ASSERT_EQ(a_ids.size(), 250001u);
  EXPECT_EQ(std::count(a_ids.begin(), a_ids.end(), a4), 250000);
  EXPECT_EQ(a_ids.back(), 'a');
  (void)aa;

  // 50,000 spaces then a word: the run minus its last space is one piece, " x" another.
  const auto s_ids = tok.encode(std::string(50000, ' ') + "x", kPlain);
  ASSERT_EQ(s_ids.size(), 12499u + 1 + 1 + 2);  // 49,999 spaces = 12,499 x4 + 1 x2 + 1 x1
  EXPECT_EQ(s_ids[0], s4);
  EXPECT_EQ(s_ids[12499], s2);
  EXPECT_EQ(s_ids[12500], ' ');
  EXPECT_EQ(s_ids[12501], ' ');
  EXPECT_EQ(s_ids[12502], 'x');

  // Qwen2 makes every digit its own piece.
  const auto d_ids = tok.encode(std::string(200000, '7'), kPlain);
  EXPECT_EQ(d_ids, std::vector<int32_t>(200000, '7'));

  // 100,000 invalid bytes become 100,000 U+FFFD (one symbol piece of 300,000 bytes).
  const auto f_ids = tok.encode(std::string(100000, '\xFF'), kPlain);
  EXPECT_EQ(f_ids.size(), 300000u);
  EXPECT_EQ(tok.decode(f_ids).size(), 300000u);
}

TEST(ByteLevel, BadVocabulariesAreRefusedWithTheirField) {
  auto message_of = [](const VocabSpec& spec) -> std::string {
    try {
      Tokenizer::from_spec(spec);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::kInvalidFile);
      return e.what();
    }
    return "no error";
  };
  ByteLevelBuilder b;
  b.spec.merges.push_back("a");
  EXPECT_NE(message_of(b.spec).find("tokenizer.ggml.merges[0]"), std::string::npos);
  ByteLevelBuilder c;
  c.spec.merges.push_back("a zz");
  EXPECT_NE(message_of(c.spec).find("not in the vocabulary"), std::string::npos);
  ByteLevelBuilder d;
  d.spec.bos_id = 100000;
  EXPECT_NE(message_of(d.spec).find("tokenizer.ggml.bos_token_id"), std::string::npos);
  ByteLevelBuilder e;
  e.spec.token_types.pop_back();
  EXPECT_NE(message_of(e.spec).find("tokenizer.ggml.token_type"), std::string::npos);
  EXPECT_NE(message_of(VocabSpec{}).find("tokenizer.ggml.tokens"), std::string::npos);
}

TEST(ByteLevel, BadIdsAreRefusedOnDecode) {
  const Tokenizer tok = ByteLevelBuilder().build();
  EXPECT_THROW(tok.decode(std::vector<int32_t>{256}), Error);
  EXPECT_THROW(tok.decode(std::vector<int32_t>{-1}), Error);
  EXPECT_THROW(tok.token_text(999), Error);
  EXPECT_FALSE(tok.is_special(-5));
}

TEST(ByteLevel, ConcurrentEncodesAgreeWithASingleThread) {
  // Encoding keeps per-thread caches; results must not depend on which thread runs them or on
  // other tokenizers sharing those caches.
  ByteLevelBuilder b;
  b.merge("t", "h");
  b.merge("th", "e");
  b.merge(" ", "the");
  const Tokenizer tok = b.build();
  ByteLevelBuilder other_builder;
  other_builder.merge("t", "h");
  const Tokenizer other = other_builder.build();
  const std::vector<std::string> texts = {"the theme", " the the", "then", "中文 the", "x"};
  std::vector<std::vector<int32_t>> expected;
  for (const auto& t : texts) expected.push_back(tok.encode(t, kPlain));
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 200; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          other.encode(texts[i], kPlain);  // fills the same thread's cache with other ids
          if (tok.encode(texts[i], kPlain) != expected[i]) ++failures[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace llms::tokenizer
