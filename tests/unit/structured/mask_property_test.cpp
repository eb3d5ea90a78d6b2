// Exactness of fill_mask as a property: on small vocabularies (every single byte, plus tokens
// that cross symbol boundaries and split UTF-8 characters), along random walks through many
// grammars, the mask equals the brute-force set of tokens a copy of the matcher accepts, and every
// position a walk reaches can still be completed into a sentence (no dead prefix is viable).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "grammar_test_support.h"
#include "structured/json_schema.h"
#include "util/error.h"

namespace llms::structured {
namespace {

using testing::allowed_ids;
using testing::brute_force_ids;
using testing::Completion;
using testing::completion;
using testing::kStopId;

// Tokens that cross symbol boundaries, split UTF-8 characters, and are long (past
// kShortTokenBytes: a word, one that ends a string and goes on, one of many words).
const std::vector<std::string>& extra_tokens() {
  static const std::vector<std::string> tokens{"\"",
                                               "\":",
                                               "\",",
                                               "\"}",
                                               "\"]",
                                               ",\"",
                                               "{\"",
                                               "[\"",
                                               "}]",
                                               "],",
                                               "},",
                                               ": ",
                                               ", ",
                                               " \"",
                                               "\n",
                                               "\n ",
                                               "  ",
                                               "ab",
                                               "abc",
                                               "a\"",
                                               "b\",",
                                               "12",
                                               "0.",
                                               ".5",
                                               "-1",
                                               "true",
                                               "tru",
                                               "nul",
                                               "null,",
                                               "\\\"",
                                               "\\n",
                                               "\\u00",
                                               "\xC3\xA9",
                                               "\xA9\"",
                                               "\xE4\xB8\xAD",
                                               "\xE4\xB8\xAD\xE6\x96\x87",
                                               "\xE4\xB8",
                                               "\xAD\xE6",
                                               "\xCE\xB1",
                                               "\xCE\xB1\xCE\xB2",
                                               "\xCF\x89\"",
                                               "(1",
                                               "+(",
                                               ")*",
                                               "1+",
                                               "xyz",
                                               "xx",
                                               "yz",
                                               "zy",
                                               "a.b",
                                               ".\n",
                                               "\x01",
                                               "\xF0\x9F\x98\x80",
                                               "\xF0\x9F",
                                               "{\"name\"",
                                               "\"name\": \"",
                                               "\"tags\":[",
                                               "\"]}",
                                               "aaaaa",
                                               "aaaaaa\"",
                                               "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
                                               "abcdefghijklmnopqrstuvwxyz0123456789AB\",",
                                               "a b c d e f g h i j k l m n o p q r s t ",
                                               "\xC3\xA9\xC3\xA9\xC3\xA9",
                                               "}}",
                                               "]]",
                                               "[[",
                                               "{}",
                                               "[]",
                                               "0",
                                               "00",
                                               "\"\"",
                                               "yes",
                                               "no"};
  return tokens;
}

std::shared_ptr<const TokenIndex> property_index() {
  static const auto index = testing::byte_index(extra_tokens());
  return index;
}

// Walks `n_walks` random paths of up to `max_steps` tokens, checking the mask at every position
// and completability every 8 steps and at the end of each walk. `undecided` (if given) counts
// completion searches cut short by their bounds instead of failing on them.
void check_walks(const std::shared_ptr<const CompiledGrammar>& g, uint32_t seed, int n_walks,
                 int max_steps, const std::string& label, int* undecided = nullptr,
                 int completion_depth = 48, int completion_every = 8) {
  std::mt19937 rng(seed);
  auto check_completion = [&](const Matcher& m, int w, int step) {
    const Completion c = completion(m, completion_depth, 4000);
    if (c == Completion::kUndecided && undecided != nullptr) {
      ++*undecided;
      return;
    }
    ASSERT_EQ(c, Completion::kFound) << label << ", walk " << w << " step " << step;
  };
  for (int w = 0; w < n_walks; ++w) {
    Matcher m(g);
    int step = 0;
    for (; step < max_steps; ++step) {
      const auto mask = allowed_ids(m);
      const auto brute = brute_force_ids(m);
      ASSERT_EQ(mask, brute) << label << ", walk " << w << " step " << step;
      std::vector<int32_t> text_ids;
      for (int32_t id : mask) {
        if (id != kStopId) text_ids.push_back(id);
      }
      if (text_ids.empty()) break;
      const int32_t pick =
          text_ids[std::uniform_int_distribution<size_t>(0, text_ids.size() - 1)(rng)];
      ASSERT_TRUE(m.accept_token(pick));
      if (step % completion_every == completion_every - 1) {
        check_completion(m, w, step);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
    check_completion(m, w, step);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

const char* kJsonGrammar = R"G(
root ::= value
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( "," ws member )* )? "}"
member ::= string ws ":" ws value ws
array ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )?
ws ::= [ \n]{0,3}
)G";

TEST(MaskProperty, RecursiveJson) {
  check_walks(compile_grammar(kJsonGrammar, property_index()), 1, 40, 30, "json");
}

TEST(MaskProperty, SchemaShapedWithBoundedStrings) {
  const char* text = R"G(
root ::= "{" ws "\"name\"" ws ":" ws str ws "," ws "\"tags\"" ws ":" ws "[" ws ( str ( ws "," ws str ){0,2} )? ws "]" ws "}"
str ::= "\"" [^"\\\x00-\x1f]{0,5} "\""
ws ::= " "?
)G";
  check_walks(compile_grammar(text, property_index()), 2, 40, 30, "schema");
}

TEST(MaskProperty, CountedRegions) {
  // Repetitions of more than kMaxExpandedCopies are counted by the parser: bounded JSON strings
  // (whose masks abstract the count far from the bounds), open-ended counts, counted calls of a
  // recursive rule (array items), a region that must fall back to expansion, and two regions
  // side by side.
  const char* text = R"G(
root ::= "{" str30 "," str60 "," items "," tail "}"
str30 ::= "\"" [^"\\\x00-\x1f]{0,30} "\""
str60 ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\nt] ){25,60} "\""
items ::= "[" ( value ( "," value ){0,40} )? "]"
value ::= [0-9] | "[" value "]"
tail ::= ( "ab" ){26,} | ( "x"{0,30} "y" )* | words
words ::= /"(\S+\s+){0,30}\S+"/
)G";
  // Completions here are long (counted minimums): searched only at the end of each walk.
  check_walks(compile_grammar(text, property_index()), 8, 16, 40, "counted", nullptr, 200, 1000);
}

TEST(MaskProperty, CountedCharacterSets) {
  // Repetitions of one character set past kMaxExpandedSetCopies are counted (JSON Schema's
  // bounded whitespace between every token): runs up to the bound and past it, exact counts,
  // one such region after another (back to back, and with an optional one between), and one
  // inside a counted region (expanded there).
  const char* text = R"G(
root ::= "{" ws "\"k\"" ws ":" ws digits ws "," ws word ws "," ws pad ws "," ws list ws ws "}" tail
tail ::= ws ws? ws
ws ::= [ \t\n]{0,6}
digits ::= [0-9]{5}
word ::= [a-c]{2,7} [ ]{0,5} "!"
pad ::= "<" [ ]{5,} ">"
list ::= "[" ( [xy]{0,8} "," ){0,30} "]"
)G";
  check_walks(compile_grammar(text, property_index()), 11, 40, 40, "counted sets", nullptr, 64, 4);
}

TEST(MaskProperty, SharedContinuationBytes) {
  // Multi-byte sequences of character sets share their continuation states when they lead to
  // the same state (a name other than "abc": a complement class at each character); sets
  // leading to different states, overlapping sets, partial-UTF-8 tokens and a counted region
  // must keep them apart.
  const char* text = R"G(
root ::= ( name | other ){1,4} "."
name ::= "\"" ( [^a"\\\x00-\x1f] | "a" ( [^b"\\\x00-\x1f] | "b" [^c"\\\x00-\x1f] ) ) [^"\\\x00-\x1f]* "\""
other ::= [^a.\x00-\x1f] "1" | "a" [^b.\x00-\x1f] "2" | [\u00e0-\u4fff] "4" | [\u4e00-\u9fff]{2,9} "5"
)G";
  check_walks(compile_grammar(text, property_index()), 12, 40, 30, "continuations");
}

TEST(MaskProperty, LeftRecursiveExpressions) {
  const char* text = R"G(
root ::= expr
expr ::= expr ("+" | "-") term | term
term ::= term "*" factor | factor
factor ::= [0-9]+ | "(" expr ")" | "-" factor
)G";
  check_walks(compile_grammar(text, property_index()), 3, 40, 25, "expr");
}

TEST(MaskProperty, NullableAndAmbiguous) {
  const char* text = R"G(
root ::= a b a | c
a ::= "x"* | a "y"
b ::= "y" | a "z" | ""
c ::= c c | "ab" | ""
)G";
  check_walks(compile_grammar(text, property_index()), 4, 40, 20, "nullable");
}

TEST(MaskProperty, RegexTerminalsAndCharacterClasses) {
  const char* text = R"G(
root ::= line+
line ::= /[a-z]{1,3}\.[^\n]*/ "\n" | [\u03b1-\u03c9]+ ("\u00e9" | "\u4e2d\u6587")* [^a-z]{1,2} "\n"
)G";
  check_walks(compile_grammar(text, property_index()), 5, 40, 25, "classes");
}

TEST(MaskProperty, AnyCharacterBodies) {
  // `.`/[^"] bodies absorb nearly every token: the class shortcut must agree with the walk.
  const char* text = R"G(
root ::= "<" .{0,4} ">" | "\"" [^"]* "\"" | "'" [^'\n\\\x00-\x1f]* "'"
)G";
  check_walks(compile_grammar(text, property_index()), 6, 40, 20, "any");
}

TEST(MaskProperty, PatternTextBodies) {
  // The bodies JSON Schema patterns compile to: \S and \s refuse U+0085 and U+FEFF (the regex
  // engines disagree on them) and `.` the line terminators, so no plain JSON string class
  // absorbs a character there and the pattern classes (token_trie.h) do, inside counted words
  // and capped runs alike. Tokens holding the refused code points, DEL and no-break spaces
  // must be decided by the walk.
  const char* text = R"G(
root ::= "\"" ( word ( sp{1,3} word ){0,30} )? "\"" | "'" dot{0,40} "'" | "<" word{1,3} ">"
word ::= [^ \t\n\r\x0b\x0c\u00a0\u2028\u2029"\\\x00-\x1f\x7f\u0085\ufeff]{1,6}
sp ::= [ \t\u00a0\u2028]
dot ::= [^'\\\x00-\x1f\x7f\u0085\u2028\u2029\ufeff]
)G";
  std::vector<std::string> tokens = extra_tokens();
  for (const char* t :
       {"\xC2\x85", "a\xC2\x85", "\xC2\xA0",
        "a\xC2\xA0"
        "b",
        "\xE2\x80\xA8", "b\xE2\x80\xA8", "\xEF\xBB\xBF",
        "\xEF\xBB\xBF"
        "a",
        "\x7F", "a\x7F", "ab cd", "abcdef", "abcdefg", "a  b", "a    b", "ab\tc", "'ab'"}) {
    tokens.emplace_back(t);
  }
  check_walks(compile_grammar(text, testing::byte_index(tokens)), 11, 40, 40, "pattern text",
              nullptr, 200, 1000);
}

TEST(MaskProperty, JsonSchemaPatterns) {
  // Real pattern strings through the JSON Schema compiler (compact): words counted by the
  // parser with a maxLength cap on the words, `.` bodies, and the whitespace that only one of
  // the pattern classes holds (U+3000, U+2009, U+1680, U+202F are \s in both engines).
  std::vector<std::string> tokens = extra_tokens();
  for (const char* t : {"\xC2\x85", "a\xC2\x85", "\xC2\xA0", "\xE3\x80\x80", "a\xE3\x80\x80",
                        "\xE2\x80\x89", "\xE1\x9A\x80", "\xE2\x80\xAF", "\xE2\x80\xA8",
                        "\xEF\xBB\xBF", "\x7F", "ab cd", "abcdef", "a  b", "x y\"", "\" a"}) {
    tokens.emplace_back(t);
  }
  const auto index = testing::byte_index(tokens);
  JsonSchemaOptions options;
  options.whitespace = JsonSchemaOptions::Whitespace::kCompact;
  const char* schemas[] = {
      R"s({"type": "string", "pattern": "^(\\S+\\s+){0,5}\\S*$"})s",
      R"s({"type": "string", "pattern": "^$|(^(?:\\S+\\s+){0,30}\\S+$)", "maxLength": 1000})s",
      R"s({"type": "string", "pattern": "^.{0,40}$"})s",
      R"s({"type": "string", "pattern": "^[^\\s]{2,30}$"})s",
  };
  uint32_t seed = 12;
  for (const char* schema : schemas) {
    CompileBudget budget;
    const std::string grammar =
        json_schema_to_grammar(nlohmann::ordered_json::parse(schema), options, budget);
    check_walks(compile_grammar(grammar, index), seed++, 30, 30, schema, nullptr, 200, 1000);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(MaskProperty, Choices) {
  const std::vector<std::string> choices{"yes", "no",  "null", "\xE4\xB8\xAD\xE6\x96\x87",
                                         "ab",  "abc", "a"};
  check_walks(compile_choices(choices, property_index()), 7, 20, 10, "choices");
}

// Random regexes with UTF-8 atoms and classes.
std::string random_regex(std::mt19937& rng, int depth) {
  std::uniform_int_distribution<int> pick(0, 99);
  const char* atoms[] = {"a",      "b",   "\"",  ",",        "[ab]",
                         "[^a\"]", ".",   "\\d", "\xC3\xA9", "[\\u4e00-\\u4e2f]",
                         "\\.",    "\\w", "\\s", "x",        "[^\\n]"};
  std::string out;
  const int n_items = 1 + pick(rng) % 4;
  for (int i = 0; i < n_items; ++i) {
    std::string atom;
    if (depth < 2 && pick(rng) < 20) {
      atom = "(" + random_regex(rng, depth + 1) + "|" + random_regex(rng, depth + 1) + ")";
    } else {
      atom = atoms[pick(rng) % 15];
    }
    const int q = pick(rng);
    if (q < 20) {
      atom += "*";
    } else if (q < 30) {
      atom += "+";
    } else if (q < 40) {
      atom += "?";
    } else if (q < 50) {
      atom += "{1,3}";
    }
    out += atom;
  }
  return out;
}

TEST(MaskProperty, RandomRegexes) {
  std::mt19937 rng(99);
  int n_refused = 0;
  for (int i = 0; i < 60; ++i) {
    const std::string pattern = random_regex(rng, 0);
    std::shared_ptr<const CompiledGrammar> g;
    try {
      g = compile_regex(pattern, property_index(),
                        CompileLimits{std::chrono::milliseconds(5000), 200'000});
    } catch (const Error& e) {
      // A regex past the compile budget is refused with a clear error; it must stay rare here.
      ASSERT_NE(std::string(e.what()).find("constraint too complex"), std::string::npos)
          << e.what();
      ++n_refused;
      continue;
    }
    check_walks(g, 100 + static_cast<uint32_t>(i), 4, 12, "/" + pattern + "/");
  }
  EXPECT_LT(n_refused, 4);
}

// Random recursive grammars over a few rules.
std::string random_grammar(std::mt19937& rng) {
  std::uniform_int_distribution<int> pick(0, 99);
  const int n_rules = 2 + pick(rng) % 3;
  std::string text;
  for (int r = 0; r < n_rules; ++r) {
    text += (r == 0 ? std::string("root") : "r" + std::to_string(r)) + " ::= ";
    const int n_alts = 1 + pick(rng) % 3;
    for (int a = 0; a < n_alts; ++a) {
      if (a > 0) text += " | ";
      const int n_items = pick(rng) % 4;
      for (int i = 0; i < n_items; ++i) {
        const int kind = pick(rng);
        std::string item;
        if (kind < 30) {
          const char* lits[] = {"\"a\"", "\"b\"", "\"ab\"", "\"\\u00e9\"", "\",\"", "\"\\\"\""};
          item = lits[pick(rng) % 6];
        } else if (kind < 45) {
          const char* classes[] = {"[ab]", "[^a\"]", "[0-9]", "."};
          item = classes[pick(rng) % 4];
        } else if (kind < 80) {
          const int target = pick(rng) % n_rules;
          item = target == 0 ? "root" : "r" + std::to_string(target);
        } else {
          item = "(\"x\" | \"y\" r" + std::to_string(1 + pick(rng) % (n_rules - 1)) + ")";
        }
        const int q = pick(rng);
        if (q < 12) {
          item += "*";
        } else if (q < 20) {
          item += "?";
        } else if (q < 25) {
          item += "{0,2}";
        }
        text += item + " ";
      }
      if (n_items == 0) text += "\"\"";
    }
    text += "\n";
  }
  return text;
}

TEST(MaskProperty, RandomRecursiveGrammars) {
  std::mt19937 rng(7);
  int n_compiled = 0;
  int n_undecided = 0;
  for (int i = 0; i < 70; ++i) {
    const std::string text = random_grammar(rng);
    std::shared_ptr<const CompiledGrammar> g;
    try {
      g = compile_grammar(text, property_index());
    } catch (const Error& e) {
      // Only "matches no text" is expected from this generator.
      ASSERT_NE(std::string(e.what()).find("matches no text"), std::string::npos)
          << e.what() << "\n"
          << text;
      continue;
    }
    ++n_compiled;
    check_walks(g, 1000 + static_cast<uint32_t>(i), 3, 10, text, &n_undecided);
  }
  EXPECT_GT(n_compiled, 35);
  // Searches of ambiguous grammars may be cut short; a dead prefix fails above, never here.
  EXPECT_LT(n_undecided, n_compiled / 4);
}

}  // namespace
}  // namespace llms::structured
