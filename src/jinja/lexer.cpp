// jinja/lexer: see lexer.h. The rules mirror jinja2's regular expressions, written as scans:
// data runs to the first "{{", "{%" or "{#"; inside a tag the end rule is tried first (only when
// brackets are balanced), then whitespace, float, integer, name, string and operator.
#include "lexer.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "pystr.h"
#include "util/error.h"
#include "util/utf8.h"

namespace llms::jinja {

void throw_syntax_error(SourceLoc loc, const std::string& message) {
  throw Error(Error::Kind::kInvalidArgument, "template syntax error at line " +
                                                 std::to_string(loc.line) + ", column " +
                                                 std::to_string(loc.column) + ": " + message);
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Newlines normalized to "\n" and one trailing newline dropped, as jinja2 does before lexing.
std::string normalize(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(normalize(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) lex_root();
    Token eof;
    eof.type = TokenType::kEof;
    eof.loc = loc(src_.size());
    tokens_.push_back(std::move(eof));
    return std::move(tokens_);
  }

 private:
  SourceLoc loc(size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t line = static_cast<size_t>(it - line_starts_.begin());
    return {static_cast<uint32_t>(line),
            static_cast<uint32_t>(offset - line_starts_[line - 1] + 1)};
  }

  [[noreturn]] void fail(size_t offset, const std::string& message) const {
    throw_syntax_error(loc(offset), message);
  }

  bool starts_with(size_t at, std::string_view s) const {
    return at <= src_.size() && src_.size() - at >= s.size() && src_.compare(at, s.size(), s) == 0;
  }

  // Length of the Python-whitespace run at `at`.
  size_t space_run(size_t at) const {
    size_t i = at;
    while (i < src_.size()) {
      size_t next = i;
      if (!pystr::is_space(pystr::decode(src_, next))) break;
      i = next;
    }
    return i - at;
  }

  void emit(TokenType type, std::string value, size_t offset) {
    Token t;
    t.type = type;
    t.value = std::move(value);
    t.loc = loc(offset);
    tokens_.push_back(std::move(t));
  }

  // Applies "-" (strip all whitespace before the tag) or lstrip_blocks to data before a tag.
  void emit_data_before_tag(size_t begin, size_t end, char sign, bool is_variable) {
    std::string_view text(src_.data() + begin, end - begin);
    if (sign == '-') {
      text = rstrip_ws(text);
    } else if (sign != '+' && !is_variable) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting_) {
        const std::string_view tail = text.substr(l_pos);
        if (!tail.empty() && rstrip_ws(tail).empty()) text = text.substr(0, l_pos);
      }
    }
    if (!text.empty()) emit(TokenType::kData, std::string(text), begin);
  }

  static std::string_view rstrip_ws(std::string_view text) {
    const std::vector<size_t> off = pystr::offsets(text);
    size_t k = off.size() - 1;  // code point count
    while (k > 0) {
      size_t at = off[k - 1];
      if (!pystr::is_space(pystr::decode(text, at))) break;
      --k;
    }
    return text.substr(0, off[k]);
  }

  void lex_root() {
    size_t tag = pos_;
    while (true) {
      tag = src_.find('{', tag);
      if (tag == std::string::npos || tag + 1 >= src_.size()) {
        emit(TokenType::kData, src_.substr(pos_), pos_);
        pos_ = src_.size();
        return;
      }
      const char c = src_[tag + 1];
      if (c == '{' || c == '%' || c == '#') break;
      ++tag;
    }
    const char kind = src_[tag + 1];
    size_t p = tag + 2;
    char sign = 0;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
    if (kind == '%') {
      size_t raw_body = 0;
      if (match_raw_begin(p, raw_body)) {
        emit_data_before_tag(pos_, tag, sign, false);
        line_starting_ = src_[raw_body - 1] == '\n';
        lex_raw(tag, raw_body);
        return;
      }
    }
    emit_data_before_tag(pos_, tag, sign, kind == '{');
    line_starting_ = false;
    if (kind == '#') {
      lex_comment(tag, p);
    } else {
      lex_tag(tag, p, kind == '{');
    }
  }

  // `\s*raw\s*(-%}\s*|%})` at p; sets the offset where the raw body starts.
  bool match_raw_begin(size_t p, size_t& body) const {
    p += space_run(p);
    if (!starts_with(p, "raw")) return false;
    p += 3;
    p += space_run(p);
    if (starts_with(p, "-%}")) {
      p += 3;
      body = p + space_run(p);
      return true;
    }
    if (starts_with(p, "%}")) {
      body = p + 2;
      return true;
    }
    return false;
  }

  void lex_raw(size_t tag, size_t body) {
    // Find the first "{%" [-+] \s* "endraw" \s* ("+%}" | "-%}" \s* | "%}" "\n"?).
    for (size_t at = src_.find("{%", body); at != std::string::npos; at = src_.find("{%", at + 1)) {
      size_t p = at + 2;
      char sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      p += space_run(p);
      if (!starts_with(p, "endraw")) continue;
      p += 6;
      p += space_run(p);
      size_t end = 0;
      if (starts_with(p, "+%}")) {
        end = p + 3;
      } else if (starts_with(p, "-%}")) {
        end = p + 3 + space_run(p + 3);
      } else if (starts_with(p, "%}")) {
        end = p + 2;
        if (end < src_.size() && src_[end] == '\n') ++end;
      } else {
        continue;
      }
      emit_data_before_tag(body, at, sign, false);
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return;
    }
    fail(tag, "Missing end of raw directive");
  }

  void lex_comment(size_t tag, size_t p) {
    for (size_t at = src_.find("#}", p); at != std::string::npos; at = src_.find("#}", at + 1)) {
      size_t end;
      if (at > p && src_[at - 1] == '+') {
        end = at + 2;
      } else if (at > p && src_[at - 1] == '-') {
        end = at + 2 + space_run(at + 2);
      } else {
        end = at + 2;
        if (end < src_.size() && src_[end] == '\n') ++end;
      }
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return;
    }
    fail(tag, "Missing end of comment tag");
  }

  void lex_tag(size_t tag, size_t p, bool is_variable) {
    emit(is_variable ? TokenType::kVariableBegin : TokenType::kBlockBegin, "", tag);
    std::vector<char> balance;
    while (p < src_.size()) {
      if (balance.empty()) {
        size_t end = 0;
        if (is_variable) {
          if (starts_with(p, "-}}")) {
            end = p + 3 + space_run(p + 3);
          } else if (starts_with(p, "}}")) {
            end = p + 2;
          }
        } else {
          if (starts_with(p, "+%}")) {
            end = p + 3;
          } else if (starts_with(p, "-%}")) {
            end = p + 3 + space_run(p + 3);
          } else if (starts_with(p, "%}")) {
            end = p + 2;
            if (end < src_.size() && src_[end] == '\n') ++end;
          }
        }
        if (end != 0) {
          emit(is_variable ? TokenType::kVariableEnd : TokenType::kBlockEnd, "", p);
          line_starting_ = src_[end - 1] == '\n';
          pos_ = end;
          return;
        }
      }
      if (const size_t ws = space_run(p); ws > 0) {
        p += ws;
        continue;
      }
      const char c = src_[p];
      if (is_digit(c)) {
        p = lex_number(p);
      } else if (is_name_start(c)) {
        size_t e = p;
        while (e < src_.size() && is_name_char(src_[e])) ++e;
        emit(TokenType::kName, src_.substr(p, e - p), p);
        p = e;
      } else if (c == '\'' || c == '"') {
        p = lex_string(p);
      } else {
        p = lex_operator(p, balance);
      }
    }
    pos_ = src_.size();  // unterminated tag: the parser reports the missing end
  }

  size_t lex_operator(size_t p, std::vector<char>& balance) {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwo) {
      if (starts_with(p, op)) {
        emit(TokenType::kOperator, std::string(op), p);
        return p + 2;
      }
    }
    const char c = src_[p];
    static constexpr std::string_view kOne = "+-/*%~[](){}><=.:|,;";
    if (kOne.find(c) == std::string_view::npos) {
      size_t next = p;
      std::string shown;
      pystr::append_cp(shown, pystr::decode(src_, next));
      fail(p, "unexpected char '" + shown + "'");
    }
    if (c == '(' || c == '[' || c == '{') {
      balance.push_back(c == '(' ? ')' : (c == '[' ? ']' : '}'));
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) fail(p, std::string("unexpected '") + c + "'");
      const char expected = balance.back();
      balance.pop_back();
      if (expected != c) {
        fail(p, std::string("unexpected '") + c + "', expected '" + expected + "'");
      }
    }
    emit(TokenType::kOperator, std::string(1, c), p);
    return p + 1;
  }

  // (\d+_)*\d+ at p; returns end or p when no digits.
  size_t digit_run(size_t p) const {
    size_t e = p;
    while (e < src_.size() && is_digit(src_[e])) {
      ++e;
      if (e + 1 < src_.size() && src_[e] == '_' && is_digit(src_[e + 1])) ++e;
    }
    return e;
  }

  size_t lex_number(size_t p) {
    // Float first, unless preceded by '.' (jinja2's lookbehind).
    if (p == 0 || src_[p - 1] != '.') {
      const size_t int_end = digit_run(p);
      size_t e = int_end;
      bool is_float = false;
      if (e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
        e = digit_run(e + 1);
        is_float = true;
      }
      if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
        size_t x = e + 1;
        if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
        if (x < src_.size() && is_digit(src_[x])) {
          e = digit_run(x);
          is_float = true;
        }
      }
      if (is_float) {
        std::string text;
        for (size_t k = p; k < e; ++k) {
          if (src_[k] != '_') text.push_back(src_[k]);
        }
        Token t;
        t.type = TokenType::kFloat;
        t.float_value = std::strtod(text.c_str(), nullptr);
        t.value = text;
        t.loc = loc(p);
        tokens_.push_back(std::move(t));
        return e;
      }
    }
    int base = 10;
    size_t digits = p;
    if (src_[p] == '0' && p + 1 < src_.size()) {
      const char x = static_cast<char>(src_[p + 1] | 0x20);
      if (x == 'b' || x == 'o' || x == 'x') {
        base = x == 'b' ? 2 : (x == 'o' ? 8 : 16);
        digits = p + 2;
      }
    }
    const auto is_base_digit = [&](char ch) {
      if (base == 2) return ch == '0' || ch == '1';
      if (base == 8) return ch >= '0' && ch <= '7';
      if (base == 16) return is_digit(ch) || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f');
      return is_digit(ch);
    };
    std::string text;
    size_t e = digits;
    if (base != 10) {
      // (_?digit)+
      while (e < src_.size()) {
        if (is_base_digit(src_[e])) {
          text.push_back(src_[e++]);
        } else if (src_[e] == '_' && e + 1 < src_.size() && is_base_digit(src_[e + 1])) {
          ++e;
        } else {
          break;
        }
      }
      if (text.empty()) {  // "0x" without digits lexes as the integer 0
        base = 10;
        e = p;
      }
    }
    if (base == 10) {
      text.clear();
      e = p;
      const bool zero = src_[p] == '0';
      while (e < src_.size()) {
        if (is_digit(src_[e]) && (!zero || src_[e] == '0')) {
          text.push_back(src_[e++]);
        } else if (src_[e] == '_' && e + 1 < src_.size() && is_digit(src_[e + 1]) &&
                   (!zero || src_[e + 1] == '0')) {
          ++e;
        } else {
          break;
        }
      }
    }
    errno = 0;
    char* parse_end = nullptr;
    const unsigned long long v = std::strtoull(text.c_str(), &parse_end, base);
    if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX)) {
      fail(p, "integer literal too large");
    }
    Token t;
    t.type = TokenType::kInteger;
    t.int_value = static_cast<int64_t>(v);
    t.value = text;
    t.loc = loc(p);
    tokens_.push_back(std::move(t));
    return e;
  }

  size_t lex_string(size_t p) {
    const char quote = src_[p];
    size_t e = p + 1;
    while (e < src_.size() && src_[e] != quote) {
      if (src_[e] == '\\') ++e;
      ++e;
    }
    if (e >= src_.size()) fail(p, "unexpected char '" + std::string(1, quote) + "'");
    Token t;
    t.type = TokenType::kString;
    t.value = unescape(p + 1, e);
    t.loc = loc(p);
    tokens_.push_back(std::move(t));
    return e + 1;
  }

  static int hex_value(char c) {
    if (is_digit(c)) return c - '0';
    const char l = static_cast<char>(c | 0x20);
    if (l >= 'a' && l <= 'f') return l - 'a' + 10;
    return -1;
  }

  // Python's unicode-escape decoding of a string literal body.
  std::string unescape(size_t begin, size_t end) const {
    std::string out;
    out.reserve(end - begin);
    size_t i = begin;
    while (i < end) {
      const char c = src_[i];
      if (c != '\\' || i + 1 >= end) {
        out.push_back(c);
        ++i;
        continue;
      }
      const char n = src_[i + 1];
      i += 2;
      switch (n) {
        case '\n':
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '\'':
          out.push_back('\'');
          break;
        case '"':
          out.push_back('"');
          break;
        case 'a':
          out.push_back('\a');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t width = n == 'x' ? 2 : (n == 'u' ? 4 : 8);
          uint32_t cp = 0;
          for (size_t k = 0; k < width; ++k) {
            const int h = i + k < end ? hex_value(src_[i + k]) : -1;
            if (h < 0) {
              fail(i - 2, std::string("truncated \\") + n + " escape");
            }
            cp = cp * 16 + static_cast<uint32_t>(h);
          }
          if (cp > 0x10FFFF) fail(i - 2, "illegal Unicode character");
          i += width;
          append_utf8(cp, out);
          break;
        }
        default:
          if (n >= '0' && n <= '7') {
            uint32_t cp = static_cast<uint32_t>(n - '0');
            for (int k = 0; k < 2 && i < end && src_[i] >= '0' && src_[i] <= '7'; ++k) {
              cp = cp * 8 + static_cast<uint32_t>(src_[i++] - '0');
            }
            append_utf8(cp, out);
          } else if (n == 'N') {
            fail(i - 2, "\\N{...} escapes are not supported");
          } else {
            out.push_back('\\');
            out.push_back(n);
          }
      }
    }
    return out;
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  bool line_starting_ = true;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace llms::jinja
