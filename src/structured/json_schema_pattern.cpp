// structured/json_schema_pattern: see json_schema_pattern.h.
#include "structured/json_schema_pattern.h"

#include <algorithm>
#include <memory>
#include <unordered_set>

#include "util/error.h"
#include "util/utf8.h"

namespace llms::structured::jsonschema {

PatternNode PatternNode::of_set(CodePointSet s) {
  PatternNode node;
  node.kind = Kind::kSet;
  node.set = std::move(s);
  return node;
}

PatternNode PatternNode::concat(std::vector<PatternNode> parts) {
  PatternNode node;
  node.kind = Kind::kConcat;
  node.children = std::move(parts);
  return node;
}

PatternNode PatternNode::alternation(std::vector<PatternNode> options) {
  PatternNode node;
  node.kind = Kind::kAlternation;
  node.children = std::move(options);
  return node;
}

PatternNode PatternNode::repeat(PatternNode child, int64_t lo, int64_t hi) {
  PatternNode node;
  node.kind = Kind::kRepeat;
  node.children.push_back(std::move(child));
  node.min = lo;
  node.max = hi;
  return node;
}

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

// ECMA-262 WhiteSpace and LineTerminator, less U+FEFF which Python's \s does not match.
CodePointSet ecma_space_set() {
  CodePointSet set = CodePointSet::range(0x09, 0x0D);
  set.add(0x20, 0x20);
  set.add(0xA0, 0xA0);
  set.add(0x1680, 0x1680);
  set.add(0x2000, 0x200A);
  set.add(0x2028, 0x2029);
  set.add(0x202F, 0x202F);
  set.add(0x205F, 0x205F);
  set.add(0x3000, 0x3000);
  return set;
}

// What either engine calls whitespace; \S excludes all of it.
CodePointSet any_engine_space_set() {
  CodePointSet set = ecma_space_set();
  set.add(0x1C, 0x1F);      // Python
  set.add(0x85, 0x85);      // Python
  set.add(0xFEFF, 0xFEFF);  // ECMA
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
        return PatternNode::of_set(ecma_space_set());
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
        return ecma_space_set();
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

  std::vector<Anchored> expand(const PatternNode& node) {
    using Kind = PatternNode::Kind;
    budget_.charge(1, "pattern anchor readings");
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
      case Kind::kRepeat: {
        for (const Anchored& option : expand(node.children[0])) {
          if (option.start || option.end) fail("an anchor inside a repetition is not supported");
        }
        return {Anchored{false, false, node}};
      }
      case Kind::kConcat: {
        std::vector<Anchored> readings{Anchored{false, false, PatternNode::concat({})}};
        for (const PatternNode& child : node.children) {
          std::vector<Anchored> next;
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

bool is_empty_string(const PatternNode& node) {
  return node.kind == PatternNode::Kind::kConcat && node.children.empty();
}

}  // namespace

PatternNode parse_pattern(std::string_view pattern, CompileBudget& budget) {
  return PatternParser(pattern, budget).parse();
}

bool is_empty_language(const PatternNode& simplified) {
  return simplified.kind == PatternNode::Kind::kAlternation && simplified.children.empty();
}

PatternNode simplify_pattern(const PatternNode& node) {
  using Kind = PatternNode::Kind;
  switch (node.kind) {
    case Kind::kStartAnchor:
    case Kind::kEndAnchor:             // only while parsing
      return PatternNode::concat({});  // anchors never outlive parse_pattern
    case Kind::kSet: {
      // Surrogates are not characters of valid text.
      CodePointSet set = node.set.minus(CodePointSet::range(0xD800, 0xDFFF));
      return set.empty() ? PatternNode::nothing() : PatternNode::of_set(std::move(set));
    }
    case Kind::kConcat: {
      std::vector<PatternNode> parts;
      for (const PatternNode& child : node.children) {
        PatternNode part = simplify_pattern(child);
        if (is_empty_language(part)) return PatternNode::nothing();
        if (is_empty_string(part)) continue;
        if (part.kind == Kind::kConcat) {
          for (PatternNode& inner : part.children) parts.push_back(std::move(inner));
        } else {
          parts.push_back(std::move(part));
        }
      }
      if (parts.size() == 1) return std::move(parts[0]);
      return PatternNode::concat(std::move(parts));
    }
    case Kind::kAlternation: {
      std::vector<PatternNode> options;
      for (const PatternNode& child : node.children) {
        PatternNode option = simplify_pattern(child);
        if (is_empty_language(option)) continue;
        if (option.kind == Kind::kAlternation) {
          for (PatternNode& inner : option.children) options.push_back(std::move(inner));
        } else {
          options.push_back(std::move(option));
        }
      }
      if (options.size() == 1) return std::move(options[0]);
      return PatternNode::alternation(std::move(options));
    }
    case Kind::kRepeat: {
      PatternNode child = simplify_pattern(node.children[0]);
      if (node.max == 0 || is_empty_string(child)) return PatternNode::concat({});
      if (is_empty_language(child)) {
        return node.min == 0 ? PatternNode::concat({}) : PatternNode::nothing();
      }
      if (node.min == 1 && node.max == 1) return child;
      return PatternNode::repeat(std::move(child), node.min, node.max);
    }
  }
  return PatternNode::nothing();
}

bool is_universal_language(const PatternNode& node) {
  using Kind = PatternNode::Kind;
  switch (node.kind) {
    case Kind::kStartAnchor:
    case Kind::kEndAnchor:  // only while parsing
      return false;
    case Kind::kSet:
      return false;
    case Kind::kRepeat:
      return node.min == 0 && node.max == kUnbounded && node.children[0].kind == Kind::kSet &&
             node.children[0].set == CodePointSet::all().minus(CodePointSet::range(0xD800, 0xDFFF));
    case Kind::kConcat: {
      // One part holds every string and every other part may be empty.
      bool universal_part = false;
      for (const PatternNode& child : node.children) {
        if (!universal_part && is_universal_language(child)) {
          universal_part = true;
        } else if (pattern_length(child).min != 0) {
          return false;
        }
      }
      return universal_part;
    }
    case Kind::kAlternation:
      return std::any_of(node.children.begin(), node.children.end(), is_universal_language);
  }
  return false;
}

LengthRange pattern_length(const PatternNode& node) {
  using Kind = PatternNode::Kind;
  switch (node.kind) {
    case Kind::kStartAnchor:
    case Kind::kEndAnchor:  // only while parsing
      return {0, 0};
    case Kind::kSet:
      return {1, 1};
    case Kind::kConcat: {
      LengthRange total{0, 0};
      for (const PatternNode& child : node.children) {
        const LengthRange part = pattern_length(child);
        total.min += part.min;
        total.max =
            (total.max == kUnbounded || part.max == kUnbounded) ? kUnbounded : total.max + part.max;
      }
      return total;
    }
    case Kind::kAlternation: {
      if (node.children.empty()) return {0, 0};
      LengthRange total = pattern_length(node.children[0]);
      for (size_t i = 1; i < node.children.size(); ++i) {
        const LengthRange part = pattern_length(node.children[i]);
        total.min = std::min(total.min, part.min);
        total.max = (total.max == kUnbounded || part.max == kUnbounded)
                        ? kUnbounded
                        : std::max(total.max, part.max);
      }
      return total;
    }
    case Kind::kRepeat: {
      const LengthRange part = pattern_length(node.children[0]);
      LengthRange total;
      total.min = part.min * node.min;
      if (node.max == kUnbounded) {
        total.max = part.max == 0 ? 0 : kUnbounded;
      } else {
        total.max = part.max == kUnbounded ? kUnbounded : part.max * node.max;
      }
      return total;
    }
  }
  return {0, 0};
}

namespace {

bool within(const LengthRange& length, int64_t lo, int64_t hi) {
  return length.min >= lo && (hi == kUnbounded || (length.max != kUnbounded && length.max <= hi));
}

bool disjoint(const LengthRange& length, int64_t lo, int64_t hi) {
  return (length.max != kUnbounded && length.max < lo) || (hi != kUnbounded && length.min > hi);
}

int64_t sub_floor(int64_t value, int64_t amount) { return std::max<int64_t>(0, value - amount); }

std::optional<PatternNode> constrain(const PatternNode& node, int64_t lo, int64_t hi,
                                     CompileBudget& budget) {
  using Kind = PatternNode::Kind;
  budget.charge(1, "pattern length rewrites");
  const LengthRange length = pattern_length(node);
  if (within(length, lo, hi)) return node;
  if (disjoint(length, lo, hi)) return PatternNode::nothing();
  switch (node.kind) {
    case Kind::kStartAnchor:
    case Kind::kEndAnchor:  // only while parsing
      return node;
    case Kind::kSet:
      return node;  // unreachable: length 1 is within or disjoint
    case Kind::kRepeat: {
      const LengthRange part = pattern_length(node.children[0]);
      if (part.min != part.max || part.min == 0) return std::nullopt;
      const int64_t width = part.min;
      int64_t new_min = std::max(node.min, (lo + width - 1) / width);
      int64_t new_max = hi == kUnbounded ? node.max : hi / width;
      if (node.max != kUnbounded && new_max != kUnbounded) new_max = std::min(new_max, node.max);
      if (new_max != kUnbounded && new_max > kMaxPatternRepeat) return std::nullopt;
      if (new_min > kMaxPatternRepeat) return std::nullopt;
      if (new_max != kUnbounded && new_min > new_max) return PatternNode::nothing();
      return PatternNode::repeat(node.children[0], new_min, new_max);
    }
    case Kind::kConcat: {
      // Only one part of variable length: the bounds pass to it.
      int64_t fixed = 0;
      size_t variable = node.children.size();
      for (size_t i = 0; i < node.children.size(); ++i) {
        const LengthRange part = pattern_length(node.children[i]);
        if (part.min == part.max) {
          fixed += part.min;
        } else if (variable != node.children.size()) {
          return std::nullopt;
        } else {
          variable = i;
        }
      }
      if (variable == node.children.size()) return std::nullopt;
      auto inner = constrain(node.children[variable], sub_floor(lo, fixed),
                             hi == kUnbounded ? kUnbounded : hi - fixed, budget);
      if (!inner) return std::nullopt;
      if (is_empty_language(*inner)) return PatternNode::nothing();
      PatternNode out = node;
      out.children[variable] = std::move(*inner);
      return out;
    }
    case Kind::kAlternation: {
      std::vector<PatternNode> options;
      for (const PatternNode& child : node.children) {
        auto option = constrain(child, lo, hi, budget);
        if (!option) return std::nullopt;
        if (!is_empty_language(*option)) options.push_back(std::move(*option));
      }
      if (options.size() == 1) return std::move(options[0]);
      return PatternNode::alternation(std::move(options));
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<PatternNode> constrain_pattern_length(const PatternNode& simplified,
                                                    int64_t min_length, int64_t max_length,
                                                    CompileBudget& budget) {
  if (max_length != kUnbounded && max_length < min_length) return PatternNode::nothing();
  auto out = constrain(simplified, min_length, max_length, budget);
  if (!out) return std::nullopt;
  return simplify_pattern(*out);
}

namespace {

// Appends the regex of `node`; `atomic` asks for a form a quantifier can follow.
void write_regex(const PatternNode& node, StringSpelling spelling, bool atomic,
                 CompileBudget& budget, std::string& out) {
  using Kind = PatternNode::Kind;
  budget.charge(1, "pattern regex nodes");
  switch (node.kind) {
    case Kind::kStartAnchor:
    case Kind::kEndAnchor:  // only while parsing
      return;
    case Kind::kSet: {
      out += json_char_regex(node.set, spelling);  // a class or a (?:...) group: atomic
      return;
    }
    case Kind::kConcat: {
      if (atomic && node.children.size() != 1) out += "(?:";
      for (const PatternNode& child : node.children) {
        write_regex(child, spelling, child.kind == Kind::kAlternation, budget, out);
      }
      if (atomic && node.children.size() != 1) out += ")";
      return;
    }
    case Kind::kAlternation: {
      // An empty alternative becomes `?` on the group, the surest syntax for engines.
      bool has_empty = false;
      std::vector<const PatternNode*> options;
      for (const PatternNode& child : node.children) {
        if (is_empty_string(child)) {
          has_empty = true;
        } else {
          options.push_back(&child);
        }
      }
      const bool wrap = has_empty && atomic;  // `(?:a|b)?` cannot take another quantifier
      if (wrap) out += "(?:";
      out += "(?:";
      for (size_t i = 0; i < options.size(); ++i) {
        if (i) out.push_back('|');
        write_regex(*options[i], spelling, false, budget, out);
      }
      out += ")";
      if (has_empty) out += "?";
      if (wrap) out += ")";
      return;
    }
    case Kind::kRepeat: {
      if (atomic) out += "(?:";
      write_regex(node.children[0], spelling, true, budget, out);
      if (node.min == 0 && node.max == kUnbounded) {
        out += "*";
      } else if (node.min == 1 && node.max == kUnbounded) {
        out += "+";
      } else if (node.min == 0 && node.max == 1) {
        out += "?";
      } else if (node.max == kUnbounded) {
        out += "{" + std::to_string(node.min) + ",}";
      } else if (node.min == node.max) {
        out += "{" + std::to_string(node.min) + "}";
      } else {
        out += "{" + std::to_string(node.min) + "," + std::to_string(node.max) + "}";
      }
      if (atomic) out += ")";
      return;
    }
  }
}

}  // namespace

std::string pattern_to_json_regex(const PatternNode& simplified, StringSpelling spelling,
                                  CompileBudget& budget) {
  std::string out;
  write_regex(simplified, spelling, false, budget, out);
  return out;
}

namespace {

// A Thompson NFA over code points, for checking enum values and property names.
struct Nfa {
  struct State {
    CodePointSet set;  // consuming transition to `next` (when has_set)
    bool has_set = false;
    int next = -1;
    std::vector<int> epsilon;  // non-consuming transitions
  };
  std::vector<State> states;

  int add(CompileBudget& budget) {
    budget.charge(1, "pattern matcher states");
    states.emplace_back();
    return static_cast<int>(states.size()) - 1;
  }

  // Builds `node` between fresh states; returns {start, end}.
  std::pair<int, int> build(const PatternNode& node, CompileBudget& budget) {
    using Kind = PatternNode::Kind;
    const int start = add(budget);
    switch (node.kind) {
      case Kind::kStartAnchor:
      case Kind::kEndAnchor:  // only while parsing
        return {start, start};
      case Kind::kSet: {
        const int end = add(budget);
        states[start].has_set = true;
        states[start].set = node.set;
        states[start].next = end;
        return {start, end};
      }
      case Kind::kConcat: {
        int current = start;
        for (const PatternNode& child : node.children) {
          auto [s, e] = build(child, budget);
          states[current].epsilon.push_back(s);
          current = e;
        }
        return {start, current};
      }
      case Kind::kAlternation: {
        const int end = add(budget);
        for (const PatternNode& child : node.children) {
          auto [s, e] = build(child, budget);
          states[start].epsilon.push_back(s);
          states[e].epsilon.push_back(end);
        }
        return {start, end};
      }
      case Kind::kRepeat: {
        int current = start;
        const PatternNode& child = node.children[0];
        for (int64_t i = 0; i < node.min; ++i) {
          auto [s, e] = build(child, budget);
          states[current].epsilon.push_back(s);
          current = e;
        }
        const int end = add(budget);
        if (node.max == kUnbounded) {
          auto [s, e] = build(child, budget);
          states[current].epsilon.push_back(s);
          states[current].epsilon.push_back(end);
          states[e].epsilon.push_back(s);
          states[e].epsilon.push_back(end);
        } else {
          for (int64_t i = node.min; i < node.max; ++i) {
            auto [s, e] = build(child, budget);
            states[current].epsilon.push_back(s);
            states[current].epsilon.push_back(end);
            current = e;
          }
          states[current].epsilon.push_back(end);
        }
        return {start, end};
      }
    }
    return {start, start};
  }

  void closure(std::vector<int>& current, std::vector<char>& in_set) const {
    for (size_t i = 0; i < current.size(); ++i) {
      for (int next : states[current[i]].epsilon) {
        if (!in_set[next]) in_set[next] = 1, current.push_back(next);
      }
    }
  }
};

}  // namespace

bool pattern_matches(const PatternNode& node, std::string_view text, CompileBudget& budget) {
  Nfa nfa;
  auto [start, end] = nfa.build(node, budget);
  std::vector<char> in_set(nfa.states.size(), 0);
  std::vector<int> current{start};
  in_set[start] = 1;
  nfa.closure(current, in_set);
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Step step = utf8_step(text, pos);
    if (step.kind != Utf8Step::Kind::kValid) return false;
    pos += step.length;
    budget.charge(static_cast<int64_t>(current.size() / 64 + 1), "pattern matching");
    std::vector<int> next;
    std::vector<char> next_in(nfa.states.size(), 0);
    for (int s : current) {
      const Nfa::State& state = nfa.states[s];
      if (state.has_set && state.set.contains(step.code_point) && !next_in[state.next]) {
        next_in[state.next] = 1;
        next.push_back(state.next);
      }
    }
    nfa.closure(next, next_in);
    current = std::move(next);
    in_set = std::move(next_in);
    if (current.empty()) return false;
  }
  return in_set[end] != 0;
}

namespace {

bool nullable_language(const PatternNode& node) { return pattern_length(node).min == 0; }

PatternNode empty_string() { return PatternNode::concat({}); }

// Repeat(X, m, n) after one iteration is taken: Repeat(X, max(m - 1, 0), n - 1).
PatternNode one_fewer(const PatternNode& repeat) {
  return PatternNode::repeat(repeat.children[0], std::max<int64_t>(repeat.min - 1, 0),
                             repeat.max == kUnbounded ? kUnbounded : repeat.max - 1);
}

// The strings s with c s in the language (on simplified nodes; the result is not simplified).
PatternNode derivative(const PatternNode& node, char32_t c, CompileBudget& budget) {
  using Kind = PatternNode::Kind;
  budget.charge(1, "pattern derivatives");
  switch (node.kind) {
    case Kind::kSet:
      return node.set.contains(c) ? empty_string() : PatternNode::nothing();
    case Kind::kConcat: {
      std::vector<PatternNode> options;
      for (size_t i = 0; i < node.children.size(); ++i) {
        std::vector<PatternNode> parts{derivative(node.children[i], c, budget)};
        parts.insert(parts.end(), node.children.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                     node.children.end());
        options.push_back(PatternNode::concat(std::move(parts)));
        if (!nullable_language(node.children[i])) break;
      }
      return PatternNode::alternation(std::move(options));
    }
    case Kind::kAlternation: {
      std::vector<PatternNode> options;
      for (const PatternNode& child : node.children)
        options.push_back(derivative(child, c, budget));
      return PatternNode::alternation(std::move(options));
    }
    case Kind::kRepeat:
      if (node.max == 0) return PatternNode::nothing();
      return PatternNode::concat({derivative(node.children[0], c, budget), one_fewer(node)});
    default:
      return PatternNode::nothing();
  }
}

// The non-empty strings of the language whose first character is in `allowed`.
PatternNode restrict_first(const PatternNode& node, const CodePointSet& allowed,
                           CompileBudget& budget) {
  using Kind = PatternNode::Kind;
  budget.charge(1, "pattern derivatives");
  switch (node.kind) {
    case Kind::kSet:
      return PatternNode::of_set(node.set.intersect(allowed));
    case Kind::kConcat: {
      std::vector<PatternNode> options;
      for (size_t i = 0; i < node.children.size(); ++i) {
        std::vector<PatternNode> parts{restrict_first(node.children[i], allowed, budget)};
        parts.insert(parts.end(), node.children.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                     node.children.end());
        options.push_back(PatternNode::concat(std::move(parts)));
        if (!nullable_language(node.children[i])) break;
      }
      return PatternNode::alternation(std::move(options));
    }
    case Kind::kAlternation: {
      std::vector<PatternNode> options;
      for (const PatternNode& child : node.children) {
        options.push_back(restrict_first(child, allowed, budget));
      }
      return PatternNode::alternation(std::move(options));
    }
    case Kind::kRepeat:
      if (node.max == 0) return PatternNode::nothing();
      return PatternNode::concat(
          {restrict_first(node.children[0], allowed, budget), one_fewer(node)});
    default:
      return PatternNode::nothing();
  }
}

struct NameTrie {
  std::vector<std::pair<char32_t, std::unique_ptr<NameTrie>>> children;  // sorted by code point
  bool terminal = false;
};

constexpr int kMaxExcludedNameLength = 1000;

PatternNode minus_trie(const PatternNode& language, const NameTrie& trie, CompileBudget& budget) {
  std::vector<PatternNode> options;
  if (!trie.terminal && nullable_language(language)) options.push_back(empty_string());
  CodePointSet used;
  for (const auto& [cp, child] : trie.children) {
    used.add(cp, cp);
    PatternNode rest = simplify_pattern(derivative(language, cp, budget));
    if (is_empty_language(rest)) continue;
    options.push_back(PatternNode::concat(
        {PatternNode::of_set(CodePointSet::of(cp)), minus_trie(rest, *child, budget)}));
  }
  options.push_back(restrict_first(language, used.complement(), budget));
  return simplify_pattern(PatternNode::alternation(std::move(options)));
}

}  // namespace

PatternNode pattern_minus_strings(const PatternNode& simplified,
                                  const std::vector<std::string>& excluded, CompileBudget& budget) {
  NameTrie root;
  for (const std::string& text : excluded) {
    NameTrie* node = &root;
    int length = 0;
    for (size_t pos = 0; pos < text.size();) {
      const Utf8Step step = utf8_step(text, pos);
      if (step.kind != Utf8Step::Kind::kValid) {
        throw Error(Error::Kind::kInvalidArgument, "JSON Schema: a name is not valid UTF-8");
      }
      pos += step.length;
      if (++length > kMaxExcludedNameLength) {
        throw Error(Error::Kind::kInvalidArgument,
                    "JSON Schema: a property name is longer than 1000 characters");
      }
      auto it = std::lower_bound(node->children.begin(), node->children.end(), step.code_point,
                                 [](const auto& entry, char32_t cp) { return entry.first < cp; });
      if (it == node->children.end() || it->first != step.code_point) {
        budget.charge(1, "pattern derivatives");
        it = node->children.insert(it, {step.code_point, std::make_unique<NameTrie>()});
      }
      node = it->second.get();
    }
    node->terminal = true;
  }
  return minus_trie(simplified, root, budget);
}

bool languages_disjoint(const PatternNode& a, const PatternNode& b, CompileBudget& budget) {
  Nfa x, y;
  const auto [x_start, x_end] = x.build(a, budget);
  const auto [y_start, y_end] = y.build(b, budget);
  // Pairs of states, each side's epsilon moves taken alone, characters taken together.
  std::unordered_set<uint64_t> seen;  // only the pairs reached, charged one by one
  std::vector<std::pair<int, int>> stack;
  auto visit = [&](int p, int q) {
    if (seen.insert((static_cast<uint64_t>(p) << 32) | static_cast<uint32_t>(q)).second) {
      stack.emplace_back(p, q);
    }
  };
  visit(x_start, y_start);
  while (!stack.empty()) {
    const auto [p, q] = stack.back();
    stack.pop_back();
    budget.charge(1, "pattern intersection states");
    if (p == x_end && q == y_end) return false;
    const Nfa::State& sp = x.states[static_cast<size_t>(p)];
    const Nfa::State& sq = y.states[static_cast<size_t>(q)];
    for (int next : sp.epsilon) visit(next, q);
    for (int next : sq.epsilon) visit(p, next);
    if (sp.has_set && sq.has_set && !sp.set.intersect(sq.set).empty()) visit(sp.next, sq.next);
  }
  return true;
}

}  // namespace llms::structured::jsonschema
