// UTF-8 decoding and repair. Expected repairs are Python's bytes.decode("utf-8", "replace")
// (CPython 3.11), which substitutes maximal subparts exactly as Rust's from_utf8_lossy does.
#include "util/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace llms {
namespace {

std::string from_hex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

struct LossyCase {
  const char* input_hex;
  const char* python_hex;
};

TEST(Utf8, LossyRepairMatchesPython) {
  const LossyCase cases[] = {
      {"ff", "efbfbd"},
      {"c3", "efbfbd"},
      {"c328", "efbfbd28"},
      {"e282", "efbfbd"},
      {"e28241", "efbfbd41"},
      {"e2828241", "e2828241"},
      {"f09f98", "efbfbd"},
      {"f09f9880", "f09f9880"},
      {"eda080", "efbfbdefbfbdefbfbd"},          // a surrogate: three subparts
      {"c0af", "efbfbdefbfbd"},                  // overlong
      {"e08080", "efbfbdefbfbdefbfbd"},          // overlong
      {"f08f8080", "efbfbdefbfbdefbfbdefbfbd"},  // overlong
      {"f4908080", "efbfbdefbfbdefbfbdefbfbd"},  // above U+10FFFF
      {"f5", "efbfbd"},
      {"80", "efbfbd"},
      {"bfbf", "efbfbdefbfbd"},
      {"61ff62", "61efbfbd62"},
      {"e2ff82", "efbfbdefbfbdefbfbd"},
      {"f0909041", "efbfbd41"},
      {"efbb", "efbfbd"},
      {"f48fbf", "efbfbd"},
      {"f48fbfbf", "f48fbfbf"},
      {"f490", "efbfbdefbfbd"},
  };
  for (const auto& c : cases) {
    const std::string in = from_hex(c.input_hex);
    EXPECT_EQ(utf8_lossy(in), from_hex(c.python_hex)) << c.input_hex;
    EXPECT_EQ(is_valid_utf8(in), std::string(c.input_hex) == c.python_hex) << c.input_hex;
  }
}

TEST(Utf8, ValidTextIsUnchanged) {
  const std::string text = "plain ASCII, café, 中文, 😀, \x7f and NUL \0 too";
  EXPECT_TRUE(is_valid_utf8(text));
  EXPECT_EQ(utf8_lossy(text), text);
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_EQ(utf8_length("a中😀"), 3u);
}

TEST(Utf8, StepReportsKindAndLength) {
  EXPECT_EQ(utf8_step("A", 0).kind, Utf8Step::Kind::kValid);
  const Utf8Step euro = utf8_step("\xE2\x82\xAC", 0);
  EXPECT_EQ(euro.kind, Utf8Step::Kind::kValid);
  EXPECT_EQ(euro.length, 3u);
  EXPECT_EQ(euro.code_point, U'€');
  const Utf8Step cut = utf8_step("\xF0\x9F\x98", 0);
  EXPECT_EQ(cut.kind, Utf8Step::Kind::kIncomplete);
  EXPECT_EQ(cut.length, 3u);
  const Utf8Step bad = utf8_step("\xE2\x82X", 0);
  EXPECT_EQ(bad.kind, Utf8Step::Kind::kInvalid);
  EXPECT_EQ(bad.length, 2u);
}

TEST(Utf8, SettledLengthHoldsOnlyAnUnfinishedTail) {
  EXPECT_EQ(utf8_settled_length(""), 0u);
  EXPECT_EQ(utf8_settled_length("abc"), 3u);
  EXPECT_EQ(utf8_settled_length("ab\xE2\x82"), 2u);      // waits for the third byte
  EXPECT_EQ(utf8_settled_length("ab\xF0\x9F\x98"), 2u);  // waits for the fourth byte
  EXPECT_EQ(utf8_settled_length("ab\xF0\x9F\x98\x80"), 6u);
  EXPECT_EQ(utf8_settled_length("ab\xE2X"), 4u);  // already invalid: settled
  EXPECT_EQ(utf8_settled_length("\xFF"), 1u);
  EXPECT_EQ(utf8_settled_length("\xE2\x82\xAC\xC3"), 3u);
  EXPECT_EQ(utf8_settled_length("\xF0\x9F\xE2\x82"), 2u);  // F0 9F is dead, E2 82 may finish
}

TEST(Utf8, AppendEncodesEveryLength) {
  std::string s;
  for (char32_t cp : {U'\0', U'A', U'\u00e9', U'\u4e2d', U'\U0001F600', U'\U0010FFFF'}) {
    append_utf8(cp, s);
  }
  EXPECT_EQ(s, std::string("\0A\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF", 15));
  EXPECT_TRUE(is_valid_utf8(s));
}

// The offset the server names in its 400 for a body that is not UTF-8.
TEST(Utf8, FindsTheFirstInvalidByte) {
  EXPECT_EQ(find_invalid_utf8("plain ascii"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("ab\xff"), 2u);            // never valid
  EXPECT_EQ(find_invalid_utf8("0123456789\xff"), 10u);   // after the 8-byte ASCII fast path
  EXPECT_EQ(find_invalid_utf8("a\xc3"), 1u);             // truncated
  EXPECT_EQ(find_invalid_utf8("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(find_invalid_utf8("x\xed\xa0\x80"), 1u);     // UTF-16 surrogate
  EXPECT_EQ(find_invalid_utf8("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("\xe4\xb8"), 0u);          // truncated 3-byte
  EXPECT_EQ(find_invalid_utf8("\xe4\x41\x41"), 0u);      // bad continuation
}

}  // namespace
}  // namespace llms
