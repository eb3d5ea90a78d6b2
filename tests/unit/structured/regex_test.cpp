// The regex compiler: refusals with named constructs and offsets, the supported syntax, and the
// language it accepts against std::regex (ECMAScript, full match) as an independent oracle.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "grammar_test_support.h"
#include "structured/grammar_constraint.h"
#include "structured/json_schema_code_points.h"
#include "structured/matcher.h"
#include "util/error.h"

namespace llms::structured {
namespace {

using testing::accepts;
using testing::allowed_ids;
using testing::brute_force_ids;
using testing::byte_index;

// A random text of a's and b's, min_length to min_length + spread - 1 long.
std::string random_ab(std::mt19937& rng, int min_length, int spread) {
  std::string text;
  const int n = min_length + static_cast<int>(rng() % static_cast<unsigned>(spread));
  for (int k = 0; k < n; ++k) text += (rng() % 2) ? 'a' : 'b';
  return text;
}

std::string regex_error(const std::string& pattern, CompileLimits limits = {}) {
  try {
    compile_regex(pattern, byte_index(), limits);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument);
    return e.what();
  }
  return "";
}

void expect_error(const std::string& pattern, const std::string& fragment) {
  const std::string what = regex_error(pattern);
  EXPECT_NE(what.find(fragment), std::string::npos)
      << "pattern " << pattern << " gave '" << what << "', wanted '" << fragment << "'";
}

TEST(Regex, RefusesUnsupportedConstructsNamingThemAndTheirOffset) {
  expect_error("a(?=b)", "lookahead '(?=' is not supported at offset 1");
  expect_error("a(?!b)", "lookahead '(?!' is not supported at offset 1");
  expect_error("(?<=a)b", "lookbehind '(?<=' is not supported at offset 0");
  expect_error("(a)\\1", "backreference '\\1' is not supported at offset 3");
  expect_error("\\bword", "word boundary '\\b' is not supported at offset 0");
  expect_error("a\\B", "word boundary '\\B' is not supported at offset 1");
  expect_error("a^b", "anchor '^' is only supported at the start of the pattern at offset 1");
  expect_error("a$b", "anchor '$' is only supported at the end of the pattern at offset 1");
  expect_error("(a$)", "anchor '$'");
  expect_error("\\p{L}", "Unicode property escape");
  expect_error("*a", "nothing to repeat at offset 0");
  expect_error("a**", "nothing to repeat");
  expect_error("a{2}{3}", "nothing to repeat");
  expect_error("a{10001}", "repetition count 10001 is over 10000");
  expect_error("a{3,2}", "n < m");
  expect_error("(ab", "unterminated group '(' at offset 0");
  expect_error("ab)", "unmatched ')' at offset 2");
  expect_error("[ab", "unterminated character class '[' at offset 0");
  expect_error("[z-a]", "range out of order at offset 1");
  expect_error("\\uD800", "lone surrogate");
  expect_error("\\q", "unknown escape '\\q'");
  expect_error("\\x4", "needs 2 hex digits");
  expect_error("\\07", "octal escapes");
  expect_error("[^\\x00-\\u{10FFFF}]", "matches no text");
}

TEST(Regex, DeepNestingIsAnErrorNotAStackOverflow) {
  const std::string deep = std::string(100000, '(') + "a" + std::string(100000, ')');
  EXPECT_NE(regex_error(deep).find("nested deeper than"), std::string::npos);
  // Within the limit it compiles.
  EXPECT_TRUE(accepts(
      compile_regex(std::string(150, '(') + "a" + std::string(150, ')'), byte_index()), "a"));
}

TEST(Regex, ExponentialAutomataAreBuiltOnlyWhereTextGoes) {
  const CompileLimits limits{std::chrono::milliseconds(5000), 200'000};
  // The classic exponential DFA (the n-th symbol from the end), with a count small enough to be
  // expanded: 2^23 states in all. Built on demand, compiling and matching make only the states
  // the texts pass, and the language stays exact (checked against std::regex).
  const std::string pattern = "(a|b)*a(a|b){22}";
  auto g = compile_regex(pattern, byte_index(), limits);
  const std::regex oracle(pattern, std::regex::ECMAScript);
  std::mt19937 rng(5);
  int n_matches = 0;
  for (int i = 0; i < 100; ++i) {
    const std::string text = random_ab(rng, 20, 10);
    const bool expected = std::regex_match(text, oracle);
    n_matches += expected;
    Matcher m(g);
    for (char c : text) {
      const std::vector<int32_t> allowed = testing::allowed_ids(m);
      ASSERT_TRUE(std::find(allowed.begin(), allowed.end(), c) != allowed.end()) << text;
      ASSERT_TRUE(m.accept_bytes(std::string(1, c)));
    }
    ASSERT_EQ(m.is_accepting(), expected) << text;
  }
  EXPECT_GT(n_matches, 10);
  EXPECT_LT(n_matches, 90);
  // The whole automaton is past the automaton's own budget (what the compile limits allow): a
  // read that would need a state beyond it is a clear error, never unbounded memory.
  try {
    (void)grammar_stats(*g);
    FAIL() << "expected the full automaton to exceed its budget";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("constraint too complex"), std::string::npos) << e.what();
  }
}

TEST(Regex, OnlyTheStatesTextsReachAreBuilt) {
  // 2^17 states in all, of which compiling (its warm-up takes a few milliseconds) and one walk
  // build a few thousand; counting them builds the rest.
  auto g = compile_regex("(a|b)*a(a|b){16}", byte_index());
  EXPECT_TRUE(accepts(g, "ba" + std::string(16, 'b')));
  EXPECT_FALSE(accepts(g, "ab" + std::string(16, 'b')));
  const GrammarStats stats = grammar_stats(*g);
  EXPECT_GE(stats.states, 1 << 17);
  EXPECT_LT(stats.states_built, stats.states / 2) << stats.states_built;
}

TEST(Regex, AnAutomatonPastItsBudgetIsNotSharedAgain) {
  // A budget of 3,000 units over the automaton's life: walks that need new states fail with a
  // clear error once it is spent, and the factory says not to share the grammar any more.
  auto g = compile_regex("(a|b)*a(a|b){20}", byte_index(),
                         CompileLimits{std::chrono::milliseconds(5000), 3000});
  GrammarConstraintFactory factory(g);
  EXPECT_TRUE(factory.reusable());
  std::mt19937 rng(9);
  std::string failure;
  for (int walk = 0; walk < 200 && failure.empty(); ++walk) {
    Matcher m(g);
    try {
      for (int i = 0; i < 40; ++i) {
        (void)allowed_ids(m);
        ASSERT_TRUE(m.accept_bytes(rng() % 2 ? "a" : "b"));
      }
    } catch (const Error& e) {
      failure = e.what();
    }
  }
  EXPECT_NE(failure.find("constraint too complex"), std::string::npos) << failure;
  EXPECT_FALSE(factory.reusable());
}

TEST(Regex, CountedRepetitionTamesTheExponentialDfa) {
  // With 40 copies the repetition is counted: the parser keeps one item per pending count
  // instead of a DFA of 2^40 states. Checked against std::regex.
  const std::string pattern = "(a|b)*a(a|b){40}";
  auto g =
      compile_regex(pattern, byte_index(), CompileLimits{std::chrono::milliseconds(5000), 200'000});
  const std::regex oracle(pattern, std::regex::ECMAScript);
  std::mt19937 rng(3);
  int n_matches = 0;
  for (int i = 0; i < 200; ++i) {
    const std::string text = random_ab(rng, 38, 12);
    const bool expected = std::regex_match(text, oracle);
    n_matches += expected;
    ASSERT_EQ(accepts(g, text), expected) << text;
  }
  EXPECT_GT(n_matches, 20);
  EXPECT_LT(n_matches, 180);
}

TEST(Regex, LargeCountsAreCountedNotExpanded) {
  // Ten thousand copies of ten thousand: the outer repetition is counted by the parser, so the
  // automaton stays small and the language exact.
  auto g = compile_regex("(a{10000}){10000}", byte_index(),
                         CompileLimits{std::chrono::milliseconds(5000), 200'000});
  Matcher m(g);
  ASSERT_TRUE(m.accept_bytes(std::string(30000, 'a')));
  EXPECT_FALSE(m.is_accepting());
  EXPECT_FALSE(m.accept_bytes("b"));
  auto exact = compile_regex("[a-z]{3,40}!", byte_index());
  EXPECT_FALSE(accepts(exact, "ab!"));
  EXPECT_TRUE(accepts(exact, "abc!"));
  EXPECT_TRUE(accepts(exact, std::string(40, 'q') + "!"));
  EXPECT_FALSE(accepts(exact, std::string(41, 'q') + "!"));
  auto open_ended = compile_regex("(ab){30,}", byte_index());
  std::string text;
  for (int i = 0; i < 29; ++i) text += "ab";
  EXPECT_FALSE(accepts(open_ended, text));
  EXPECT_TRUE(accepts(open_ended, text + "ab"));
  EXPECT_TRUE(accepts(open_ended, text + "abababab"));
  // Where one count is not enough (a region re-entered while inside, two regions side by
  // side), the parser keeps several items, one per count.
  auto reentered = compile_regex("(x{0,50}y)*", byte_index());
  EXPECT_TRUE(accepts(reentered, std::string(50, 'x') + "yy" + std::string(3, 'x') + "y"));
  EXPECT_FALSE(accepts(reentered, std::string(51, 'x') + "y"));
  auto two = compile_regex("a{0,30}b|a{0,40}c", byte_index());
  EXPECT_TRUE(accepts(two, std::string(40, 'a') + "c"));
  EXPECT_FALSE(accepts(two, std::string(31, 'a') + "b"));
}

TEST(Regex, MaskWalksOfACountedRegionAreSharedAcrossCounts) {
  // A mask's token walk from a counted state depends on the count only where a guard tests it
  // (within one token: a few iterations), so a sentence of 80 words, one count per word, needs
  // a handful of walks per state, not one per count. Exactness is the property tests' job; this
  // checks the cache does not grow with the count. (A long token, as real vocabularies have,
  // keeps every count of this region in reach of one token, so each word is a new count key.)
  auto g = compile_regex("(\\S+\\s+){0,99}\\S+",
                         byte_index({" w", "w ", "w w", " w w ", std::string(200, 'x')}));
  Matcher m(g);
  std::vector<uint32_t> words(static_cast<size_t>(token_index(*g).n_mask_words()));
  for (int i = 0; i < 80; ++i) {
    m.fill_mask(words);
    ASSERT_TRUE(m.accept_bytes("w "));
  }
  m.fill_mask(words);
  EXPECT_GT(grammar_stats(*g).mask_entries, 0) << grammar_stats(*g).mask_entries;
  EXPECT_LE(grammar_stats(*g).mask_entries, 10);
}

TEST(Regex, LongTokensStayExactWhereTheClassSearchShrinks) {
  // A long token (33 bytes) of few characters (22) is covered by the class search at a small
  // count, so the long walk skips it there; deep into the count the class search allows fewer
  // characters and the token must be walked again, not served by the long walk cached before.
  std::string x_e;
  for (int i = 0; i < 11; ++i) x_e += "x\xC3\xA9";
  auto g = compile_regex("\"([^\"x]|x[^\"]){0,40}\"", byte_index({x_e}));
  Matcher m(g);
  ASSERT_TRUE(m.accept_bytes("\""));
  for (int i = 0; i < 30; ++i) {
    ASSERT_EQ(allowed_ids(m), brute_force_ids(m)) << "after " << i << " characters";
    ASSERT_TRUE(m.accept_bytes("a"));
  }
}

TEST(Regex, RepeatedEmptyBodiesAreBoundedByTheBudget) {
  // Copies of a body that makes no automaton state still cost budget, so this is refused at
  // once instead of expanding 10^12 empty copies (without the charge this test hangs).
  EXPECT_THROW(compile_regex("(((){10000}){10000}){10000}", byte_index()), Error);
}

TEST(Regex, MultiByteCharactersOfSetsWithOneTargetOrSeveral) {
  // Sets whose multi-byte sequences lead to the same place share continuation states; sets
  // leading to different places must not. Every text of up to four characters over an
  // alphabet of 1- to 4-byte characters, against the language written out on code points.
  const auto g = compile_regex("[^a]x|a[^b]y|[^c]z|(?:[^a]|a(?:[^b]|b[^c]))w", byte_index());
  const std::vector<std::string> alphabet = {
      "a", "b", "c", "w", "x", "y", "z", "\xC3\xA9", "\xE4\xB8\xAD", "\xF0\x9F\x98\x80"};
  auto in_language = [](const std::vector<std::string>& cps) {
    const size_t n = cps.size();
    if (n == 2 && cps[0] != "a" && cps[1] == "x") return true;
    if (n == 3 && cps[0] == "a" && cps[1] != "b" && cps[2] == "y") return true;
    if (n == 2 && cps[0] != "c" && cps[1] == "z") return true;
    if (n == 2 && cps[0] != "a" && cps[1] == "w") return true;
    if (n == 3 && cps[0] == "a" && cps[1] != "b" && cps[2] == "w") return true;
    return n == 4 && cps[0] == "a" && cps[1] == "b" && cps[2] != "c" && cps[3] == "w";
  };
  std::vector<std::vector<std::string>> texts{{}};
  int checked = 0;
  for (size_t length = 1; length <= 4; ++length) {
    std::vector<std::vector<std::string>> longer;
    for (const auto& prefix : texts) {
      for (const std::string& c : alphabet) {
        longer.push_back(prefix);
        longer.back().push_back(c);
      }
    }
    texts = std::move(longer);
    for (const auto& cps : texts) {
      std::string text;
      for (const std::string& c : cps) text += c;
      EXPECT_EQ(accepts(g, text), in_language(cps)) << "text '" << text << "'";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 10 + 100 + 1000 + 10000);
}

TEST(Regex, OneJsonStringCharacterInEachSpelling) {
  // json_char_regex: one character's spellings inside a JSON string. Names and canonical text
  // write a plain character only raw; "any escape" also takes \uXXXX in either case, and \/.
  using jsonschema::CodePointSet;
  using jsonschema::StringSpelling;
  struct Case {
    char32_t cp;
    std::string raw;
    std::string escaped;  // its \uXXXX spelling (BMP) or surrogate pair
  };
  const std::vector<Case> cases = {{U' ', " ", "\\u0020"},
                                   {U'a', "a", "\\u0061"},
                                   {U'/', "/", "\\u002F"},
                                   {0x7F, "\x7F", "\\u007f"},
                                   {0xE9, "\xC3\xA9", "\\u00E9"},
                                   {0xE000, "\xEE\x80\x80", "\\ue000"},
                                   {0x10FFFF, "\xF4\x8F\xBF\xBF", "\\udbff\\udfff"}};
  for (const Case& c : cases) {
    for (StringSpelling spelling :
         {StringSpelling::kName, StringSpelling::kCanonical, StringSpelling::kAnyEscape}) {
      const std::string regex = jsonschema::json_char_regex(CodePointSet::of(c.cp), spelling);
      const auto g = compile_regex(regex, byte_index());
      const bool any = spelling == StringSpelling::kAnyEscape;
      EXPECT_TRUE(accepts(g, c.raw)) << regex;
      EXPECT_EQ(accepts(g, c.escaped), any) << regex;
      EXPECT_EQ(accepts(g, "\\/"), any && c.cp == U'/') << regex;
      EXPECT_FALSE(accepts(g, c.raw + c.raw)) << regex;
    }
  }
  // Quote, backslash and control characters are never raw.
  for (char32_t cp : {char32_t{'"'}, char32_t{'\\'}, char32_t{'\n'}, char32_t{0x01}}) {
    const std::string regex =
        jsonschema::json_char_regex(CodePointSet::of(cp), StringSpelling::kCanonical);
    const auto g = compile_regex(regex, byte_index());
    EXPECT_FALSE(accepts(g, std::string(1, static_cast<char>(cp)))) << regex;
  }
}

TEST(Regex, SupportedSyntax) {
  auto index = byte_index();
  auto match = [&](const std::string& pattern, const std::string& text) {
    return accepts(compile_regex(pattern, index), text);
  };
  EXPECT_TRUE(match("^\\d{3}-\\d{4}$", "555-1234"));
  EXPECT_FALSE(match("^\\d{3}-\\d{4}$", "555-12345"));
  EXPECT_TRUE(match("\\w+@\\w+\\.com", "a_1@b2.com"));
  EXPECT_TRUE(match("\\s", "\xE3\x80\x80"));  // U+3000 is ECMAScript white space
  EXPECT_FALSE(match("\\S", "\xE3\x80\x80"));
  EXPECT_TRUE(match("\\S", "\xE2\x82\xAC"));
  EXPECT_TRUE(match(".", "\xF0\x9F\x98\x80"));  // one code point, four bytes
  EXPECT_FALSE(match(".", "\n"));
  EXPECT_TRUE(match("\\uD83D\\uDE00", "\xF0\x9F\x98\x80"));  // a surrogate pair is one code point
  EXPECT_TRUE(match("\\u{1F600}", "\xF0\x9F\x98\x80"));
  EXPECT_TRUE(match("[\\u00e0-\\u00e5]+", "\xC3\xA0\xC3\xA5"));
  EXPECT_FALSE(match("[^\\u00e0-\\u00e5]", "\xC3\xA1"));
  EXPECT_TRUE(match("[^a]", "\xC3\xA1"));
  EXPECT_TRUE(match("(?<year>\\d{4})-(?:\\d\\d)", "2024-05"));
  EXPECT_TRUE(match("a+?b*?c??", "aab"));
  EXPECT_TRUE(match("a{2,}", "aaaa"));
  EXPECT_FALSE(match("a{2,}", "a"));
  EXPECT_TRUE(match("x{", "x{"));  // Annex B: a '{' that starts no quantifier is literal
  EXPECT_TRUE(match("[\\b]", "\b"));
  EXPECT_TRUE(match("\\cJ", "\n"));
  EXPECT_TRUE(match("[\\d-z]", "-"));  // a class escape next to '-' makes it literal
  EXPECT_TRUE(match("\\/\\.\\*", "/.*"));
  EXPECT_TRUE(match("", ""));
  EXPECT_TRUE(match("a|", ""));
  EXPECT_TRUE(match("[]|b", "b"));  // an empty class matches nothing, the other branch still does
  // A class text met again reuses the first one's set (regex_parser's class_node).
  EXPECT_TRUE(match("[\\]a][\\]a]", "]a"));
  EXPECT_TRUE(match("[\\]a][\\]a]", "a]"));
  EXPECT_FALSE(match("[\\]a][\\]a]", "a\\"));
  EXPECT_TRUE(match("[^a-c][^a-c]x[a-c]", "zzxb"));
  EXPECT_FALSE(match("[^a-c][^a-c]x[a-c]", "zaxb"));
  EXPECT_FALSE(match("[][]|b", "a"));
}

// Random patterns over {a, b, c} against std::regex (ECMAScript; regex_match = full match).
// Kept small: std::regex backtracks, exponentially on nested quantifiers.
std::string random_pattern(std::mt19937& rng, int depth) {
  std::uniform_int_distribution<int> pick(0, 99);
  std::string out;
  const int n_items = 1 + pick(rng) % 3;
  for (int i = 0; i < n_items; ++i) {
    const int kind = pick(rng);
    std::string atom;
    if (kind < 35) {
      atom = std::string(1, static_cast<char>('a' + pick(rng) % 3));
    } else if (kind < 45) {
      atom = "[ab]";
    } else if (kind < 52) {
      atom = "[^a]";
    } else if (kind < 58) {
      atom = ".";
    } else if (kind < 63) {
      atom = "[a-b]";
    } else if (depth < 2) {
      atom = "(" + random_pattern(rng, depth + 1);
      if (pick(rng) < 40) atom += "|" + random_pattern(rng, depth + 1);
      atom += ")";
    } else {
      atom = "c";
    }
    const int q = pick(rng);
    if (q < 15) {
      atom += "*";
    } else if (q < 25) {
      atom += "+";
    } else if (q < 35) {
      atom += "?";
    } else if (q < 42) {
      const int m = pick(rng) % 3;
      atom += "{" + std::to_string(m) + "," + std::to_string(m + pick(rng) % 3) + "}";
    } else if (q < 45) {
      atom += "{" + std::to_string(pick(rng) % 3) + "}";
    }
    out += atom;
  }
  if (depth == 0 && pick(rng) < 15) out += "|" + random_pattern(rng, 1);
  return out;
}

TEST(Regex, AgreesWithStdRegexOnRandomPatternsAndStrings) {
  std::mt19937 rng(1234);
  auto index = byte_index();
  std::uniform_int_distribution<int> len(0, 6);
  std::uniform_int_distribution<int> ch(0, 3);
  const char alphabet[] = {'a', 'b', 'c', 'd'};
  int n_checked = 0;
  int n_matches = 0;
  int n_refused = 0;
  // A pattern past the budget is refused with a clear error (the automaton itself is built on
  // demand, so its size alone no longer refuses one).
  const CompileLimits limits{std::chrono::milliseconds(5000), 100'000};
  for (int p = 0; p < 250; ++p) {
    const std::string pattern = random_pattern(rng, 0);
    std::regex oracle(pattern, std::regex::ECMAScript);
    std::shared_ptr<const CompiledGrammar> compiled;
    try {
      compiled = compile_regex(pattern, index, limits);
    } catch (const Error& e) {
      ASSERT_NE(std::string(e.what()).find("constraint too complex"), std::string::npos)
          << "/" << pattern << "/: " << e.what();
      ++n_refused;
      continue;
    }
    for (int s = 0; s < 40; ++s) {
      std::string text;
      const int n = len(rng);
      for (int i = 0; i < n; ++i) text += alphabet[ch(rng)];
      const bool expected = std::regex_match(text, oracle);
      ASSERT_EQ(accepts(compiled, text), expected)
          << "pattern /" << pattern << "/ text '" << text << "'";
      ++n_checked;
      n_matches += expected ? 1 : 0;
    }
  }
  EXPECT_LT(n_refused, 8);
  // The generator must exercise both outcomes, or the comparison proves little.
  EXPECT_GT(n_matches, n_checked / 20);
  EXPECT_LT(n_matches, n_checked - n_checked / 20);
}

}  // namespace
}  // namespace llms::structured
