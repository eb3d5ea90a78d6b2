#include "tokenizer/byte_alphabet.h"

#include <gtest/gtest.h>

#include <set>

#include "tokenizer_test_util.h"

namespace llms::tokenizer {
namespace {

TEST(ByteAlphabet, MatchesAnIndependentlyWrittenTable) {
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const auto byte = static_cast<uint8_t>(b);
    EXPECT_EQ(byte_level_utf8(byte), testing::byte_char(byte)) << "byte " << b;
    seen.insert(byte_level_char(byte));
  }
  EXPECT_EQ(seen.size(), 256u);  // one character per byte
}

TEST(ByteAlphabet, KnownCharacters) {
  EXPECT_EQ(byte_level_char('A'), U'A');
  EXPECT_EQ(byte_level_char(' '), U'\u0120');   // 'Ġ'
  EXPECT_EQ(byte_level_char('\n'), U'\u010A');  // 'Ċ'
  EXPECT_EQ(byte_level_char(0x00), U'\u0100');
  EXPECT_EQ(byte_level_char(0xAD), U'\u0143');  // the last shifted byte
  EXPECT_EQ(byte_level_utf8(' '), "\xC4\xA0");
}

}  // namespace
}  // namespace llms::tokenizer
