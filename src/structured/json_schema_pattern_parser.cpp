// structured/json_schema_pattern_parser: ECMA-262 patterns -> PatternNode (see
// json_schema_pattern.h): the parser, and the readings of anchors.
#include <algorithm>
#include <memory>
#include <unordered_set>

#include "regex_whitespace.h"
#include "structured/json_schema_pattern.h"
#include "util/error.h"
#include "util/utf8.h"

namespace llms::structured::jsonschema {

namespace {

constexpr int kMaxGroupDepth = 64;

CodePointSet digit_set() { return CodePointSet::range(U'0', U'9'); }

CodePointSet word_set() {
  CodePointSet set = CodePointSet::range(U'0', U'9');
  set.add(U'A', U'Z');
  set.add(U'a', U'z');
  set.add(U'_', U'_');
  return set;
}

// What both engines call whitespace (regex_whitespace.h): \s.
CodePointSet both_engines_space_set() {
  CodePointSet set;
  for (const CodePointInterval& i : kSpaceInBothEngines) set.add(i.lo, i.hi);
  return set;
}

// What either engine calls whitespace; \S excludes all of it.
CodePointSet any_engine_space_set() {
  CodePointSet set = both_engines_space_set();
  for (const CodePointInterval& i : kSpaceInPythonOnly) set.add(i.lo, i.hi);
  set.add(kSpaceInEcmaOnly.lo, kSpaceInEcmaOnly.hi);
  return set;
}

CodePointSet dot_set() {
  CodePointSet set = CodePointSet::all();
  for (char32_t cp : {char32_t{0x0A}, char32_t{0x0D}, char32_t{0x2028}, char32_t{0x2029}}) {
    set = set.minus(CodePointSet::of(cp));
  }
  return set;
}

bool is_hex(char32_t c) {
  return (c >= U'0' && c <= U'9') || (c >= U'a' && c <= U'f') || (c >= U'A' && c <= U'F');
}

uint32_t hex_value(char32_t c) {
  if (c <= U'9') return c - U'0';
  if (c >= U'a') return c - U'a' + 10;
  return c - U'A' + 10;
}

class PatternParser {
 public:
  PatternParser(std::string_view pattern, CompileBudget& budget) : budget_(budget) {
    for (size_t pos = 0; pos < pattern.size();) {
      const Utf8Step step = utf8_step(pattern, pos);
      if (step.kind != Utf8Step::Kind::kValid) fail("the pattern is not valid UTF-8");
      text_.push_back(step.code_point);
      pos += step.length;
    }
  }

  PatternNode parse() {
    PatternNode root = parse_disjunction(0);
    if (!at_end()) fail("an unmatched ')'");
    // Each way of reading the anchors gives an anchor-free language; a side without its
    // anchor is searched: any text may come before or after.
    const PatternNode any_text =
        PatternNode::repeat(PatternNode::of_set(CodePointSet::all()), 0, kUnbounded);
    std::vector<PatternNode> alternatives;
    for (Anchored& option : expand(root)) {
      std::vector<PatternNode> parts;
      if (!option.start) parts.push_back(any_text);
      parts.push_back(std::move(option.node));
      if (!option.end) parts.push_back(any_text);
      alternatives.push_back(PatternNode::concat(std::move(parts)));
    }
    if (alternatives.size() == 1) return std::move(alternatives[0]);
    return PatternNode::alternation(std::move(alternatives));
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(Error::Kind::kInvalidArgument, why);
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char32_t peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : 0;
  }

  PatternNode parse_disjunction(int depth) {
    std::vector<PatternNode> alternatives;
    while (true) {
      std::vector<PatternNode> terms;
      while (!at_end() && peek() != U'|' && peek() != U')')
        terms.push_back(parse_quantified(depth));
      alternatives.push_back(PatternNode::concat(std::move(terms)));
      if (peek() != U'|') break;
      ++pos_;
    }
    if (alternatives.size() == 1) return std::move(alternatives[0]);
    return PatternNode::alternation(std::move(alternatives));
  }

  PatternNode parse_quantified(int depth) {
    budget_.charge(1, "pattern nodes");
    PatternNode atom = parse_atom(depth);
    int64_t lo = 0, hi = 0;
    if (!parse_quantifier(lo, hi)) return atom;
    if (atom.kind == PatternNode::Kind::kStartAnchor ||
        atom.kind == PatternNode::Kind::kEndAnchor) {
      fail("a quantifier cannot follow an anchor");
    }
    if (peek() == U'?') ++pos_;  // lazy: the same language
    if (peek() == U'*' || peek() == U'+' || peek() == U'?' || quantifier_follows()) {
      fail("a quantifier cannot follow another quantifier");
    }
    return PatternNode::repeat(std::move(atom), lo, hi);
  }

  // A valid {m}, {m,} or {m,n} at the current position (a '{' that is not one is a literal).
  bool quantifier_follows() const {
    if (peek() != U'{') return false;
    size_t i = pos_ + 1;
    if (i >= text_.size() || text_[i] < U'0' || text_[i] > U'9') {
      if (i < text_.size() && text_[i] == U',') {
        // Python reads {,n} as {0,n}, ECMA-262 as literal text.
        size_t j = i + 1;
        while (j < text_.size() && text_[j] >= U'0' && text_[j] <= U'9') ++j;
        if (j > i + 1 && j < text_.size() && text_[j] == U'}') {
          throw Error(Error::Kind::kInvalidArgument,
                      "'{,n}' is not supported (regex engines disagree on it)");
        }
      }
      return false;
    }
    while (i < text_.size() && text_[i] >= U'0' && text_[i] <= U'9') ++i;
    if (i < text_.size() && text_[i] == U',') {
      ++i;
      while (i < text_.size() && text_[i] >= U'0' && text_[i] <= U'9') ++i;
    }
    return i < text_.size() && text_[i] == U'}';
  }

  int64_t parse_count() {
    int64_t value = 0;
    while (peek() >= U'0' && peek() <= U'9') {
      value = value * 10 + (peek() - U'0');
      if (value > kMaxPatternRepeat) fail("a repetition count above 10000 is not supported");
      ++pos_;
    }
    return value;
  }

  bool parse_quantifier(int64_t& lo, int64_t& hi) {
    switch (peek()) {
      case U'*':
        ++pos_, lo = 0, hi = kUnbounded;
        return true;
      case U'+':
        ++pos_, lo = 1, hi = kUnbounded;
        return true;
      case U'?':
        ++pos_, lo = 0, hi = 1;
        return true;
      default:
        break;
    }
    if (!quantifier_follows()) return false;
    ++pos_;  // '{'
    lo = parse_count();
    hi = lo;
    if (peek() == U',') {
      ++pos_;
      hi = peek() == U'}' ? kUnbounded : parse_count();
    }
    ++pos_;  // '}'
    if (hi != kUnbounded && hi < lo) fail("a repetition {m,n} with n < m");
    return true;
  }

  PatternNode parse_atom(int depth) {
    const char32_t c = peek();
    switch (c) {
      case U'(':
        return parse_group(depth);
      case U'[':
        return PatternNode::of_set(parse_class());
      case U'.':
        ++pos_;
        return PatternNode::of_set(dot_set());
      case U'\\':
        return parse_escape_atom();
      case U'^':
      case U'$': {
        ++pos_;
        PatternNode anchor;
        anchor.kind = c == U'^' ? PatternNode::Kind::kStartAnchor : PatternNode::Kind::kEndAnchor;
        return anchor;
      }
      case U'*':
      case U'+':
      case U'?':
        fail("a quantifier with nothing to repeat");
      case U')':
        fail("an unmatched ')'");
      default:
        break;
    }
    if (c == U'{' && quantifier_follows()) fail("a quantifier with nothing to repeat");
    ++pos_;
    return PatternNode::of_set(CodePointSet::of(c));
  }

  PatternNode parse_group(int depth) {
    if (depth >= kMaxGroupDepth) fail("groups nested deeper than 64");
    ++pos_;  // '('
    if (peek() == U'?') {
      const char32_t kind = peek(1);
      if (kind == U':') {
        pos_ += 2;
      } else if (kind == U'=' || kind == U'!') {
        fail("lookahead '(?" + std::string(1, static_cast<char>(kind)) + "' is not supported");
      } else if (kind == U'<' && (peek(2) == U'=' || peek(2) == U'!')) {
        fail("lookbehind '(?<" + std::string(1, static_cast<char>(peek(2))) + "' is not supported");
      } else if (kind == U'<' || (kind == U'P' && peek(2) == U'<')) {
        pos_ += kind == U'<' ? 2 : 3;  // a named group: the name does not change the language
        while (!at_end() && peek() != U'>') ++pos_;
        if (at_end()) fail("an unterminated group name");
        ++pos_;
      } else {
        fail("the group syntax '(?" + (kind ? std::string(1, static_cast<char>(kind)) : "") +
             "' (inline flags, atomic groups, ...) is not supported");
      }
    }
    PatternNode inner = parse_disjunction(depth + 1);
    if (peek() != U')') fail("an unterminated group '('");
    ++pos_;
    return inner;
  }

  PatternNode parse_escape_atom() {
    ++pos_;  // '\'
    if (at_end()) fail("a pattern cannot end with '\\'");
    const char32_t c = peek();
    switch (c) {
      case U'd':
        ++pos_;
        return PatternNode::of_set(digit_set());
      case U'D':
        ++pos_;
        return PatternNode::of_set(digit_set().complement());
      case U'w':
        ++pos_;
        return PatternNode::of_set(word_set());
      case U'W':
        ++pos_;
        return PatternNode::of_set(word_set().complement());
      case U's':
        ++pos_;
        return PatternNode::of_set(both_engines_space_set());
      case U'S':
        ++pos_;
        return PatternNode::of_set(any_engine_space_set().complement());
      case U'b':
      case U'B':
        fail("the word boundary '\\" + std::string(1, static_cast<char>(c)) + "' is not supported");
      case U'k':
        fail("the named backreference '\\k' is not supported");
      default:
        break;
    }
    if (c >= U'1' && c <= U'9') fail("backreferences ('\\1'...) are not supported");
    return PatternNode::of_set(CodePointSet::of(parse_char_escape(false)));
  }

  // After the backslash: an escape that denotes one code point.
  char32_t parse_char_escape(bool in_class) {
    const char32_t c = peek();
    ++pos_;
    switch (c) {
      case U'n':
        return 0x0A;
      case U'r':
        return 0x0D;
      case U't':
        return 0x09;
      case U'f':
        return 0x0C;
      case U'v':
        return 0x0B;
      case U'0':
        if (peek() >= U'0' && peek() <= U'9') fail("octal escapes are not supported");
        return 0;
      case U'x': {
        if (!is_hex(peek()) || !is_hex(peek(1))) fail("'\\x' needs two hex digits");
        const char32_t value = hex_value(peek()) * 16 + hex_value(peek(1));
        pos_ += 2;
        return value;
      }
      case U'u':
        return parse_unicode_escape();
      case U'c': {
        const char32_t letter = peek();
        if (!((letter >= U'a' && letter <= U'z') || (letter >= U'A' && letter <= U'Z'))) {
          fail("'\\c' needs a letter");
        }
        ++pos_;
        return letter % 32;
      }
      case U'p':
      case U'P':
        fail("Unicode property escapes ('\\p{...}') are not supported");
      default:
        break;
    }
    if (in_class && c == U'b') return 0x08;
    if ((c >= U'a' && c <= U'z') || (c >= U'A' && c <= U'Z') || (c >= U'0' && c <= U'9')) {
      fail("the escape '\\" + std::string(1, static_cast<char>(c)) + "' is not supported");
    }
    return c;  // escaped punctuation or any other character: itself
  }

  char32_t parse_unicode_escape() {
    if (peek() == U'{') {
      ++pos_;
      uint32_t value = 0;
      size_t digits = 0;
      while (is_hex(peek())) {
        value = value * 16 + hex_value(peek());
        if (value > kMaxCodePoint) fail("'\\u{...}' above U+10FFFF");
        ++pos_, ++digits;
      }
      if (digits == 0 || peek() != U'}') fail("a malformed '\\u{...}' escape");
      ++pos_;
      return value;
    }
    auto hex4 = [&](size_t at, uint32_t& value) {
      value = 0;
      for (size_t i = 0; i < 4; ++i) {
        if (!is_hex(peek(at + i))) return false;
        value = value * 16 + hex_value(peek(at + i));
      }
      return true;
    };
    uint32_t value = 0;
    if (!hex4(0, value)) fail("'\\u' needs four hex digits");
    pos_ += 4;
    // A UTF-16 pair written as two escapes is one code point.
    uint32_t low = 0;
    if (value >= 0xD800 && value <= 0xDBFF && peek() == U'\\' && peek(1) == U'u' && hex4(2, low) &&
        low >= 0xDC00 && low <= 0xDFFF) {
      pos_ += 6;
      return 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00);
    }
    return value;
  }

  CodePointSet parse_class() {
    ++pos_;  // '['
    const bool negated = peek() == U'^';
    if (negated) ++pos_;
    if (peek() == U']') {
      fail("'[]' and '[^]' are not supported (regex engines disagree on them)");
    }
    CodePointSet set;
    while (true) {
      if (at_end()) fail("an unterminated character class '['");
      if (peek() == U']') {
        ++pos_;
        break;
      }
      bool is_single = false;
      char32_t lo = 0;
      CodePointSet item = parse_class_atom(is_single, lo);
      if (peek() == U'-' && peek(1) != U']' && pos_ + 1 < text_.size()) {
        ++pos_;  // '-'
        bool hi_single = false;
        char32_t hi = 0;
        parse_class_atom(hi_single, hi);
        if (!is_single || !hi_single) {
          fail("a class range with an escape like \\d as an end is not supported");
        }
        if (hi < lo) fail("a class range out of order");
        set.add(lo, hi);
      } else {
        set.add(item);
      }
      budget_.charge(1, "pattern nodes");
    }
    return negated ? set.complement() : set;
  }

  CodePointSet parse_class_atom(bool& is_single, char32_t& cp) {
    is_single = false;
    if (peek() != U'\\') {
      cp = peek();
      ++pos_;
      is_single = true;
      return CodePointSet::of(cp);
    }
    ++pos_;
    if (at_end()) fail("an unterminated character class '['");
    switch (peek()) {
      case U'd':
        ++pos_;
        return digit_set();
      case U'D':
        ++pos_;
        return digit_set().complement();
      case U'w':
        ++pos_;
        return word_set();
      case U'W':
        ++pos_;
        return word_set().complement();
      case U's':
        ++pos_;
        return both_engines_space_set();
      case U'S':
        ++pos_;
        return any_engine_space_set().complement();
      case U'B':
        fail("'\\B' is not supported in a class");
      default:
        break;
    }
    if (peek() >= U'1' && peek() <= U'9') fail("backreferences ('\\1'...) are not supported");
    cp = parse_char_escape(true);
    is_single = true;
    return CodePointSet::of(cp);
  }

  // One reading of a pattern's anchors: whether it is pinned to the start and to the end of
  // the text, and its language without anchors.
  struct Anchored {
    bool start = false;
    bool end = false;
    PatternNode node;
  };

  static bool nullable(const PatternNode& node) {
    using Kind = PatternNode::Kind;
    switch (node.kind) {
      case Kind::kSet:
        return false;
      case Kind::kConcat:
        return std::all_of(node.children.begin(), node.children.end(), nullable);
      case Kind::kAlternation:
        return std::any_of(node.children.begin(), node.children.end(), nullable);
      case Kind::kRepeat:
        return node.min == 0 || nullable(node.children[0]);
      default:
        return true;
    }
  }

  static bool has_anchor(const PatternNode& node) {
    using Kind = PatternNode::Kind;
    if (node.kind == Kind::kStartAnchor || node.kind == Kind::kEndAnchor) return true;
    return std::any_of(node.children.begin(), node.children.end(), has_anchor);
  }

  // Subtrees without anchors have one reading, themselves: only the parts that hold an anchor
  // are split into readings (a long pattern between ^ and $ is then read in linear time, not
  // copied once per part).
  std::vector<Anchored> expand(const PatternNode& node) {
    using Kind = PatternNode::Kind;
    budget_.charge(1, "pattern anchor readings");
    if (!has_anchor(node)) return {Anchored{false, false, node}};
    switch (node.kind) {
      case Kind::kStartAnchor:
        return {Anchored{true, false, PatternNode::concat({})}};
      case Kind::kEndAnchor:
        return {Anchored{false, true, PatternNode::concat({})}};
      case Kind::kSet:
        return {Anchored{false, false, node}};
      case Kind::kAlternation: {
        std::vector<Anchored> out;
        for (const PatternNode& child : node.children) {
          for (Anchored& option : expand(child)) out.push_back(std::move(option));
        }
        return out;
      }
      case Kind::kRepeat:
        fail("an anchor inside a repetition is not supported");
      case Kind::kConcat: {
        std::vector<Anchored> readings{Anchored{false, false, PatternNode::concat({})}};
        for (const PatternNode& child : node.children) {
          std::vector<Anchored> next;
          if (!has_anchor(child)) {
            // Every reading goes on with the child (after $, only if it can match nothing).
            for (Anchored& left : readings) {
              budget_.charge(1, "pattern anchor readings");
              if (left.end && !nullable(child)) continue;
              if (!left.end) left.node.children.push_back(child);
              next.push_back(std::move(left));
            }
            readings = std::move(next);
            continue;
          }
          for (const Anchored& left : readings) {
            for (const Anchored& right : expand(child)) {
              budget_.charge(1, "pattern anchor readings");
              // After $ only empty text may follow; before ^ only empty text may come.
              PatternNode l = left.node, r = right.node;
              if (left.end) {
                if (!nullable(r)) continue;
                r = PatternNode::concat({});
              }
              if (right.start) {
                if (!nullable(l)) continue;
                l = PatternNode::concat({});
              }
              next.push_back(Anchored{left.start || right.start, left.end || right.end,
                                      PatternNode::concat({std::move(l), std::move(r)})});
            }
          }
          readings = std::move(next);
        }
        return readings;
      }
    }
    return {};
  }

  CompileBudget& budget_;
  std::u32string text_;
  size_t pos_ = 0;
};

}  // namespace

PatternNode parse_pattern(std::string_view pattern, CompileBudget& budget) {
  return PatternParser(pattern, budget).parse();
}

}  // namespace llms::structured::jsonschema
