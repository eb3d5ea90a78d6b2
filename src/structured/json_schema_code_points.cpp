// structured/json_schema_code_points: see json_schema_code_points.h.
#include "structured/json_schema_code_points.h"

#include <algorithm>
#include <cassert>
#include <cstdio>

#include "util/error.h"
#include "util/utf8.h"

namespace llms::structured::jsonschema {

CodePointSet CodePointSet::range(char32_t lo, char32_t hi) {
  CodePointSet set;
  set.add(lo, hi);
  return set;
}

void CodePointSet::add(char32_t lo, char32_t hi) {
  if (lo > hi) return;
  hi = std::min(hi, kMaxCodePoint);
  if (lo > hi) return;
  std::vector<std::pair<char32_t, char32_t>> merged;
  merged.reserve(ranges_.size() + 1);
  bool placed = false;
  for (const auto& r : ranges_) {
    // Ranges that touch or overlap [lo, hi] are absorbed into it.
    if (r.second + 1 < lo) {
      merged.push_back(r);
    } else if (hi + 1 < r.first) {
      if (!placed) merged.emplace_back(lo, hi), placed = true;
      merged.push_back(r);
    } else {
      lo = std::min(lo, r.first);
      hi = std::max(hi, r.second);
    }
  }
  if (!placed) merged.emplace_back(lo, hi);
  ranges_ = std::move(merged);
}

void CodePointSet::add(const CodePointSet& other) {
  for (const auto& r : other.ranges_) add(r.first, r.second);
}

CodePointSet CodePointSet::complement() const {
  CodePointSet out;
  char32_t next = 0;
  for (const auto& r : ranges_) {
    if (r.first > next) out.ranges_.emplace_back(next, r.first - 1);
    next = r.second + 1;
  }
  if (next <= kMaxCodePoint) out.ranges_.emplace_back(next, kMaxCodePoint);
  return out;
}

CodePointSet CodePointSet::intersect(const CodePointSet& other) const {
  CodePointSet out;
  size_t i = 0, j = 0;
  while (i < ranges_.size() && j < other.ranges_.size()) {
    const char32_t lo = std::max(ranges_[i].first, other.ranges_[j].first);
    const char32_t hi = std::min(ranges_[i].second, other.ranges_[j].second);
    if (lo <= hi) out.ranges_.emplace_back(lo, hi);
    if (ranges_[i].second < other.ranges_[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return out;
}

bool CodePointSet::contains(char32_t cp) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), cp,
                             [](char32_t c, const auto& r) { return c < r.first; });
  if (it == ranges_.begin()) return false;
  --it;
  return cp <= it->second;
}

void append_regex_code_point(char32_t cp, std::string& out) {
  // Upper-case hex digits, `digits` of them (no printf: the excluded-names patterns of a large
  // schema write tens of thousands of these).
  auto hex = [&](uint32_t value, int digits) {
    static constexpr char kDigits[] = "0123456789ABCDEF";
    for (int shift = 4 * (digits - 1); shift >= 0; shift -= 4)
      out.push_back(kDigits[(value >> shift) & 0xF]);
  };
  if ((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) {
    out.push_back(static_cast<char>(cp));
  } else if (cp > 0x20 && cp < 0x7F) {
    out.push_back('\\');  // escaped punctuation is always literal
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x80) {
    out += "\\x";
    hex(cp, 2);
  } else if (cp <= 0xFFFF) {
    out += "\\u";
    hex(cp, 4);
  } else {
    out += "\\u{";
    int digits = 1;
    while (digits < 8 && (cp >> (4 * digits)) != 0) ++digits;
    hex(cp, digits);
    out.push_back('}');
  }
}

std::string regex_literal(const std::string& text) {
  std::string out;
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Step step = utf8_step(text, pos);
    if (step.kind != Utf8Step::Kind::kValid) {
      throw Error(Error::Kind::kInvalidArgument, "JSON Schema: a string is not valid UTF-8");
    }
    append_regex_code_point(step.code_point, out);
    pos += step.length;
  }
  return out;
}

namespace {

// A regex class (or a single atom) for the code points of `set`.
std::string class_regex(const CodePointSet& set) {
  const auto& ranges = set.ranges();
  std::string out;
  if (ranges.size() == 1 && ranges[0].first == ranges[0].second) {
    append_regex_code_point(ranges[0].first, out);
    return out;
  }
  out.push_back('[');
  for (const auto& [lo, hi] : ranges) {
    append_regex_code_point(lo, out);
    if (hi != lo) {
      if (hi != lo + 1) out.push_back('-');
      append_regex_code_point(hi, out);
    }
  }
  out.push_back(']');
  return out;
}

// One hex digit value range [lo, hi] as a class; both letter cases when `both_cases`.
std::string make_hex_digit_class(unsigned lo, unsigned hi, bool both_cases) {
  CodePointSet set;
  for (unsigned d = lo; d <= hi; ++d) {
    if (d < 10) {
      set.add(U'0' + d, U'0' + d);
    } else {
      set.add(U'a' + d - 10, U'a' + d - 10);
      if (both_cases) set.add(U'A' + d - 10, U'A' + d - 10);
    }
  }
  return class_regex(set);
}

// The same from a table of all 16 x 16 x 2 of them, made once: every \\uXXXX spelling of a
// pattern's class asks for several, and a schema's patterns have hundreds of classes.
const std::string& hex_digit_class(unsigned lo, unsigned hi, bool both_cases) {
  assert(lo <= hi && hi < 16);
  static const std::vector<std::string> kTable = [] {
    std::vector<std::string> table(16 * 16 * 2);
    for (unsigned l = 0; l < 16; ++l) {
      for (unsigned h = l; h < 16; ++h) {
        for (unsigned both = 0; both < 2; ++both) {
          table[(l * 16 + h) * 2 + both] = make_hex_digit_class(l, h, both != 0);
        }
      }
    }
    return table;
  }();
  return kTable[(lo * 16 + hi) * 2 + (both_cases ? 1 : 0)];
}

// Alternatives matching the `width`-digit hex numerals of the values in [lo, hi].
void hex_range_alternatives(uint32_t lo, uint32_t hi, int width, bool both_cases,
                            const std::string& prefix, std::vector<std::string>& out) {
  if (width == 0) {
    out.push_back(prefix);
    return;
  }
  const int shift = 4 * (width - 1);
  const uint32_t block = 1u << shift;  // values sharing one leading digit
  const uint32_t lo_digit = lo >> shift, hi_digit = hi >> shift;
  const uint32_t lo_rest = lo & (block - 1), hi_rest = hi & (block - 1);
  auto any_rest = [&](uint32_t first, uint32_t last) {
    std::string alt = prefix + hex_digit_class(first, last, both_cases);
    if (width > 1) {
      alt += hex_digit_class(0, 15, both_cases);
      if (width > 2) alt += "{" + std::to_string(width - 1) + "}";
    }
    out.push_back(std::move(alt));
  };
  if (lo_digit == hi_digit) {
    if (lo_rest == 0 && hi_rest == block - 1) {
      any_rest(lo_digit, lo_digit);
    } else {
      hex_range_alternatives(lo_rest, hi_rest, width - 1, both_cases,
                             prefix + hex_digit_class(lo_digit, lo_digit, both_cases), out);
    }
    return;
  }
  uint32_t first_full = lo_digit, last_full = hi_digit;
  if (lo_rest != 0) {
    hex_range_alternatives(lo_rest, block - 1, width - 1, both_cases,
                           prefix + hex_digit_class(lo_digit, lo_digit, both_cases), out);
    ++first_full;
  }
  const bool hi_partial = hi_rest != block - 1;
  if (hi_partial) --last_full;  // hi_digit > lo_digit >= 0, so no underflow
  if (first_full <= last_full) any_rest(first_full, last_full);
  if (hi_partial) {
    hex_range_alternatives(0, hi_rest, width - 1, both_cases,
                           prefix + hex_digit_class(hi_digit, hi_digit, both_cases), out);
  }
}

std::string join_alternatives(const std::vector<std::string>& alternatives) {
  if (alternatives.size() == 1) return alternatives[0];
  std::string out = "(?:";
  for (size_t i = 0; i < alternatives.size(); ++i) {
    if (i) out.push_back('|');
    out += alternatives[i];
  }
  out.push_back(')');
  return out;
}

// The \uXXXX spellings (hex digits in either case) of the BMP characters of `set`, and the
// \uXXXX\uXXXX surrogate pairs of the others; each alternative starts after the backslash.
void unicode_escape_alternatives(const CodePointSet& set, std::vector<std::string>& out) {
  CodePointSet bmp =
      set.intersect(CodePointSet::range(0, 0xFFFF)).minus(CodePointSet::range(0xD800, 0xDFFF));
  for (const auto& [lo, hi] : bmp.ranges()) hex_range_alternatives(lo, hi, 4, true, "u", out);
  const CodePointSet astral = set.intersect(CodePointSet::range(0x10000, kMaxCodePoint));
  // A UTF-16 pair: 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF) with v = cp - 0x10000.
  auto add_pairs = [&](uint32_t high_first, uint32_t high_last, uint32_t low_first,
                       uint32_t low_last) {
    std::vector<std::string> highs, lows;
    hex_range_alternatives(0xD800 + high_first, 0xD800 + high_last, 4, true, "", highs);
    hex_range_alternatives(0xDC00 + low_first, 0xDC00 + low_last, 4, true, "", lows);
    out.push_back("u" + join_alternatives(highs) + "\\\\u" + join_alternatives(lows));
  };
  for (const auto& [lo, hi] : astral.ranges()) {
    uint32_t high_first = (lo - 0x10000) >> 10, high_last = (hi - 0x10000) >> 10;
    const uint32_t low_first = (lo - 0x10000) & 0x3FF, low_last = (hi - 0x10000) & 0x3FF;
    if (high_first == high_last) {
      add_pairs(high_first, high_first, low_first, low_last);
      continue;
    }
    if (low_first != 0) add_pairs(high_first, high_first, low_first, 0x3FF), ++high_first;
    const bool last_partial = low_last != 0x3FF;
    if (last_partial) --high_last;
    if (high_first <= high_last) add_pairs(high_first, high_last, 0, 0x3FF);
    if (last_partial) add_pairs(high_last + 1, high_last + 1, 0, low_last);
  }
}

}  // namespace

std::string json_char_regex(const CodePointSet& set, StringSpelling spelling) {
  static const CodePointSet kRaw = [] {
    CodePointSet raw;
    raw.add(0x20, 0x21);
    raw.add(0x23, 0x5B);
    raw.add(0x5D, 0xD7FF);
    raw.add(0xE000, kMaxCodePoint);
    return raw;
  }();
  // One character written as itself (property names, excluded names: most calls): its regex
  // atom alone. Under kAnyEscape every character also has its \uXXXX spellings.
  const auto& ranges = set.ranges();
  if (spelling != StringSpelling::kAnyEscape && ranges.size() == 1 &&
      ranges[0].first == ranges[0].second && kRaw.contains(ranges[0].first)) {
    std::string atom;
    append_regex_code_point(ranges[0].first, atom);
    return atom;
  }
  std::vector<std::string> alternatives;
  const CodePointSet raw = set.intersect(kRaw);
  if (!raw.empty()) alternatives.push_back(class_regex(raw));

  std::vector<std::string> escapes;  // what follows the backslash
  CodePointSet short_escapes;        // the escape letters of \" \\ \/ \b \f \n \r \t
  const std::pair<char32_t, char32_t> kShort[] = {{U'"', U'"'}, {U'\\', U'\\'}, {U'/', U'/'},
                                                  {0x08, U'b'}, {0x0C, U'f'},   {0x0A, U'n'},
                                                  {0x0D, U'r'}, {0x09, U't'}};
  for (const auto& [cp, letter] : kShort) {
    if (cp == U'/' && spelling != StringSpelling::kAnyEscape) continue;
    if (spelling == StringSpelling::kName && cp != U'"' && cp != U'\\') continue;
    if (set.contains(cp)) short_escapes.add(letter, letter);
  }
  if (!short_escapes.empty()) escapes.push_back(class_regex(short_escapes));
  if (spelling == StringSpelling::kAnyEscape) {
    unicode_escape_alternatives(set, escapes);
  } else if (spelling == StringSpelling::kCanonical) {
    CodePointSet controls = set.intersect(CodePointSet::range(0, 0x1F));
    for (char32_t cp : {0x08, 0x09, 0x0A, 0x0C, 0x0D}) {
      controls = controls.minus(CodePointSet::of(cp));
    }
    for (const auto& [lo, hi] : controls.ranges()) {
      hex_range_alternatives(lo, hi, 4, false, "u", escapes);
    }
  }
  if (!escapes.empty()) alternatives.push_back("\\\\" + join_alternatives(escapes));
  if (alternatives.empty()) return {};
  return join_alternatives(alternatives);
}

void append_canonical_json_char(char32_t cp, std::string& out) {
  switch (cp) {
    case U'"':
      out += "\\\"";
      return;
    case U'\\':
      out += "\\\\";
      return;
    case 0x08:
      out += "\\b";
      return;
    case 0x0C:
      out += "\\f";
      return;
    case 0x0A:
      out += "\\n";
      return;
    case 0x0D:
      out += "\\r";
      return;
    case 0x09:
      out += "\\t";
      return;
    default:
      break;
  }
  if (cp < 0x20) {
    char buffer[8];
    std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(cp));
    out += buffer;
    return;
  }
  append_utf8(cp, out);
}

std::string canonical_json_string(const std::string& text) {
  std::string out = "\"";
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Step step = utf8_step(text, pos);
    if (step.kind != Utf8Step::Kind::kValid) {
      throw Error(Error::Kind::kInvalidArgument, "JSON Schema: a string is not valid UTF-8");
    }
    append_canonical_json_char(step.code_point, out);
    pos += step.length;
  }
  out.push_back('"');
  return out;
}

}  // namespace llms::structured::jsonschema
