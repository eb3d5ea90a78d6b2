// Character sets and their UTF-8 byte-range encoding, checked exhaustively over every code point.
#include "../../../src/structured/code_point_set.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace llms::structured {
namespace {

bool sequences_match(const std::vector<ByteSequence>& seqs, const std::string& bytes) {
  for (const ByteSequence& seq : seqs) {
    if (static_cast<size_t>(seq.length) != bytes.size()) continue;
    bool ok = true;
    for (int i = 0; i < seq.length && ok; ++i) {
      const auto b = static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
      ok = b >= seq.ranges[static_cast<size_t>(i)].lo && b <= seq.ranges[static_cast<size_t>(i)].hi;
    }
    if (ok) return true;
  }
  return false;
}

TEST(CodePointSet, NormalizesMergesAndDropsSurrogates) {
  CodePointSet set;
  set.add('c', 'f');
  set.add('a', 'c');
  set.add('g', 'h');
  set.add(0xD000, 0xE000);
  ASSERT_EQ(set.ranges().size(), 3u);
  EXPECT_EQ(set.ranges()[0].lo, uint32_t{'a'});
  EXPECT_EQ(set.ranges()[0].hi, uint32_t{'h'});
  EXPECT_FALSE(set.contains(0xD800));
  EXPECT_TRUE(set.contains(0xD7FF));
  EXPECT_TRUE(set.contains(0xE000));
  const CodePointSet neg = set.negated();
  EXPECT_FALSE(neg.contains('b'));
  EXPECT_TRUE(neg.contains('z'));
  EXPECT_FALSE(neg.contains(0xDC00));
  EXPECT_TRUE(neg.contains(kMaxCodePoint));
}

// Random ranges and sets added in every order (in order, overlapping, adjacent, across the
// surrogates and the top) against a membership table: the ranges stay sorted, disjoint, not
// adjacent and free of surrogates, and hold exactly the members.
TEST(CodePointSet, AddsInAnyOrderMatchAMembershipTable) {
  std::mt19937 rng(29);
  // Small code points, the surrogates' edges and the top, so ranges meet often.
  const std::vector<uint32_t> anchors = {0,      0x20,   0x7F,   0x800,  0xD7F0,
                                         0xD800, 0xDFFF, 0xE005, 0xFFFF, kMaxCodePoint - 12};
  std::uniform_int_distribution<size_t> anchor(0, anchors.size() - 1);
  std::uniform_int_distribution<uint32_t> offset(0, 24);
  auto pick = [&] { return std::min(kMaxCodePoint, anchors[anchor(rng)] + offset(rng)); };
  for (int trial = 0; trial < 400; ++trial) {
    CodePointSet set;
    std::vector<std::pair<uint32_t, uint32_t>> added;
    const int n = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < n; ++i) {
      uint32_t lo = pick();
      uint32_t hi = rng() % 3 == 0 ? lo : pick();
      if (lo > hi) std::swap(lo, hi);
      if (rng() % 2 == 0) {
        set.add(lo, hi);
      } else {
        CodePointSet other = CodePointSet::range(lo, hi);
        other.add(hi / 2, hi / 2);  // a second range, before or inside the first
        added.emplace_back(hi / 2, hi / 2);
        set.add(other);
      }
      added.emplace_back(lo, hi);
    }
    const auto& ranges = set.ranges();
    for (size_t i = 0; i < ranges.size(); ++i) {
      ASSERT_LE(ranges[i].lo, ranges[i].hi);
      ASSERT_TRUE(ranges[i].hi < 0xD800 || ranges[i].lo > 0xDFFF) << trial;
      if (i > 0) {
        ASSERT_GT(ranges[i].lo, ranges[i - 1].hi + 1) << trial;
      }
    }
    auto member = [&](uint32_t cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) return false;
      for (const auto& [lo, hi] : added) {
        if (cp >= lo && cp <= hi) return true;
      }
      return false;
    };
    for (uint32_t a : anchors) {
      for (uint32_t cp = a > 2 ? a - 2 : 0; cp <= std::min(kMaxCodePoint, a + 30); ++cp) {
        ASSERT_EQ(set.contains(cp), member(cp)) << "trial " << trial << " code point " << cp;
      }
    }
  }
}

// For several sets, every scalar value's encoding matches the sequences iff it is a member, and
// no sequence matches a byte string that is not an encoding of a member (checked on all 1- and
// 2-byte strings and on the neighbours of every range edge).
TEST(CodePointSet, Utf8SequencesAreExactForEveryCodePoint) {
  std::vector<CodePointSet> sets;
  sets.push_back(CodePointSet::all());
  sets.push_back(CodePointSet::range(0x20, 0x10FFFF));
  CodePointSet mixed = CodePointSet::range('0', '9');
  mixed.add(0x7F, 0x81);
  mixed.add(0x7FF, 0x801);
  mixed.add(0xFFFF, 0x10001);
  mixed.add(0x3040, 0x30FF);
  mixed.add(0x10FFF0, 0x10FFFF);
  sets.push_back(mixed);
  sets.push_back(mixed.negated());
  for (const CodePointSet& set : sets) {
    const auto seqs = utf8_sequences(set);
    for (uint32_t cp = 0; cp <= kMaxCodePoint; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      std::string bytes;
      append_utf8(bytes, cp);
      ASSERT_EQ(sequences_match(seqs, bytes), set.contains(cp)) << std::hex << cp;
    }
    for (int a = 0; a < 256; ++a) {
      const std::string one(1, static_cast<char>(a));
      uint32_t cp = 0;
      const bool valid = decode_utf8(one, 0, cp) == 1;
      EXPECT_EQ(sequences_match(seqs, one), valid && set.contains(cp)) << a;
      for (int b = 0; b < 256; ++b) {
        const std::string two{static_cast<char>(a), static_cast<char>(b)};
        const bool valid2 = decode_utf8(two, 0, cp) == 2;
        ASSERT_EQ(sequences_match(seqs, two), valid2 && set.contains(cp)) << a << " " << b;
      }
    }
  }
}

TEST(CodePointSet, DecodeRejectsOverlongSurrogatesAndTruncation) {
  uint32_t cp = 0;
  EXPECT_EQ(decode_utf8(std::string("\xC0\x80"), 0, cp), 0);          // overlong NUL
  EXPECT_EQ(decode_utf8(std::string("\xED\xA0\x80"), 0, cp), 0);      // U+D800
  EXPECT_EQ(decode_utf8(std::string("\xE2\x82"), 0, cp), 0);          // truncated
  EXPECT_EQ(decode_utf8(std::string("\xF4\x90\x80\x80"), 0, cp), 0);  // beyond U+10FFFF
  EXPECT_EQ(decode_utf8(std::string("\xE2\x82\xAC"), 0, cp), 3);
  EXPECT_EQ(cp, 0x20ACu);
}

}  // namespace
}  // namespace llms::structured
