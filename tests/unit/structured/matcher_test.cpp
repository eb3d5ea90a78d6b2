// The Matcher's contract: stop and special tokens, history and rollback, forks, dead ends, sizes.
#include "structured/matcher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "grammar_test_support.h"
#include "util/error.h"

namespace llms::structured {
namespace {

using testing::allowed_ids;
using testing::byte_index;
using testing::kPaddingId;
using testing::kSpecialTextId;
using testing::kStopId;

bool contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

TEST(Matcher, StopTokensOnlyWhereTheSentenceIsComplete) {
  auto g = compile_grammar("root ::= \"ab\" \"c\"?", byte_index());
  Matcher m(g);
  EXPECT_FALSE(m.is_accepting());
  EXPECT_FALSE(contains(allowed_ids(m), kStopId));
  EXPECT_FALSE(m.accept_token(kStopId));
  ASSERT_TRUE(m.accept_bytes("ab"));
  EXPECT_TRUE(m.is_accepting());
  EXPECT_TRUE(m.can_continue());
  EXPECT_EQ(allowed_ids(m), (std::vector<int32_t>{'c', kStopId}));
  ASSERT_TRUE(m.accept_token('c'));
  EXPECT_FALSE(m.can_continue());
  EXPECT_EQ(allowed_ids(m), std::vector<int32_t>{kStopId});
  ASSERT_TRUE(m.accept_token(kStopId));
  EXPECT_TRUE(m.is_stopped());
  EXPECT_FALSE(m.is_accepting());
  EXPECT_FALSE(m.can_continue());
  EXPECT_TRUE(allowed_ids(m).empty());
  EXPECT_FALSE(m.accept_token('c'));
  EXPECT_FALSE(m.accept_bytes(""));
  EXPECT_EQ(m.n_tokens_accepted(), 3);
}

TEST(Matcher, SpecialAndEmptyTokensAreNeverAllowed) {
  // The grammar allows the special token's text, but the special token itself is not text.
  auto g = compile_grammar("root ::= \"<|im_start|>\" | [<]", byte_index());
  Matcher m(g);
  const auto ids = allowed_ids(m);
  EXPECT_FALSE(contains(ids, kSpecialTextId));
  EXPECT_FALSE(contains(ids, kPaddingId));
  EXPECT_TRUE(contains(ids, '<'));
  EXPECT_FALSE(m.accept_token(kSpecialTextId));
  EXPECT_FALSE(m.accept_token(kPaddingId));
  EXPECT_FALSE(m.accept_token(-1));
  EXPECT_FALSE(m.accept_token(1 << 30));
  EXPECT_TRUE(m.accept_bytes("<|im_start|>"));  // forced text is fine
  EXPECT_TRUE(m.is_accepting());
}

TEST(Matcher, RejectedInputLeavesTheStateUnchanged) {
  auto g = compile_grammar("root ::= \"abc\"", byte_index());
  Matcher m(g);
  ASSERT_TRUE(m.accept_bytes("a"));
  const std::string before = m.debug_state();
  EXPECT_FALSE(m.accept_bytes("bd"));
  EXPECT_FALSE(m.accept_token('x'));
  EXPECT_EQ(m.debug_state(), before);
  EXPECT_EQ(m.n_tokens_accepted(), 1);
  EXPECT_TRUE(m.accept_bytes("bc"));
}

TEST(Matcher, RollbackRestoresEarlierPositions) {
  auto g = compile_grammar("root ::= \"(\" root \")\" | \"x\"", byte_index());
  Matcher m(g);
  std::vector<std::string> states{m.debug_state()};
  for (const char* piece : {"(", "((", "x", ")"}) {
    ASSERT_TRUE(m.accept_bytes(piece));
    states.push_back(m.debug_state());
  }
  m.rollback(2);
  EXPECT_EQ(m.debug_state(), states[2]);
  EXPECT_EQ(m.n_tokens_accepted(), 2);
  m.rollback(0);
  EXPECT_EQ(m.debug_state(), states[2]);
  ASSERT_TRUE(m.accept_bytes("x))"));
  m.rollback(1);
  EXPECT_EQ(m.debug_state(), states[2]);
  EXPECT_THROW(m.rollback(3), Error);
  EXPECT_THROW(m.rollback(-1), Error);
  // A stop token is a step too.
  ASSERT_TRUE(m.accept_bytes("x)))"));
  ASSERT_TRUE(m.accept_token(kStopId));
  m.rollback(1);
  EXPECT_FALSE(m.is_stopped());
  EXPECT_TRUE(m.is_accepting());
}

TEST(Matcher, HistoryIsBoundedToMaxRollback) {
  auto g = compile_grammar("root ::= \"a\"*", byte_index());
  Matcher m(g);
  for (int i = 0; i < Matcher::kMaxRollback + 10; ++i) ASSERT_TRUE(m.accept_token('a'));
  EXPECT_THROW(m.rollback(Matcher::kMaxRollback + 1), Error);
  m.rollback(Matcher::kMaxRollback);
  EXPECT_EQ(m.n_tokens_accepted(), 10);
  EXPECT_THROW(m.rollback(1), Error);
}

TEST(Matcher, CopiesForkIndependently) {
  auto g = compile_grammar("root ::= \"a\" (\"b\" | \"c\") \"d\"", byte_index());
  Matcher m(g);
  ASSERT_TRUE(m.accept_bytes("a"));
  Matcher fork = m;
  ASSERT_TRUE(m.accept_bytes("b"));
  ASSERT_TRUE(fork.accept_bytes("c"));
  EXPECT_EQ(allowed_ids(m), std::vector<int32_t>{'d'});
  EXPECT_FALSE(fork.accept_bytes("b"));
  fork.rollback(1);
  EXPECT_TRUE(fork.accept_bytes("bd"));
  EXPECT_TRUE(fork.is_accepting());
  EXPECT_FALSE(m.is_accepting());
  Matcher assigned(g);
  assigned = fork;
  EXPECT_TRUE(assigned.is_accepting());
}

TEST(Matcher, MaskSizeMustMatchTheVocabulary) {
  auto g = compile_grammar("root ::= \"a\"", byte_index());
  Matcher m(g);
  std::vector<uint32_t> words(3);
  EXPECT_THROW(m.fill_mask(words), Error);
}

TEST(Matcher, NoAllowedTokenIsAnEmptyMaskNotACrash) {
  // The grammar wants "a" but the vocabulary only has "ab": no token can be next.
  Vocabulary v;
  v.token_bytes = {"ab", ""};
  v.is_special = {0, 1};
  v.stop_token_ids = {1};
  auto g = compile_grammar("root ::= \"a\"", build_token_index(v));
  Matcher m(g);
  EXPECT_TRUE(allowed_ids(m).empty());
  EXPECT_TRUE(m.can_continue());  // the grammar could go on; the vocabulary cannot
  EXPECT_FALSE(m.accept_token(0));
}

TEST(Matcher, PartialUtf8CharactersAreAllowedExactlyWhenCompletable) {
  // "é" is C3 A9; "ê" is C3 AA; only "é" is in the grammar.
  auto g = compile_grammar("root ::= \"\\u00e9\" \"!\"", byte_index({"\xC3\xA9!", "\xC3\xAA"}));
  Matcher m(g);
  EXPECT_EQ(allowed_ids(m), (std::vector<int32_t>{0xC3, testing::kFirstExtraId}));
  ASSERT_TRUE(m.accept_token(0xC3));
  EXPECT_EQ(allowed_ids(m), std::vector<int32_t>{0xA9});
  EXPECT_FALSE(m.accept_token(0xAA));
}

TEST(Matcher, DeepNestingAndLongOutputsNeedNoRecursion) {
  auto g = compile_grammar("root ::= \"[\" root \"]\" | \"x\"", byte_index());
  {
    Matcher m(g);
    ASSERT_TRUE(m.accept_bytes(std::string(200000, '[')));
    EXPECT_EQ(allowed_ids(m), (std::vector<int32_t>{'[', 'x'}));
    ASSERT_TRUE(m.accept_bytes("x"));
    Matcher copy = m;
    ASSERT_TRUE(copy.accept_bytes(std::string(200000, ']')));
    EXPECT_TRUE(copy.is_accepting());
  }  // destroying both chains of 200k sets must not overflow the stack
  SUCCEED();
}

TEST(Matcher, ChoicesAreExact) {
  const std::vector<std::string> choices{"yes", "no", "yesterday", ""};
  auto g = compile_choices(choices, byte_index({"yes", "yest", "no"}));
  Matcher m(g);
  EXPECT_TRUE(m.is_accepting());  // the empty choice
  const auto ids = allowed_ids(m);
  EXPECT_TRUE(contains(ids, kStopId));
  EXPECT_TRUE(contains(ids, testing::kFirstExtraId));
  EXPECT_TRUE(contains(ids, testing::kFirstExtraId + 1));
  EXPECT_TRUE(testing::accepts(g, "yesterday"));
  EXPECT_FALSE(testing::accepts(g, "yest"));
  EXPECT_THROW(compile_choices(std::vector<std::string>{}, byte_index()), Error);
}

// Nested counted regions can make one mask's token walks explode (thousands of (state, count)
// items, each walking the vocabulary). The first mask is computed while compiling, so such a
// pattern is a compile error; a later one is an error from fill_mask, bounded in time, never a
// stalled step.
std::vector<std::string> runs_of_a_and_b() {
  std::vector<std::string> extra;
  for (int n = 2; n <= 16; ++n) {
    extra.push_back(std::string(static_cast<size_t>(n), 'a'));
    extra.push_back(std::string(static_cast<size_t>(n), 'b'));
    std::string mixed;
    for (int i = 0; i < n; ++i) mixed += i % 2 ? 'b' : 'a';
    extra.push_back(mixed);
  }
  return extra;
}

TEST(Matcher, ExplodingMasksAreBoundedErrors) {
  const auto index = byte_index(runs_of_a_and_b());
  try {
    compile_regex("((a|b){0,1000}){0,1000}", index);
    FAIL() << "expected the first mask to exceed its budget";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("constraint too complex"), std::string::npos) << e.what();
  }
  // The first mask is cheap ('x' only); the second one explodes. The compile itself is given
  // time to spare (it takes ~0.3 s, several times that under the sanitizers): the mask's own
  // bound is what is tested here.
  auto g = compile_regex("x((a|b){0,1000}){0,1000}", index,
                         CompileLimits{std::chrono::seconds(60), 1'000'000'000});
  Matcher m(g);
  EXPECT_EQ(allowed_ids(m), std::vector<int32_t>{'x'});
  ASSERT_TRUE(m.accept_token('x'));
  EXPECT_THROW(allowed_ids(m), Error);
}

}  // namespace
}  // namespace llms::structured
