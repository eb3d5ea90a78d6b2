// structured/regex_parser: see regex_parser.h.
#include "regex_parser.h"

#include <string>

#include "regex_whitespace.h"
#include "util/error.h"

namespace llms::structured {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

CodePointSet digit_set() { return CodePointSet::range('0', '9'); }

CodePointSet word_set() {
  CodePointSet set = CodePointSet::range('a', 'z');
  set.add('A', 'Z');
  set.add('0', '9');
  set.add('_', '_');
  return set;
}

// ECMAScript WhiteSpace and LineTerminator code points.
CodePointSet space_set() {
  CodePointSet set;
  for (const CodePointInterval& i : kSpaceInBothEngines) set.add(i.lo, i.hi);
  set.add(kSpaceInEcmaOnly.lo, kSpaceInEcmaOnly.hi);
  return set;
}

class RegexParser {
 public:
  RegexParser(std::string_view pattern, ExprArena& arena, CompileBudget& budget)
      : p_(pattern), arena_(arena), budget_(budget) {}

  int32_t parse() {
    if (!p_.empty() && p_[0] == '^') pos_ = 1;
    const int32_t root = parse_alternation();
    if (pos_ < p_.size()) {
      // Only an unmatched ')' stops the top-level alternation early.
      fail("unmatched ')'");
    }
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { fail_at(what, pos_); }
  [[noreturn]] void fail_at(const std::string& what, size_t offset) const {
    throw Error(Error::Kind::kInvalidArgument,
                "regex: " + what + " at offset " + std::to_string(offset));
  }

  bool at_end() const { return pos_ >= p_.size(); }
  char peek() const { return p_[pos_]; }

  // The node whose children are pending_[first, end), which it takes off the stack.
  int32_t node(ExprKind kind, size_t first) {
    budget_.charge(1, "regex syntax nodes");
    const int32_t id = arena_.add_node(kind, std::span<const int32_t>(pending_).subspan(first));
    pending_.resize(first);
    return id;
  }
  // A node just added, charged and marked with where it was written.
  int32_t located(int32_t id, size_t offset) {
    budget_.charge(1, "regex syntax nodes");
    arena_.nodes[static_cast<size_t>(id)].source_offset = static_cast<int32_t>(offset);
    return id;
  }
  int32_t set_node(CodePointSet set, size_t offset) {
    return located(arena_.add_set(std::move(set)), offset);
  }
  int32_t char_node(uint32_t cp, size_t offset) {
    return located(arena_.add_code_point(cp), offset);
  }

  int32_t parse_alternation() {
    const size_t first = pending_.size();
    int32_t branch = parse_concat();
    pending_.push_back(branch);
    while (!at_end() && peek() == '|') {
      ++pos_;
      branch = parse_concat();
      pending_.push_back(branch);
    }
    return node(ExprKind::kAlt, first);
  }

  int32_t parse_concat() {
    const size_t first = pending_.size();
    while (!at_end() && peek() != '|' && peek() != ')') {
      const size_t start = pos_;
      const int32_t atom = parse_atom();
      if (atom < 0) continue;  // an anchor: matches the empty string at its (only) legal place
      const int32_t item = parse_quantifiers(atom, start);
      pending_.push_back(item);
    }
    return node(ExprKind::kConcat, first);
  }

  // Reads {m}, {m,} or {m,n} at pos_ if one is there (Annex B: otherwise '{' is a literal).
  bool read_braces(int32_t& min, int32_t& max) {
    size_t i = pos_ + 1;
    auto read_number = [&](int32_t& out) {
      const size_t begin = i;
      int64_t value = 0;
      while (i < p_.size() && is_digit(p_[i])) {
        value = std::min<int64_t>(value * 10 + (p_[i] - '0'), int64_t{1} << 40);
        ++i;
      }
      if (i == begin) return false;
      if (value > kMaxRepeat) {
        fail_at("repetition count " + std::string(p_.substr(begin, i - begin)) + " is over " +
                    std::to_string(kMaxRepeat),
                begin);
      }
      out = static_cast<int32_t>(value);
      return true;
    };
    if (!read_number(min)) return false;
    max = min;
    if (i < p_.size() && p_[i] == ',') {
      ++i;
      max = kUnbounded;
      if (i < p_.size() && is_digit(p_[i]) && !read_number(max)) return false;
    }
    if (i >= p_.size() || p_[i] != '}') return false;
    if (max != kUnbounded && max < min) fail("repetition {m,n} with n < m");
    pos_ = i + 1;
    return true;
  }

  int32_t parse_quantifiers(int32_t atom, size_t atom_offset) {
    if (at_end()) return atom;
    int32_t min = 0;
    int32_t max = 0;
    const char c = peek();
    if (c == '*') {
      ++pos_;
      min = 0;
      max = kUnbounded;
    } else if (c == '+') {
      ++pos_;
      min = 1;
      max = kUnbounded;
    } else if (c == '?') {
      ++pos_;
      min = 0;
      max = 1;
    } else if (c != '{' || !read_braces(min, max)) {
      return atom;
    }
    if (!at_end() && peek() == '?') ++pos_;  // lazy: the same language
    if (!at_end()) {
      int32_t unused_min = 0;
      int32_t unused_max = 0;
      const char next = peek();
      if (next == '*' || next == '+' || next == '?' ||
          (next == '{' && read_braces(unused_min, unused_max))) {
        fail("nothing to repeat (a quantifier after a quantifier)");
      }
    }
    budget_.charge(1, "regex syntax nodes");
    const int32_t id = arena_.add_repeat(atom, min, max);
    arena_.nodes[id].source_offset = static_cast<int32_t>(atom_offset);
    return id;
  }

  // Returns -1 for an anchor in its legal place.
  int32_t parse_atom() {
    const size_t start = pos_;
    const char c = peek();
    switch (c) {
      case '(':
        return parse_group();
      case '[':
        return class_node(start);
      case '.': {
        ++pos_;
        CodePointSet set = CodePointSet::range(0, '\n' - 1);
        set.add('\n' + 1, kMaxCodePoint);
        return set_node(std::move(set), start);
      }
      case '\\':
        return parse_escape_atom();
      case '*':
      case '+':
      case '?':
        fail("nothing to repeat");
      case '{': {
        int32_t min = 0;
        int32_t max = 0;
        const size_t saved = pos_;
        if (read_braces(min, max)) {
          pos_ = saved;
          fail("nothing to repeat");
        }
        ++pos_;
        return char_node('{', start);
      }
      case '^':
        fail("anchor '^' is only supported at the start of the pattern");
      case '$':
        if (pos_ + 1 == p_.size() && depth_ == 0) {
          ++pos_;
          return -1;
        }
        fail("anchor '$' is only supported at the end of the pattern");
      default:
        break;
    }
    uint32_t cp = 0;
    const int length = decode_utf8(p_.data() + pos_, p_.size() - pos_, cp);
    if (length == 0) fail("invalid UTF-8");
    pos_ += static_cast<size_t>(length);
    return char_node(cp, start);
  }

  int32_t parse_group() {
    const size_t start = pos_;
    ++pos_;  // '('
    if (!at_end() && peek() == '?') {
      const std::string_view rest = p_.substr(pos_);
      if (rest.starts_with("?:")) {
        pos_ += 2;
      } else if (rest.starts_with("?=") || rest.starts_with("?!")) {
        fail_at("lookahead '(" + std::string(rest.substr(0, 2)) + "' is not supported", start);
      } else if (rest.starts_with("?<=") || rest.starts_with("?<!")) {
        fail_at("lookbehind '(" + std::string(rest.substr(0, 3)) + "' is not supported", start);
      } else if (rest.starts_with("?<")) {
        size_t i = pos_ + 2;
        while (i < p_.size() && p_[i] != '>') {
          const char n = p_[i];
          const bool ok = n == '_' || n == '$' || is_digit(n) || (n >= 'a' && n <= 'z') ||
                          (n >= 'A' && n <= 'Z');
          if (!ok) fail_at("invalid character in a group name", i);
          ++i;
        }
        if (i >= p_.size() || i == pos_ + 2) fail_at("unterminated or empty group name", start);
        pos_ = i + 1;
      } else {
        fail_at("unsupported group syntax '(?'", start);
      }
    }
    if (++depth_ > kMaxNesting) {
      fail_at("groups nested deeper than " + std::to_string(kMaxNesting), start);
    }
    const int32_t inner = parse_alternation();
    --depth_;
    if (at_end() || peek() != ')') fail_at("unterminated group '('", start);
    ++pos_;
    return inner;
  }

  // Reads \xHH or \uHHHH digits after the escape letter; pos_ is on the first digit.
  uint32_t read_hex(int digits, size_t escape_offset) {
    uint32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      if (at_end() || hex_value(peek()) < 0) {
        fail_at("escape needs " + std::to_string(digits) + " hex digits", escape_offset);
      }
      value = value * 16 + static_cast<uint32_t>(hex_value(peek()));
      ++pos_;
    }
    return value;
  }

  // After '\u': HHHH (a surrogate pair \uHHHH\uHHHH combined) or {H...}.
  uint32_t read_unicode_escape(size_t escape_offset) {
    if (!at_end() && peek() == '{') {
      ++pos_;
      uint64_t value = 0;
      size_t n_digits = 0;
      while (!at_end() && hex_value(peek()) >= 0) {
        value = std::min<uint64_t>(value * 16 + static_cast<uint64_t>(hex_value(peek())),
                                   uint64_t{1} << 40);
        ++pos_;
        ++n_digits;
      }
      if (at_end() || peek() != '}' || n_digits == 0) fail_at("malformed \\u{...}", escape_offset);
      ++pos_;
      if (value > kMaxCodePoint) fail_at("code point beyond U+10FFFF", escape_offset);
      if (value >= 0xD800 && value <= 0xDFFF) fail_at("lone surrogate", escape_offset);
      return static_cast<uint32_t>(value);
    }
    uint32_t value = read_hex(4, escape_offset);
    if (value >= 0xD800 && value <= 0xDBFF && p_.substr(pos_).starts_with("\\u")) {
      const size_t saved = pos_;
      pos_ += 2;
      bool ok = true;
      uint32_t low = 0;
      for (int i = 0; i < 4; ++i) {
        if (at_end() || hex_value(peek()) < 0) {
          ok = false;
          break;
        }
        low = low * 16 + static_cast<uint32_t>(hex_value(peek()));
        ++pos_;
      }
      if (ok && low >= 0xDC00 && low <= 0xDFFF) {
        return 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00);
      }
      pos_ = saved;
    }
    if (value >= 0xD800 && value <= 0xDFFF) fail_at("lone surrogate", escape_offset);
    return value;
  }

  // An escape that stands for a set (\d ...), returned, or one code point (is_single, in
  // `single`; the set returned is then empty). pos_ is on the '\\'.
  // in_class: \b means backspace and \- is allowed.
  CodePointSet parse_escape(bool in_class, bool& is_single, uint32_t& single) {
    const size_t start = pos_;
    ++pos_;
    if (at_end()) fail_at("pattern ends with '\\'", start);
    const char c = peek();
    ++pos_;
    is_single = false;
    switch (c) {
      case 'd':
        return digit_set();
      case 'D':
        return digit_set().negated();
      case 'w':
        return word_set();
      case 'W':
        return word_set().negated();
      case 's':
        return space_set();
      case 'S':
        return space_set().negated();
      default:
        break;
    }
    is_single = true;
    switch (c) {
      case 'n':
        single = '\n';
        break;
      case 'r':
        single = '\r';
        break;
      case 't':
        single = '\t';
        break;
      case 'f':
        single = '\f';
        break;
      case 'v':
        single = '\v';
        break;
      case '0':
        if (!at_end() && is_digit(peek())) fail_at("octal escapes are not supported", start);
        single = 0;
        break;
      case 'x':
        single = read_hex(2, start);
        break;
      case 'u':
        single = read_unicode_escape(start);
        break;
      case 'c': {
        if (at_end() || !((peek() >= 'a' && peek() <= 'z') || (peek() >= 'A' && peek() <= 'Z'))) {
          fail_at("\\c needs a letter", start);
        }
        single = static_cast<uint32_t>(peek()) % 32;
        ++pos_;
        break;
      }
      case 'b':
        if (in_class) {
          single = 0x08;
          break;
        }
        fail_at("word boundary '\\b' is not supported", start);
      case 'B':
        fail_at("word boundary '\\B' is not supported", start);
      case 'k':
        fail_at("named backreference '\\k' is not supported", start);
      case 'p':
      case 'P':
        fail_at(std::string("Unicode property escape '\\") + c + "' is not supported", start);
      default:
        if (is_digit(c))
          fail_at("backreference '\\" + std::string(1, c) + "' is not supported", start);
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
          fail_at("unknown escape '\\" + std::string(1, c) + "'", start);
        }
        {
          // Identity escape of punctuation or any non-ASCII character.
          --pos_;
          uint32_t cp = 0;
          const int length = decode_utf8(p_.data() + pos_, p_.size() - pos_, cp);
          if (length == 0) fail("invalid UTF-8");
          pos_ += static_cast<size_t>(length);
          single = cp;
        }
        break;
    }
    return {};
  }

  int32_t parse_escape_atom() {
    const size_t start = pos_;
    bool is_single = false;
    uint32_t single = 0;
    CodePointSet set = parse_escape(false, is_single, single);
    return is_single ? char_node(single, start) : set_node(std::move(set), start);
  }

  // One class member: a code point (is_single, in `single`; the set returned is then empty) or
  // a set from a class escape.
  CodePointSet parse_class_atom(bool& is_single, uint32_t& single) {
    if (peek() == '\\') return parse_escape(true, is_single, single);
    const int length = decode_utf8(p_.data() + pos_, p_.size() - pos_, single);
    if (length == 0) fail("invalid UTF-8");
    pos_ += static_cast<size_t>(length);
    is_single = true;
    return {};
  }

  // A class's node; the same class text (a JSON string character, in every string of a
  // schema) is parsed once per arena.
  int32_t class_node(size_t start) {
    // The class's end: the first ']' not escaped (and not first after '[' or '[^', where
    // ECMAScript reads it as ending an empty class all the same).
    size_t end = pos_ + 1;
    while (end < p_.size() && p_[end] != ']') end += p_[end] == '\\' ? 2 : 1;
    if (end >= p_.size()) return set_node(parse_class(), start);  // unterminated: its error
    const std::string_view text = p_.substr(pos_, end + 1 - pos_);
    if (const auto it = arena_.set_by_class_text.find(text); it != arena_.set_by_class_text.end()) {
      pos_ = end + 1;
      return located(arena_.add_set_ref(it->second), start);
    }
    const int32_t id = set_node(parse_class(), start);
    if (pos_ == end + 1) {  // the scan and the parser agree on where it ends
      arena_.set_by_class_text.emplace(std::string(text), arena_.nodes[id].payload);
    }
    return id;
  }

  CodePointSet parse_class() {
    const size_t start = pos_;
    ++pos_;  // '['
    bool negate = false;
    if (!at_end() && peek() == '^') {
      negate = true;
      ++pos_;
    }
    CodePointSet set;
    while (true) {
      if (at_end()) fail_at("unterminated character class '['", start);
      if (peek() == ']') {
        ++pos_;
        break;
      }
      const size_t member_start = pos_;
      bool lo_single = false;
      uint32_t lo = 0;
      const CodePointSet lo_set = parse_class_atom(lo_single, lo);
      auto add_member = [&](bool is_single, uint32_t single, const CodePointSet& escape_set) {
        if (is_single) {
          set.add(single, single);
        } else {
          set.add(escape_set);
        }
      };
      const bool has_range = pos_ + 1 < p_.size() && peek() == '-' && p_[pos_ + 1] != ']';
      if (!has_range) {
        add_member(lo_single, lo, lo_set);
        continue;
      }
      ++pos_;  // '-'
      bool hi_single = false;
      uint32_t hi = 0;
      const CodePointSet hi_set = parse_class_atom(hi_single, hi);
      if (!lo_single || !hi_single) {
        // Annex B: a class escape next to '-' makes the '-' a literal.
        add_member(lo_single, lo, lo_set);
        set.add('-', '-');
        add_member(hi_single, hi, hi_set);
        continue;
      }
      if (lo > hi) fail_at("character class range out of order", member_start);
      set.add(lo, hi);
    }
    return negate ? set.negated() : set;
  }

  std::string_view p_;
  ExprArena& arena_;
  CompileBudget& budget_;
  size_t pos_ = 0;
  // The children of the sequences and choices being parsed, innermost last: one buffer for all,
  // where a vector per node was most of the parse's allocations.
  std::vector<int32_t> pending_;
  int depth_ = 0;
};

}  // namespace

int32_t parse_regex(std::string_view pattern, ExprArena& arena, CompileBudget& budget) {
  RegexParser parser(pattern, arena, budget);
  return parser.parse();
}

}  // namespace llms::structured
