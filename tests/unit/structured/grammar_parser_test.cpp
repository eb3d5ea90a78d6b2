// The GBNF front end: errors named with line:column, the format's features, and hostile input.
#include <gtest/gtest.h>

#include <string>

#include "grammar_test_support.h"
#include "util/error.h"

namespace llms::structured {
namespace {

using testing::accepts;
using testing::byte_index;

std::string grammar_error(const std::string& text, CompileLimits limits = {}) {
  try {
    compile_grammar(text, byte_index(), limits);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument);
    return e.what();
  }
  return "";
}

void expect_error(const std::string& text, const std::string& fragment) {
  const std::string what = grammar_error(text);
  EXPECT_NE(what.find(fragment), std::string::npos)
      << "grammar:\n"
      << text << "\ngave '" << what << "', wanted '" << fragment << "'";
}

TEST(GrammarParser, ErrorsNameTheProblemAndItsLineAndColumn) {
  expect_error("root ::= foo", "undefined rule 'foo' at line 1:10");
  expect_error("root ::= \"a\"\nroot ::= \"b\"",
               "duplicate rule 'root' (first defined at line 1:1) at line 2:1");
  expect_error("start ::= \"a\"", "no 'root' rule");
  expect_error("root ::= \"abc", "unterminated literal at line 1:10");
  expect_error("root ::=\n  [a-", "unterminated character class '[' at line 2:3");
  expect_error("root ::= \"\\q\"", "unknown escape '\\q' at line 1:11");
  expect_error("root \"a\"", "expected '::=' after rule name 'root' at line 1:6");
  expect_error("root ::= (\"a\"", "unterminated group '(' at line 1:10");
  expect_error("root ::= \"a\"{10001}", "repetition count over 10000");
  expect_error("root ::= \"a\"{3,1}", "n < m");
  expect_error("root ::= [z-a]", "range out of order");
  expect_error("root ::= \"\\uD800\"", "surrogate");
  expect_error("root ::= @", "unexpected character '@' at line 1:10");
  expect_error("root ::= \"a\" /(?=x)/", "in the regex at line 1:14: lookahead");
  expect_error("root ::= a\na ::= a \"x\"", "matches no text");
}

TEST(GrammarParser, FormatFeatures) {
  auto index = byte_index();
  auto g = [&](const std::string& text) { return compile_grammar(text, index); };
  // A rule ends where the next `name ::=` begins, even on one line; comments; forward references.
  auto two = g("root ::= a b # trailing comment\na ::= \"x\" b ::= \"y\"  # more\n");
  EXPECT_TRUE(accepts(two, "xy"));
  EXPECT_FALSE(accepts(two, "x"));
  // Escapes are code points matched as UTF-8.
  auto esc = g("root ::= \"\\x41\\u00e9\\U0001F600\\t\\\"\\\\\\/\" [\\]\\-\\^\\[]");
  EXPECT_TRUE(accepts(esc, "A\xC3\xA9\xF0\x9F\x98\x80\t\"\\/]"));
  EXPECT_TRUE(accepts(esc, "A\xC3\xA9\xF0\x9F\x98\x80\t\"\\/^"));
  // `.` is one code point of any length; negated classes are over code points.
  auto dot = g("root ::= . [^a]");
  EXPECT_TRUE(accepts(dot, "\xF0\x9F\x98\x80\xC3\xA9"));
  EXPECT_FALSE(accepts(dot,
                       "\xF0\x9F\x98\x80"
                       "a"));
  EXPECT_FALSE(accepts(dot, "\xC3"));
  // Repetitions.
  auto rep = g("root ::= \"a\"{2} \"b\"{1,} \"c\"{0,2} \"d\"? \"e\"*");
  EXPECT_TRUE(accepts(rep, "aabbbcc"));
  EXPECT_TRUE(accepts(rep, "aabcdeee"));
  EXPECT_FALSE(accepts(rep, "abcc"));
  EXPECT_FALSE(accepts(rep, "aabccc"));
  // Regex terminals, with an escaped slash and a slash inside a class.
  auto re = g("root ::= /[0-9]+\\/[/a]/ \"!\"");
  EXPECT_TRUE(accepts(re, "12//!"));
  EXPECT_TRUE(accepts(re, "3/a!"));
  EXPECT_FALSE(accepts(re, "/a!"));
}

TEST(GrammarParser, RecursionOfEveryKind) {
  auto index = byte_index();
  auto left = compile_grammar("root ::= root \"+\" num | num\nnum ::= [0-9]+", index);
  EXPECT_TRUE(accepts(left, "1+22+3"));
  EXPECT_FALSE(accepts(left, "1++2"));
  auto right = compile_grammar("root ::= \"(\" root \")\" root | \"\"", index);
  EXPECT_TRUE(accepts(right, "(()())()"));
  EXPECT_TRUE(accepts(right, ""));
  EXPECT_FALSE(accepts(right, "(()"));
  auto mutual = compile_grammar("root ::= a\na ::= \"x\" b | \"x\"\nb ::= \"y\" a", index);
  EXPECT_TRUE(accepts(mutual, "xyxyx"));
  EXPECT_FALSE(accepts(mutual, "xyxy"));
  // Nullable rules in every position, including a nullable left-recursive one.
  auto nullable = compile_grammar("root ::= e root e \"z\" | e\ne ::= e \"q\" | \"\"", index);
  EXPECT_TRUE(accepts(nullable, ""));
  EXPECT_TRUE(accepts(nullable, "qzqz"));
  EXPECT_FALSE(accepts(nullable, "qzq"));
  EXPECT_TRUE(accepts(nullable, "zz"));
  EXPECT_TRUE(accepts(nullable, "qqqzqz"));
  // Ambiguity does not matter to acceptance.
  auto ambiguous = compile_grammar("root ::= root root | \"a\" | \"\"", index);
  EXPECT_TRUE(accepts(ambiguous, "aaaa"));
}

TEST(GrammarParser, UnproductiveAlternativesNeverLookViable) {
  auto index = byte_index();
  // `dead` derives nothing: "a" must not be allowed even though a branch starts with it.
  auto g = compile_grammar("root ::= \"a\" dead | \"b\"\ndead ::= dead \"x\"", index);
  Matcher m(g);
  EXPECT_EQ(testing::allowed_ids(m), std::vector<int32_t>{'b'});
  EXPECT_FALSE(m.accept_bytes("a"));
}

TEST(GrammarParser, EmptyCharacterSetsNeverLookViable) {
  // An empty class is a state with no way on: the states before it are dead, and the linker
  // must not take every state of such an automaton for live (compile_pipeline).
  auto index = byte_index();
  for (const std::string text :
       {"root ::= \"ac\" /[]/ | \"b\"", "root ::= x | \"b\"\nx ::= \"a\" \"c\" /[]/ \"c\"",
        "root ::= \"ac\" [^\\x00-\\U0010FFFF] | \"b\"", "root ::= (\"a\" \"c\"+ /[]/)* \"b\""}) {
    auto g = compile_grammar(text, index);
    Matcher m(g);
    EXPECT_EQ(testing::allowed_ids(m), std::vector<int32_t>{'b'}) << text;
    EXPECT_FALSE(m.accept_bytes("a")) << text;
  }
}

TEST(GrammarParser, ARepetitionNullableThroughLaterRulesIsExpandedNotCounted) {
  // x is nullable only through a chain of rules written after it, so a one-pass analysis
  // would call it non-empty and count x{30} (a counted body must read a byte per iteration).
  auto index = byte_index();
  std::string text = "root ::= x{30} \"b\"\nx ::= r1\n";
  for (int i = 1; i < 12; ++i) {
    text += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + "\n";
  }
  text += "r12 ::= \"a\"?\n";
  auto g = compile_grammar(text, index);
  EXPECT_TRUE(accepts(g, "b"));
  EXPECT_TRUE(accepts(g, "ab"));
  EXPECT_TRUE(accepts(g, std::string(30, 'a') + "b"));
  EXPECT_FALSE(accepts(g, std::string(31, 'a') + "b"));
  EXPECT_FALSE(accepts(g, "cb"));
}

TEST(GrammarParser, HostileInputIsAClearErrorNotACrash) {
  const std::string deep =
      "root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')');
  EXPECT_NE(grammar_error(deep).find("nested deeper than 200"), std::string::npos);
  // An exponential automaton compiles: its states are built where the text goes (regex_test).
  auto exponential = compile_grammar("root ::= [ab]* \"a\" [ab]{22}", byte_index());
  EXPECT_TRUE(accepts(exponential, "ba" + std::string(22, 'b')));
  EXPECT_FALSE(accepts(exponential, "ab" + std::string(22, 'b')));
  // A long chain of rules each inlining the next compiles (no recursion over the chain).
  std::string chain = "root ::= r0\n";
  for (int i = 0; i < 20000; ++i)
    chain += "r" + std::to_string(i) + " ::= \"x\" r" + std::to_string(i + 1) + "\n";
  chain += "r20000 ::= \"y\"\n";
  auto g = compile_grammar(chain, byte_index());
  EXPECT_TRUE(accepts(g, std::string(20000, 'x') + "y"));
  // Postfix operators stacked 100k deep are bounded by the budget, not the stack.
  std::string stacked = "root ::= \"a\"" + std::string(100000, '?');
  const std::string what =
      grammar_error(stacked, CompileLimits{std::chrono::milliseconds(5000), 50000});
  EXPECT_NE(what.find("constraint too complex"), std::string::npos) << what;
}

}  // namespace
}  // namespace llms::structured
