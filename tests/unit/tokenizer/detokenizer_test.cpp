// Streaming detokenizer: complete UTF-8 only, characters split across byte-level tokens and
// byte-fallback runs, and stop strings held back, released, matched across tokens, never emitted.
#include "tokenizer/detokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer_test_util.h"
#include "util/error.h"

namespace llms::tokenizer {
namespace {

using testing::ByteLevelBuilder;

// Byte-level vocabulary where ids 0..255 are the bytes; "hello" and " world" are tokens too.
struct Fixture {
  Tokenizer tok;
  int32_t hello;
  int32_t world;
  int32_t eot;
};

Fixture make() {
  ByteLevelBuilder b;
  b.merge("h", "e");
  b.merge("l", "l");
  b.merge("he", "ll");
  const int32_t hello = b.merge("hell", "o");
  b.merge(" ", "w");
  b.merge(" w", "o");
  b.merge("r", "l");
  b.merge("rl", "d");
  const int32_t world = b.merge(" wo", "rld");
  const int32_t eot = b.add("<|endoftext|>", 3);
  b.spec.eos_id = eot;
  return {b.build(), hello, world, eot};
}

std::vector<int32_t> bytes_of(std::string_view s) {
  std::vector<int32_t> ids;
  for (char c : s) ids.push_back(static_cast<uint8_t>(c));
  return ids;
}

TEST(Detokenizer, ReleasesOnlyCompleteCharacters) {
  const Fixture f = make();
  IncrementalDetokenizer d(f.tok);
  const auto emoji = bytes_of("😀");  // four byte tokens
  EXPECT_EQ(d.push(f.hello).text, "hello");
  EXPECT_EQ(d.push(emoji[0]).text, "");
  EXPECT_EQ(d.push(emoji[1]).text, "");
  EXPECT_EQ(d.push(emoji[2]).text, "");
  EXPECT_EQ(d.push(emoji[3]).text, "😀");
  EXPECT_EQ(d.push(f.world).text, " world");
  EXPECT_EQ(d.finish().text, "");
}

TEST(Detokenizer, UnfinishedCharacterAtTheEndBecomesReplacement) {
  const Fixture f = make();
  IncrementalDetokenizer d(f.tok);
  EXPECT_EQ(d.push(0xE4).text, "");
  EXPECT_EQ(d.push(0xB8).text, "");
  EXPECT_EQ(d.finish().text, "\uFFFD");
  // A byte that cannot continue the character settles it at once.
  IncrementalDetokenizer e(f.tok);
  EXPECT_EQ(e.push(0xE4).text, "");
  EXPECT_EQ(e.push('a').text, "\uFFFDa");
}

TEST(Detokenizer, SkipsSpecialTokensByDefault) {
  const Fixture f = make();
  IncrementalDetokenizer d(f.tok);
  EXPECT_EQ(d.push(f.hello).text, "hello");
  EXPECT_EQ(d.push(f.eot).text, "");
  IncrementalDetokenizer keep(f.tok, {.stop_strings = {}, .skip_special = false});
  EXPECT_EQ(keep.push(f.eot).text, "<|endoftext|>");
}

TEST(Detokenizer, HoldsBackAPossibleStopAndReleasesItWhenItIsNot) {
  const Fixture f = make();
  IncrementalDetokenizer d(f.tok, {.stop_strings = {" wor!"}});
  EXPECT_EQ(d.push(f.hello).text, "hello");
  auto out = d.push(' ');
  EXPECT_EQ(out.text, "");  // " " may start " wor!"
  out = d.push('w');
  EXPECT_EQ(out.text, "");
  out = d.push('x');  // " wx" cannot be a prefix any more
  EXPECT_EQ(out.text, " wx");
  EXPECT_FALSE(out.stop);
  EXPECT_EQ(d.finish().text, "");
}

TEST(Detokenizer, StopSplitAcrossTokensIsNeverEmitted) {
  const Fixture f = make();
  IncrementalDetokenizer d(f.tok, {.stop_strings = {"lo wo"}});
  std::string all;
  auto out = d.push(f.hello);  // "hello": "lo" may start the stop
  all += out.text;
  EXPECT_EQ(out.text, "hel");
  out = d.push(f.world);  // " world" completes "lo wo"
  all += out.text;
  ASSERT_TRUE(out.stop.has_value());
  EXPECT_EQ(*out.stop, 0u);
  EXPECT_EQ(all, "hel");
  EXPECT_TRUE(d.stopped());
  EXPECT_EQ(d.push(f.hello).text, "");  // nothing after a stop
  EXPECT_EQ(d.finish().text, "");
}

TEST(Detokenizer, StopInsideOneTokenCutsTheToken) {
  const Fixture f = make();
  IncrementalDetokenizer d(f.tok, {.stop_strings = {"ll"}});
  const auto out = d.push(f.hello);
  EXPECT_EQ(out.text, "he");
  ASSERT_TRUE(out.stop.has_value());
}

TEST(Detokenizer, EarliestCompletedStopWinsAndLongestOnATie) {
  const Fixture f = make();
  // "hello world": "o w" completes before "world".
  IncrementalDetokenizer a(f.tok, {.stop_strings = {"world", "o w"}});
  std::string text = a.push(f.hello).text;
  const auto out = a.push(f.world);
  text += out.text;
  ASSERT_TRUE(out.stop.has_value());
  EXPECT_EQ(*out.stop, 1u);
  EXPECT_EQ(text, "hell");
  // Both end at the same byte: the longer one (it starts earlier) is reported.
  IncrementalDetokenizer b(f.tok, {.stop_strings = {"lo", "llo"}});
  const auto bout = b.push(f.hello);
  ASSERT_TRUE(bout.stop.has_value());
  EXPECT_EQ(*bout.stop, 1u);
  EXPECT_EQ(bout.text, "he");
}

TEST(Detokenizer, OverlappingPrefixesAreTrackedLikeKmp) {
  const Fixture f = make();
  // "aab" inside "aaab": a naive restart after the third 'a' would miss it.
  IncrementalDetokenizer d(f.tok, {.stop_strings = {"aab"}});
  std::string text;
  for (char c : std::string("xaaab")) {
    const auto out = d.push(static_cast<uint8_t>(c));
    text += out.text;
    if (out.stop) break;
  }
  EXPECT_TRUE(d.stopped());
  EXPECT_EQ(text, "xa");
}

TEST(Detokenizer, FinishReleasesHeldTextWhenNoStopCame) {
  const Fixture f = make();
  IncrementalDetokenizer d(f.tok, {.stop_strings = {"hello there"}});
  EXPECT_EQ(d.push(f.hello).text, "");
  EXPECT_EQ(d.push(' ').text, "");
  const auto out = d.finish();
  EXPECT_EQ(out.text, "hello ");
  EXPECT_FALSE(out.stop);
}

TEST(Detokenizer, MultiByteStopStringsMatchWholeCharacters) {
  const Fixture f = make();
  IncrementalDetokenizer d(f.tok, {.stop_strings = {"中文"}});
  std::string text;
  std::optional<size_t> stop;
  for (int32_t id : bytes_of("好中中文后")) {
    const auto out = d.push(id);
    text += out.text;
    if (out.stop) {
      stop = out.stop;
      break;
    }
  }
  EXPECT_TRUE(stop.has_value());
  EXPECT_EQ(text, "好中");
}

TEST(Detokenizer, WithoutStopsTheStreamEqualsDecode) {
  const Fixture f = make();
  const std::vector<int32_t> ids = {f.hello, 0xE4, 0xB8, 0xAD, f.eot, 0xF0, f.world, 0x9F};
  for (bool skip : {false, true}) {
    IncrementalDetokenizer d(f.tok, {.stop_strings = {}, .skip_special = skip});
    std::string text;
    for (int32_t id : ids) text += d.push(id).text;
    text += d.finish().text;
    EXPECT_EQ(text, f.tok.decode(ids, {.skip_special = skip}));
  }
}

TEST(Detokenizer, BadStopStringsAndIdsAreRefused) {
  const Fixture f = make();
  EXPECT_THROW(IncrementalDetokenizer(f.tok, {.stop_strings = {""}}), Error);
  EXPECT_THROW(IncrementalDetokenizer(f.tok, {.stop_strings = {"ok", "\xFF"}}), Error);
  IncrementalDetokenizer d(f.tok);
  EXPECT_THROW(d.push(f.tok.n_vocab()), Error);
}

TEST(StopStringMatcher, WorksOnPlainText) {
  StopStringMatcher m({"END"});
  std::string out;
  EXPECT_FALSE(m.feed("abc E", out));
  EXPECT_EQ(out, "abc ");
  EXPECT_EQ(m.held_size(), 1u);
  EXPECT_FALSE(m.feed("NX", out));
  EXPECT_EQ(out, "abc ENX");
  EXPECT_TRUE(m.feed("..END..", out));
  EXPECT_EQ(out, "abc ENX..");
  EXPECT_TRUE(m.stopped());
}

}  // namespace
}  // namespace llms::tokenizer
