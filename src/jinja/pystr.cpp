// jinja/pystr: Python str semantics over UTF-8 (see pystr.h for the contract).
#include "pystr.h"

#include "util/utf8.h"
#include "value.h"

namespace llms::jinja::pystr {

uint32_t decode(std::string_view s, size_t& i) {
  const Utf8Step step = utf8_step(s, i);
  if (step.kind == Utf8Step::Kind::kValid) {
    i += step.length;
    return static_cast<uint32_t>(step.code_point);
  }
  return 0xDC00 + static_cast<uint8_t>(s[i++]);  // one invalid byte, as Python's surrogateescape
}

void append_cp(std::string& out, uint32_t cp) {
  if (cp >= 0xDC80 && cp <= 0xDCFF) {
    out.push_back(static_cast<char>(cp - 0xDC00));  // an invalid byte, copied through
  } else {
    append_utf8(cp, out);
  }
}

bool is_space(uint32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
  if (cp < 0x85) return false;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool is_ascii(std::string_view s) {
  for (char c : s) {
    if (static_cast<uint8_t>(c) >= 0x80) return false;
  }
  return true;
}

size_t length(std::string_view s) {
  if (is_ascii(s)) return s.size();
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) decode(s, i);
  return n;
}

std::vector<size_t> offsets(std::string_view s) {
  std::vector<size_t> out;
  out.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size();) {
    out.push_back(i);
    decode(s, i);
  }
  out.push_back(s.size());
  return out;
}

std::vector<uint32_t> code_points(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) out.push_back(decode(s, i));
  return out;
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right) {
  std::vector<uint32_t> set;
  if (chars) set = code_points(*chars);
  const auto strippable = [&](uint32_t cp) {
    if (!chars) return is_space(cp);
    for (uint32_t c : set) {
      if (c == cp) return true;
    }
    return false;
  };
  const std::vector<size_t> off = offsets(s);
  const std::vector<uint32_t> cps = code_points(s);
  size_t begin = 0;
  size_t end = cps.size();
  if (left) {
    while (begin < end && strippable(cps[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strippable(cps[end - 1])) --end;
  }
  return std::string(s.substr(off[begin], off[end] - off[begin]));
}

namespace {

// Whitespace split from the left, as CPython's split_whitespace.
std::vector<std::string> split_ws(std::string_view s, int64_t maxsplit) {
  const std::vector<uint32_t> cps = code_points(s);
  const std::vector<size_t> off = offsets(s);
  std::vector<std::string> out;
  size_t i = 0;
  const size_t n = cps.size();
  while (true) {
    while (i < n && is_space(cps[i])) ++i;
    if (i == n) break;
    if (maxsplit == 0) {
      out.emplace_back(s.substr(off[i]));
      break;
    }
    const size_t j = i;
    while (i < n && !is_space(cps[i])) ++i;
    out.emplace_back(s.substr(off[j], off[i] - off[j]));
    if (maxsplit > 0) --maxsplit;
  }
  return out;
}

std::vector<std::string> rsplit_ws(std::string_view s, int64_t maxsplit) {
  const std::vector<uint32_t> cps = code_points(s);
  const std::vector<size_t> off = offsets(s);
  std::vector<std::string> out;
  size_t i = cps.size();
  while (true) {
    while (i > 0 && is_space(cps[i - 1])) --i;
    if (i == 0) break;
    if (maxsplit == 0) {
      out.emplace_back(s.substr(0, off[i]));
      break;
    }
    const size_t j = i;
    while (i > 0 && !is_space(cps[i - 1])) --i;
    out.emplace_back(s.substr(off[i], off[j] - off[i]));
    if (maxsplit > 0) --maxsplit;
  }
  return {out.rbegin(), out.rend()};
}

}  // namespace

namespace {

// Leftmost non-overlapping matches of `needle` in `hay` by Knuth-Morris-Pratt.
std::vector<size_t> kmp_all(std::string_view hay, std::string_view needle, int64_t limit) {
  std::vector<size_t> out;
  const size_t m = needle.size();
  if (m == 0 || m > hay.size() || limit == 0) return out;
  std::vector<size_t> fail(m, 0);
  for (size_t i = 1, k = 0; i < m; ++i) {
    while (k > 0 && needle[i] != needle[k]) k = fail[k - 1];
    if (needle[i] == needle[k]) ++k;
    fail[i] = k;
  }
  size_t k = 0;
  for (size_t i = 0; i < hay.size(); ++i) {
    while (k > 0 && hay[i] != needle[k]) k = fail[k - 1];
    if (hay[i] == needle[k]) ++k;
    if (k == m) {
      out.push_back(i + 1 - m);
      if (limit > 0 && static_cast<int64_t>(out.size()) >= limit) break;
      k = 0;  // non-overlapping: restart after the match
    }
  }
  return out;
}

}  // namespace

std::vector<size_t> find_all(std::string_view hay, std::string_view needle, int64_t limit) {
  return kmp_all(hay, needle, limit);
}

std::vector<size_t> rfind_all(std::string_view hay, std::string_view needle, int64_t limit) {
  const std::string rhay(hay.rbegin(), hay.rend());
  const std::string rneedle(needle.rbegin(), needle.rend());
  std::vector<size_t> out = kmp_all(rhay, rneedle, limit);
  for (size_t& pos : out) pos = hay.size() - pos - needle.size();
  return out;
}

bool contains(std::string_view hay, std::string_view needle) {
  return needle.empty() || !kmp_all(hay, needle, 1).empty();
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit) {
  if (!sep) return split_ws(s, maxsplit);
  if (sep->empty()) throw EvalError("empty separator");
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t pos : find_all(s, *sep, maxsplit)) {
    out.emplace_back(s.substr(start, pos - start));
    start = pos + sep->size();
  }
  out.emplace_back(s.substr(start));
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit) {
  if (!sep) return rsplit_ws(s, maxsplit);
  if (sep->empty()) throw EvalError("empty separator");
  std::vector<std::string> out;
  size_t end = s.size();
  for (size_t pos : rfind_all(s, *sep, maxsplit)) {
    out.emplace_back(s.substr(pos + sep->size(), end - pos - sep->size()));
    end = pos;
  }
  out.emplace_back(s.substr(0, end));
  return {out.rbegin(), out.rend()};
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  size_t line_start = 0;
  size_t i = 0;
  while (i < s.size()) {
    const size_t at = i;
    const uint32_t cp = decode(s, i);
    const bool is_break = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C ||
                          cp == 0x1D || cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!is_break) continue;
    if (cp == '\r' && i < s.size() && s[i] == '\n') ++i;
    out.emplace_back(s.substr(line_start, (keepends ? i : at) - line_start));
    line_start = i;
  }
  if (line_start < s.size()) out.emplace_back(s.substr(line_start));
  return out;
}

namespace {

// Ranges of alternating upper/lower pairs; the upper case letter has parity `upper_parity`.
struct PairRange {
  uint32_t lo, hi, upper_parity;
};
constexpr PairRange kPairRanges[] = {
    {0x0100, 0x012F, 0}, {0x0132, 0x0137, 0}, {0x0139, 0x0148, 1}, {0x014A, 0x0177, 0},
    {0x0179, 0x017E, 1}, {0x0460, 0x0481, 0}, {0x048A, 0x04BF, 0},
};

}  // namespace

uint32_t to_upper(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
  if (cp >= 0xE0 && cp <= 0xFE && cp != 0xF7) return cp - 32;
  if (cp == 0xFF) return 0x178;
  if (cp == 0xB5) return 0x39C;
  for (const PairRange& r : kPairRanges) {
    if (cp >= r.lo && cp <= r.hi && (cp & 1) != r.upper_parity) return cp - 1;
  }
  if (cp >= 0x3B1 && cp <= 0x3C9) return cp == 0x3C2 ? 0x3A3 : cp - 32;
  if (cp == 0x3AC) return 0x386;
  if (cp >= 0x3AD && cp <= 0x3AF) return cp - 37;
  if (cp == 0x3CC) return 0x38C;
  if (cp == 0x3CD || cp == 0x3CE) return cp - 63;
  if (cp >= 0x430 && cp <= 0x44F) return cp - 32;
  if (cp >= 0x450 && cp <= 0x45F) return cp - 80;
  return cp;
}

uint32_t to_lower(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) return cp + 32;
  if (cp == 0x178) return 0xFF;
  for (const PairRange& r : kPairRanges) {
    if (cp >= r.lo && cp <= r.hi && (cp & 1) == r.upper_parity) return cp + 1;
  }
  if (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2) return cp + 32;
  if (cp == 0x386) return 0x3AC;
  if (cp >= 0x388 && cp <= 0x38A) return cp + 37;
  if (cp == 0x38C) return 0x3CC;
  if (cp == 0x38E || cp == 0x38F) return cp + 63;
  if (cp >= 0x410 && cp <= 0x42F) return cp + 32;
  if (cp >= 0x400 && cp <= 0x40F) return cp + 80;
  return cp;
}

namespace {

bool is_cased(uint32_t cp) { return to_upper(cp) != cp || to_lower(cp) != cp || cp == 0xDF; }

template <typename F>
std::string map_cps(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) append_cp(out, f(decode(s, i)));
  return out;
}

}  // namespace

std::string upper(std::string_view s) { return map_cps(s, to_upper); }
std::string lower(std::string_view s) { return map_cps(s, to_lower); }

std::string title(std::string_view s) {
  bool previous_cased = false;
  return map_cps(s, [&](uint32_t cp) {
    const uint32_t mapped = previous_cased ? to_lower(cp) : to_upper(cp);
    previous_cased = is_cased(cp);
    return mapped;
  });
}

std::string capitalize(std::string_view s) {
  bool first = true;
  return map_cps(s, [&](uint32_t cp) {
    const uint32_t mapped = first ? to_upper(cp) : to_lower(cp);
    first = false;
    return mapped;
  });
}

std::string title_filter(std::string_view s) {
  bool word_start = true;
  return map_cps(s, [&](uint32_t cp) {
    const bool separator =
        cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || is_space(cp);
    if (separator) {
      word_start = true;
      return cp;
    }
    const uint32_t mapped = word_start ? to_upper(cp) : to_lower(cp);
    word_start = false;
    return mapped;
  });
}

std::string replace(std::string_view s, std::string_view old_s, std::string_view new_s,
                    int64_t count) {
  std::string out;
  if (old_s.empty()) {
    // Python inserts `new` before every code point and at the end.
    const std::vector<size_t> off = offsets(s);
    for (size_t k = 0; k + 1 < off.size(); ++k) {
      if (count != 0) {
        out.append(new_s);
        if (count > 0) --count;
      }
      out.append(s.substr(off[k], off[k + 1] - off[k]));
    }
    if (count != 0) out.append(new_s);
    return out;
  }
  size_t start = 0;
  for (size_t pos : find_all(s, old_s, count)) {
    out.append(s.substr(start, pos - start));
    out.append(new_s);
    start = pos + old_s.size();
  }
  out.append(s.substr(start));
  return out;
}

int64_t find(std::string_view s, std::string_view sub) {
  if (sub.empty()) return 0;
  const std::vector<size_t> at = find_all(s, sub, 1);
  if (at.empty()) return -1;
  return static_cast<int64_t>(length(s.substr(0, at[0])));
}

int64_t rfind(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(length(s));
  const std::vector<size_t> at = rfind_all(s, sub, 1);
  if (at.empty()) return -1;
  return static_cast<int64_t>(length(s.substr(0, at[0])));
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(length(s)) + 1;
  return static_cast<int64_t>(find_all(s, sub, -1).size());
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

}  // namespace llms::jinja::pystr
