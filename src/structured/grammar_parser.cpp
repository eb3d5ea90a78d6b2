// structured/grammar_parser: see grammar_parser.h.
#include "grammar_parser.h"

#include <string>
#include <unordered_map>

#include "regex_parser.h"
#include "util/error.h"

namespace llms::structured {
namespace {

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9') || c == '-'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class GbnfParser {
 public:
  GbnfParser(std::string_view text, CompileBudget& budget) : t_(text), budget_(budget) {}

  Grammar parse() {
    std::unordered_map<std::string, int32_t> index;
    skip_space();
    while (!at_end()) {
      const size_t start = pos_;
      const std::string name = read_name();
      if (name.empty()) fail("expected a rule name");
      skip_space();
      if (!t_.substr(pos_).starts_with("::="))
        fail("expected '::=' after rule name '" + name + "'");
      pos_ += 3;
      const int32_t expr = parse_alternatives();
      auto [it, inserted] = index.emplace(name, static_cast<int32_t>(g_.rules.size()));
      if (!inserted) {
        fail_at("duplicate rule '" + name + "' (first defined at " +
                    line_column(t_, static_cast<size_t>(g_.rules[it->second].source_offset)) + ")",
                start);
      }
      budget_.charge(1, "grammar rules");
      g_.rules.push_back(GrammarRule{name, expr, static_cast<int32_t>(start)});
      skip_space();
    }
    auto root = index.find("root");
    if (root == index.end()) {
      throw Error(Error::Kind::kInvalidArgument, "grammar: no 'root' rule");
    }
    g_.root = root->second;
    resolve_references(index);
    return std::move(g_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { fail_at(what, pos_); }
  [[noreturn]] void fail_at(const std::string& what, size_t offset) const {
    throw Error(Error::Kind::kInvalidArgument,
                "grammar: " + what + " at " + line_column(t_, offset));
  }

  bool at_end() const { return pos_ >= t_.size(); }
  char peek() const { return t_[pos_]; }

  void skip_space() {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string read_name() {
    if (at_end() || !is_name_start(peek())) return {};
    const size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    return std::string(t_.substr(start, pos_ - start));
  }

  // True when a `name ::=` starts at pos_ (the next rule), without consuming it.
  bool at_rule_start() {
    if (at_end() || !is_name_start(peek())) return false;
    const size_t saved = pos_;
    read_name();
    skip_space();
    const bool result = t_.substr(pos_).starts_with("::=");
    pos_ = saved;
    return result;
  }

  // The node whose children are pending_[first, end), which it takes off the stack.
  int32_t node(ExprKind kind, size_t first) {
    budget_.charge(1, "grammar expressions");
    const int32_t id = g_.arena.add_node(kind, std::span<const int32_t>(pending_).subspan(first));
    pending_.resize(first);
    return id;
  }

  int32_t parse_alternatives() {
    const size_t first = pending_.size();
    int32_t branch = parse_sequence();
    pending_.push_back(branch);
    while (!at_end() && peek() == '|') {
      ++pos_;
      branch = parse_sequence();
      pending_.push_back(branch);
    }
    return node(ExprKind::kAlt, first);
  }

  int32_t parse_sequence() {
    const size_t first = pending_.size();
    while (true) {
      skip_space();
      if (at_end()) break;
      const char c = peek();
      if (c == '|' || c == ')') break;
      if (at_rule_start()) break;
      const size_t start = pos_;
      int32_t item = parse_primary();
      item = parse_postfix(item, start);
      pending_.push_back(item);
    }
    return node(ExprKind::kConcat, first);
  }

  int32_t parse_postfix(int32_t item, size_t start) {
    while (true) {
      skip_space();
      if (at_end()) return item;
      int32_t min = 0;
      int32_t max = 0;
      const char c = peek();
      if (c == '*') {
        max = kUnbounded;
        ++pos_;
      } else if (c == '+') {
        min = 1;
        max = kUnbounded;
        ++pos_;
      } else if (c == '?') {
        max = 1;
        ++pos_;
      } else if (c == '{') {
        parse_braces(min, max);
      } else {
        return item;
      }
      budget_.charge(1, "grammar expressions");
      item = g_.arena.add_repeat(item, min, max);
      g_.arena.nodes[item].source_offset = static_cast<int32_t>(start);
    }
  }

  void parse_braces(int32_t& min, int32_t& max) {
    const size_t start = pos_;
    ++pos_;  // '{'
    auto read_number = [&]() -> int32_t {
      skip_space();
      const size_t begin = pos_;
      int64_t value = 0;
      while (!at_end() && peek() >= '0' && peek() <= '9') {
        value = std::min<int64_t>(value * 10 + (peek() - '0'), int64_t{1} << 40);
        ++pos_;
      }
      if (pos_ == begin) return -1;
      if (value > kMaxRepeat) {
        fail_at("repetition count over " + std::to_string(kMaxRepeat), begin);
      }
      return static_cast<int32_t>(value);
    };
    min = read_number();
    if (min < 0) fail_at("expected a number after '{'", start);
    skip_space();
    max = min;
    if (!at_end() && peek() == ',') {
      ++pos_;
      skip_space();
      max = kUnbounded;
      if (!at_end() && peek() != '}') {
        max = read_number();
        if (max < 0) fail_at("expected a number or '}' in a repetition", start);
      }
      skip_space();
    }
    if (at_end() || peek() != '}') fail_at("unterminated repetition '{'", start);
    ++pos_;
    if (max != kUnbounded && max < min) fail_at("repetition {m,n} with n < m", start);
  }

  // One code point of a literal or class, escapes decoded. pos_ is on it.
  uint32_t read_char() {
    const size_t start = pos_;
    if (peek() != '\\') {
      uint32_t cp = 0;
      const int length = decode_utf8(t_.data() + pos_, t_.size() - pos_, cp);
      if (length == 0) fail("invalid UTF-8");
      pos_ += static_cast<size_t>(length);
      return cp;
    }
    ++pos_;
    if (at_end()) fail_at("unterminated escape", start);
    const char c = peek();
    ++pos_;
    auto hex = [&](int digits) {
      uint32_t value = 0;
      for (int i = 0; i < digits; ++i) {
        if (at_end() || hex_value(peek()) < 0) {
          fail_at("escape '\\" + std::string(1, c) + "' needs " + std::to_string(digits) +
                      " hex digits",
                  start);
        }
        value = value * 16 + static_cast<uint32_t>(hex_value(peek()));
        ++pos_;
      }
      if (value > kMaxCodePoint) fail_at("code point beyond U+10FFFF", start);
      if (value >= 0xD800 && value <= 0xDFFF) fail_at("surrogate code point", start);
      return value;
    };
    switch (c) {
      case '"':
      case '\\':
      case '/':
      case ']':
      case '[':
      case '-':
      case '^':
        return static_cast<uint32_t>(c);
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case 'x':
        return hex(2);
      case 'u':
        return hex(4);
      case 'U':
        return hex(8);
      default:
        fail_at("unknown escape '\\" + std::string(1, c) + "'", start);
    }
  }

  int32_t parse_primary() {
    const size_t start = pos_;
    const char c = peek();
    int32_t result = -1;
    if (c == '"') {
      ++pos_;
      std::string bytes;
      while (true) {
        if (at_end()) fail_at("unterminated literal", start);
        if (peek() == '"') {
          ++pos_;
          break;
        }
        append_utf8(bytes, read_char());
      }
      budget_.charge(1, "grammar expressions");
      result = g_.arena.add_literal(std::move(bytes));
    } else if (c == '[') {
      result = parse_class();
    } else if (c == '.') {
      ++pos_;
      budget_.charge(1, "grammar expressions");
      result = g_.arena.add_set(CodePointSet::all());
    } else if (c == '(') {
      ++pos_;
      if (++depth_ > kMaxNesting) {
        fail_at("groups nested deeper than " + std::to_string(kMaxNesting), start);
      }
      result = parse_alternatives();
      --depth_;
      skip_space();
      if (at_end() || peek() != ')') fail_at("unterminated group '('", start);
      ++pos_;
    } else if (c == '/') {
      result = parse_regex_terminal();
    } else if (is_name_start(c)) {
      std::string name = read_name();
      budget_.charge(1, "grammar expressions");
      g_.arena.literals.push_back(std::move(name));
      Expr ref;
      ref.kind = ExprKind::kRuleRef;
      ref.payload = static_cast<int32_t>(g_.arena.literals.size() - 1);
      result = g_.arena.add(std::move(ref));
    } else {
      fail("unexpected character '" + std::string(1, c) + "'");
    }
    g_.arena.nodes[result].source_offset = static_cast<int32_t>(start);
    return result;
  }

  int32_t parse_class() {
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
      const size_t member = pos_;
      const uint32_t lo = read_char();
      if (pos_ + 1 < t_.size() && peek() == '-' && t_[pos_ + 1] != ']') {
        ++pos_;
        const uint32_t hi = read_char();
        if (lo > hi) fail_at("character class range out of order", member);
        set.add(lo, hi);
      } else {
        set.add(lo, lo);
      }
    }
    budget_.charge(1, "grammar expressions");
    return g_.arena.add_set(negate ? set.negated() : set);
  }

  // `/regex/`: the text up to the closing unescaped '/' (a '/' inside [...] does not close it).
  int32_t parse_regex_terminal() {
    const size_t start = pos_;
    ++pos_;
    // The pattern is the text between the slashes as written (escapes stay for the regex
    // parser); only an unescaped '/' outside a class ends it.
    bool in_class = false;
    while (true) {
      if (at_end()) fail_at("unterminated regex '/'", start);
      const char c = peek();
      if (c == '/' && !in_class) break;
      if (c == '\\' && pos_ + 1 < t_.size()) {
        pos_ += 2;
        continue;
      }
      if (c == '[') in_class = true;
      if (c == ']') in_class = false;
      ++pos_;
    }
    const std::string_view pattern = t_.substr(start + 1, pos_ - start - 1);
    ++pos_;  // the closing '/'
    try {
      return parse_regex(pattern, g_.arena, budget_);
    } catch (const Error& e) {
      if (e.kind() != Error::Kind::kInvalidArgument) throw;
      // "regex: <problem> at offset N" becomes "grammar: in the regex at line L:C: <problem> at
      // offset N" (the offset counts from the byte after the opening '/').
      std::string what = e.what();
      if (what.starts_with("regex: ")) what = what.substr(7);
      throw Error(Error::Kind::kInvalidArgument,
                  "grammar: in the regex at " + line_column(t_, start) + ": " + what);
    }
  }

  void resolve_references(const std::unordered_map<std::string, int32_t>& index) {
    for (Expr& e : g_.arena.nodes) {
      if (e.kind != ExprKind::kRuleRef) continue;
      const std::string& name = g_.arena.literals[static_cast<size_t>(e.payload)];
      auto it = index.find(name);
      if (it == index.end()) {
        fail_at("undefined rule '" + name + "'", static_cast<size_t>(e.source_offset));
      }
      e.payload = it->second;
    }
  }

  std::string_view t_;
  CompileBudget& budget_;
  Grammar g_;
  size_t pos_ = 0;
  // The children of the sequences and choices being parsed, innermost last: one buffer for all,
  // where a vector per node was most of the parse's allocations.
  std::vector<int32_t> pending_;
  int depth_ = 0;
};

}  // namespace

std::string line_column(std::string_view text, size_t offset) {
  size_t line = 1;
  size_t column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return "line " + std::to_string(line) + ":" + std::to_string(column);
}

Grammar parse_gbnf(std::string_view text, CompileBudget& budget) {
  GbnfParser parser(text, budget);
  return parser.parse();
}

}  // namespace llms::structured
