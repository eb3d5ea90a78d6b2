// structured/code_point_set: see code_point_set.h.
#include "code_point_set.h"

#include <algorithm>

namespace llms::structured {
namespace {

constexpr uint32_t kSurrogateLo = 0xD800;
constexpr uint32_t kSurrogateHi = 0xDFFF;

int utf8_length(uint32_t cp) {
  if (cp < 0x80) return 1;
  if (cp < 0x800) return 2;
  if (cp < 0x10000) return 3;
  return 4;
}

void encode(uint32_t cp, int length, uint8_t* out) {
  switch (length) {
    case 1:
      out[0] = static_cast<uint8_t>(cp);
      break;
    case 2:
      out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
      out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      break;
    case 3:
      out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
      out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      break;
    default:
      out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
      out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
      out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      break;
  }
}

// Splits [lo, hi] (no surrogates inside) until every piece encodes as independent byte ranges:
// first at the boundaries where the encoded length changes, then wherever a lower-order byte does
// not cover its full continuation range. Recursion depth is bounded by the 4 byte positions.
void split_range(uint32_t lo, uint32_t hi, std::vector<ByteSequence>& out) {
  if (lo > hi) return;
  for (uint32_t boundary : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= boundary && hi > boundary) {
      split_range(lo, boundary, out);
      split_range(boundary + 1, hi, out);
      return;
    }
  }
  const int length = utf8_length(lo);
  for (int i = 1; i < length; ++i) {
    const uint32_t low_bits = (1u << (6 * i)) - 1;
    if ((lo & ~low_bits) != (hi & ~low_bits)) {
      if ((lo & low_bits) != 0) {
        split_range(lo, lo | low_bits, out);
        split_range((lo | low_bits) + 1, hi, out);
        return;
      }
      if ((hi & low_bits) != low_bits) {
        split_range(lo, (hi & ~low_bits) - 1, out);
        split_range(hi & ~low_bits, hi, out);
        return;
      }
    }
  }
  uint8_t lo_bytes[4];
  uint8_t hi_bytes[4];
  encode(lo, length, lo_bytes);
  encode(hi, length, hi_bytes);
  ByteSequence seq;
  seq.length = length;
  for (int i = 0; i < length; ++i) seq.ranges[i] = ByteRange{lo_bytes[i], hi_bytes[i]};
  out.push_back(seq);
}

}  // namespace

CodePointSet CodePointSet::range(uint32_t lo, uint32_t hi) {
  CodePointSet set;
  set.add(lo, hi);
  return set;
}

CodePointSet CodePointSet::all() { return range(0, kMaxCodePoint); }

void CodePointSet::add(uint32_t lo, uint32_t hi) {
  hi = std::min(hi, kMaxCodePoint);
  if (lo > hi) return;
  // Members written in order (a class, a set built range by range) extend the last range or
  // follow it, with no sort and no allocation; anything else is normalized.
  const bool clear_of_surrogates = hi < kSurrogateLo || lo > kSurrogateHi;
  if (clear_of_surrogates && (ranges_.empty() || lo > ranges_.back().hi + 1)) {
    ranges_.push_back({lo, hi});
    return;
  }
  if (clear_of_surrogates && lo >= ranges_.back().lo) {
    ranges_.back().hi = std::max(ranges_.back().hi, hi);
    return;
  }
  ranges_.push_back({lo, hi});
  normalize();
}

void CodePointSet::add(const CodePointSet& other) {
  if (other.ranges_.empty()) return;
  const bool follows = ranges_.empty() || other.ranges_.front().lo > ranges_.back().hi + 1;
  ranges_.insert(ranges_.end(), other.ranges_.begin(), other.ranges_.end());
  if (!follows) normalize();  // `other` is normal already: after our last range, so is the union
}

CodePointSet CodePointSet::negated() const {
  CodePointSet result;
  uint32_t next = 0;
  for (const CodePointRange& r : ranges_) {
    if (r.lo > next) result.ranges_.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) result.ranges_.push_back({next, kMaxCodePoint});
  result.normalize();
  return result;
}

bool CodePointSet::contains(uint32_t cp) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), cp,
                             [](uint32_t value, const CodePointRange& r) { return value < r.lo; });
  if (it == ranges_.begin()) return false;
  --it;
  return cp <= it->hi;
}

void CodePointSet::normalize() {
  // Cut the surrogates out first: they can never be encoded, so they are never members.
  auto touches_surrogates = [](const CodePointRange& r) {
    return r.lo <= kSurrogateHi && r.hi >= kSurrogateLo;
  };
  if (std::any_of(ranges_.begin(), ranges_.end(), touches_surrogates)) {
    std::vector<CodePointRange> pieces;
    pieces.reserve(ranges_.size() + 1);
    for (const CodePointRange& r : ranges_) {
      if (!touches_surrogates(r)) {
        pieces.push_back(r);
        continue;
      }
      if (r.lo < kSurrogateLo) pieces.push_back({r.lo, kSurrogateLo - 1});
      if (r.hi > kSurrogateHi) pieces.push_back({kSurrogateHi + 1, r.hi});
    }
    ranges_.swap(pieces);
  }
  auto by_lo = [](const CodePointRange& a, const CodePointRange& b) { return a.lo < b.lo; };
  if (!std::is_sorted(ranges_.begin(), ranges_.end(), by_lo)) {
    std::sort(ranges_.begin(), ranges_.end(), by_lo);
  }
  // Merge overlapping and adjacent ranges in place.
  size_t kept = 0;
  for (size_t i = 0; i < ranges_.size(); ++i) {
    if (kept > 0 && ranges_[i].lo <= ranges_[kept - 1].hi + 1) {
      ranges_[kept - 1].hi = std::max(ranges_[kept - 1].hi, ranges_[i].hi);
    } else {
      ranges_[kept++] = ranges_[i];
    }
  }
  ranges_.resize(kept);
}

std::vector<ByteSequence> utf8_sequences(const CodePointSet& set) {
  std::vector<ByteSequence> out;
  for (const CodePointRange& r : set.ranges()) split_range(r.lo, r.hi, out);
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  uint8_t bytes[4];
  const int length = utf8_length(cp);
  encode(cp, length, bytes);
  out.append(reinterpret_cast<const char*>(bytes), static_cast<size_t>(length));
}

int decode_utf8(const char* data, size_t size, uint32_t& cp) {
  if (size == 0) return 0;
  const auto* s = reinterpret_cast<const uint8_t*>(data);
  const uint8_t b0 = s[0];
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  int length = 0;
  uint32_t value = 0;
  uint32_t min_value = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
    value = b0 & 0x1F;
    min_value = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    value = b0 & 0x0F;
    min_value = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    value = b0 & 0x07;
    min_value = 0x10000;
  } else {
    return 0;
  }
  if (size < static_cast<size_t>(length)) return 0;
  for (int i = 1; i < length; ++i) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    value = (value << 6) | (s[i] & 0x3F);
  }
  if (value < min_value || value > kMaxCodePoint) return 0;
  if (value >= kSurrogateLo && value <= kSurrogateHi) return 0;
  cp = value;
  return length;
}

int decode_utf8(const std::string& text, size_t pos, uint32_t& cp) {
  if (pos >= text.size()) return 0;
  return decode_utf8(text.data() + pos, text.size() - pos, cp);
}

}  // namespace llms::structured
