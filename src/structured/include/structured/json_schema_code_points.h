// structured/json_schema_code_points: sets of code points, and the regex (grammar terminal
// syntax) that matches one of them *as it is written inside a JSON string*.
//
// Internal to the JSON Schema compiler (public only so that its tests can reach it). A schema
// constrains the decoded string ("é"), the grammar matches the JSON text ("é" or "\u00e9"), so
// every character class of a pattern or format becomes the alternation of its raw UTF-8 form and
// its escaped forms (RFC 8259 section 7). Lone surrogates are never produced: an escaped
// character outside the BMP is a \uD8xx\uDCxx pair, so one matched unit is one code point and
// code-point lengths stay exact.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace llms::structured::jsonschema {

inline constexpr char32_t kMaxCodePoint = 0x10FFFF;

// A set of Unicode scalar values and surrogates alike (patterns may name any code point), kept
// as sorted, disjoint, non-adjacent closed ranges.
class CodePointSet {
 public:
  CodePointSet() = default;
  static CodePointSet of(char32_t cp) { return range(cp, cp); }
  static CodePointSet range(char32_t lo, char32_t hi);
  static CodePointSet all() { return range(0, kMaxCodePoint); }

  void add(char32_t lo, char32_t hi);
  void add(const CodePointSet& other);
  CodePointSet complement() const;
  CodePointSet intersect(const CodePointSet& other) const;
  CodePointSet minus(const CodePointSet& other) const { return intersect(other.complement()); }

  bool contains(char32_t cp) const;
  bool empty() const { return ranges_.empty(); }
  bool operator==(const CodePointSet& other) const { return ranges_ == other.ranges_; }
  const std::vector<std::pair<char32_t, char32_t>>& ranges() const { return ranges_; }

 private:
  std::vector<std::pair<char32_t, char32_t>> ranges_;
};

// How a string's characters may be written.
enum class StringSpelling {
  kAnyEscape,  // raw, short escapes (\" \\ \/ \b \f \n \r \t) or \uXXXX (pairs above the BMP)
  kCanonical,  // exactly one spelling per code point (what nlohmann::json::dump writes)
  kName,       // property names: raw characters, \" and \\ only (no control characters)
};

// A regex that matches exactly one character of `set` written inside a JSON string, in any of
// the spellings `spelling` allows. Surrogate code points in `set` are ignored (they are not
// characters of valid text). Returns an empty string when no character can be written.
std::string json_char_regex(const CodePointSet& set, StringSpelling spelling);

// The canonical JSON spelling of one code point inside a string (without quotes).
void append_canonical_json_char(char32_t cp, std::string& out);

// The canonical JSON string literal of valid UTF-8 `text`, with quotes. Throws
// llms::Error(kInvalidArgument) on invalid UTF-8.
std::string canonical_json_string(const std::string& text);

// Regex syntax helpers shared by the compiler's parts.
// One code point as a regex atom (escaped when it is not a plain ASCII letter or digit).
void append_regex_code_point(char32_t cp, std::string& out);
// `text` (valid UTF-8) matched literally.
std::string regex_literal(const std::string& text);

}  // namespace llms::structured::jsonschema
