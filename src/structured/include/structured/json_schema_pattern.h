// structured/json_schema_pattern: JSON Schema `pattern` regexes as code-point languages.
//
// Internal to the JSON Schema compiler (public only for its tests). A `pattern` is an ECMA-262
// regex searched (unanchored unless ^...$) in the *decoded* string, while the grammar matches the
// JSON text, so a pattern is parsed here into a small AST over code-point sets (with the implicit
// search prefix and suffix made explicit), then written back as a regex over JSON string content
// in which every character class admits the escaped spellings too.
//
// Anchors may stand anywhere their meaning is a language: ^ where only empty text can precede it
// (the start of an alternative, of a group that starts one, ...) and $ where only empty text can
// follow; ^(a|b$)c and (^a|b) are fine, an anchor inside a repetition is refused.
//
// Semantics, where ECMA-262 and Python's re (the usual reference validator) differ, are the
// stricter of the two, so the language is never larger than either: `.` excludes \n \r \u2028
// \u2029; \d \w are ASCII; \s is ECMA's whitespace without U+FEFF; \S excludes the whitespace of
// both; `$` is the end of the string only. Refused, naming the construct: anchors elsewhere than
// at the start/end of a top-level alternative, backreferences, lookaround, \b \B, inline flags,
// Unicode property escapes, unknown letter escapes, `[]`/`[^]`, `{,n}` (the two engines disagree).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "structured/compile_budget.h"
#include "structured/json_schema_code_points.h"

namespace llms::structured::jsonschema {

inline constexpr int64_t kUnbounded = -1;
inline constexpr int64_t kMaxPatternRepeat = 10000;  // the grammar format's {m,n} limit

struct PatternNode {
  enum class Kind {
    kSet,          // one code point of `set` (an empty set matches nothing)
    kConcat,       // children in sequence (no children: the empty string)
    kAlternation,  // any one child (no children: nothing)
    kRepeat,       // children[0] between `min` and `max` times (max kUnbounded: no bound)
    kStartAnchor,  // ^ and $: only while parsing; parse_pattern's result has none
    kEndAnchor,
  };
  Kind kind = Kind::kConcat;
  CodePointSet set;
  std::vector<PatternNode> children;
  int64_t min = 0, max = 0;

  static PatternNode of_set(CodePointSet s);
  static PatternNode concat(std::vector<PatternNode> parts);
  static PatternNode alternation(std::vector<PatternNode> options);
  static PatternNode repeat(PatternNode child, int64_t lo, int64_t hi);
  static PatternNode nothing() { return alternation({}); }
};

// Lengths in code points of the strings of a language.
struct LengthRange {
  int64_t min = 0;
  int64_t max = 0;  // kUnbounded: no bound
};

// Parses `pattern` and returns the language of the strings it is found in (search semantics:
// ^ and $ decide whether any text may precede or follow). Throws llms::Error(kInvalidArgument)
// whose message names the construct ("lookahead (?= is not supported") or the syntax error.
PatternNode parse_pattern(std::string_view pattern, CompileBudget& budget);

// The same language with empty parts removed; nothing() when the language is empty.
PatternNode simplify_pattern(const PatternNode& node);
bool is_empty_language(const PatternNode& simplified);

// True when a simplified language holds every string (".*" searched, "^[a-z]*" searched, ...).
bool is_universal_language(const PatternNode& simplified);

// Lengths of a non-empty simplified language.
LengthRange pattern_length(const PatternNode& simplified);

// The strings of the language whose length is within [min_length, max_length] (max kUnbounded:
// none), written as a pattern again, or nullopt when that intersection cannot be written by
// adjusting repetition counts (the caller then refuses the schema).
std::optional<PatternNode> constrain_pattern_length(const PatternNode& simplified,
                                                    int64_t min_length, int64_t max_length,
                                                    CompileBudget& budget);

// A regex (grammar terminal syntax) matching the JSON string contents (no quotes) whose
// decoded text is in the language of a non-empty simplified pattern.
std::string pattern_to_json_regex(const PatternNode& simplified, StringSpelling spelling,
                                  CompileBudget& budget);

// The strings of a simplified language except the (valid UTF-8) strings of `excluded`, by
// Brzozowski derivatives along the trie of the excluded strings. The result is simplified.
PatternNode pattern_minus_strings(const PatternNode& simplified,
                                  const std::vector<std::string>& excluded, CompileBudget& budget);

// True when no string is in both languages (a search of the product of their automata).
bool languages_disjoint(const PatternNode& a, const PatternNode& b, CompileBudget& budget);

// True when the code points of valid UTF-8 `text` form a string of the language.
bool pattern_matches(const PatternNode& node, std::string_view text, CompileBudget& budget);

}  // namespace llms::structured::jsonschema
