// util/utf8: see utf8.h. The decoder follows Unicode Table 3-7 byte by byte, so the length
// of an ill-formed subpart is exactly the number of bytes that still looked like a prefix of a
// well-formed sequence.
#include "util/utf8.h"

namespace llms {

namespace {

// Valid range of the second byte for a given lead byte (Table 3-7); later bytes are 80..BF.
struct LeadInfo {
  uint8_t length;  // 0 = not a valid lead byte
  uint8_t second_lo;
  uint8_t second_hi;
};

constexpr LeadInfo lead_info(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

Utf8Step utf8_step(std::string_view text, size_t pos) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data()) + pos;
  const size_t avail = text.size() - pos;
  const uint8_t b0 = p[0];
  if (b0 < 0x80) return {Utf8Step::Kind::kValid, 1, b0};
  const LeadInfo info = lead_info(b0);
  if (info.length == 0) return {Utf8Step::Kind::kInvalid, 1, 0};
  char32_t cp = b0 & (0xFF >> (info.length + 1));
  for (uint32_t i = 1; i < info.length; ++i) {
    if (i >= avail) return {Utf8Step::Kind::kIncomplete, i, 0};
    const uint8_t b = p[i];
    const uint8_t lo = i == 1 ? info.second_lo : 0x80;
    const uint8_t hi = i == 1 ? info.second_hi : 0xBF;
    if (b < lo || b > hi) return {Utf8Step::Kind::kInvalid, i, 0};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {Utf8Step::Kind::kValid, info.length, cp};
}

size_t find_invalid_utf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    // ASCII fast path: eight bytes at a time.
    while (pos + 8 <= text.size()) {
      uint64_t word = 0;
      for (int i = 0; i < 8; ++i) {
        word |= static_cast<uint64_t>(static_cast<uint8_t>(text[pos + i])) << (8 * i);
      }
      if (word & 0x8080808080808080ull) break;
      pos += 8;
    }
    if (pos >= text.size()) break;
    const Utf8Step step = utf8_step(text, pos);
    if (step.kind != Utf8Step::Kind::kValid) return pos;
    pos += step.length;
  }
  return std::string_view::npos;
}

bool is_valid_utf8(std::string_view text) {
  return find_invalid_utf8(text) == std::string_view::npos;
}

void append_utf8_lossy(std::string_view text, std::string& out) {
  size_t pos = 0;
  size_t run_start = 0;  // start of the current run of valid bytes, copied in one go
  while (pos < text.size()) {
    const Utf8Step step = utf8_step(text, pos);
    if (step.kind == Utf8Step::Kind::kValid) {
      pos += step.length;
      continue;
    }
    out.append(text.substr(run_start, pos - run_start));
    out.append(kReplacementUtf8);
    pos += step.length;
    run_start = pos;
  }
  out.append(text.substr(run_start));
}

std::string utf8_lossy(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  append_utf8_lossy(text, out);
  return out;
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t utf8_settled_length(std::string_view text) {
  // An unfinished sequence is at most 3 bytes long, so only the tail needs a look.
  const size_t start = text.size() > 3 ? text.size() - 3 : 0;
  for (size_t pos = start; pos < text.size(); ++pos) {
    const auto b = static_cast<uint8_t>(text[pos]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte cannot start a sequence
    const Utf8Step step = utf8_step(text, pos);
    // Every byte outside 80..BF ends the subpart before it and starts a new one, so `pos` is
    // a sequence start in the left-to-right decoding of the whole text.
    if (step.kind == Utf8Step::Kind::kIncomplete) return pos;
  }
  return text.size();
}

size_t utf8_length(std::string_view valid_text) {
  size_t n = 0;
  for (char c : valid_text) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return n;
}

}  // namespace llms
