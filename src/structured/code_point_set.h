// structured/code_point_set: sets of Unicode scalar values and their UTF-8 byte-range encoding.
//
// Character classes of grammars and regexes are sets of code points; automata run over bytes.
// utf8_sequences() turns a set into byte-range sequences (each 1 to 4 ranges long) whose
// concatenations are exactly the UTF-8 encodings of the set's members, so a class compiles to a
// handful of automaton paths however many code points it holds. Surrogates (U+D800..U+DFFF)
// have no UTF-8 encoding and are never members.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace llms::structured {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

struct CodePointRange {
  uint32_t lo = 0;
  uint32_t hi = 0;  // inclusive
  bool operator==(const CodePointRange&) const = default;
};

class CodePointSet {
 public:
  CodePointSet() = default;
  static CodePointSet single(uint32_t cp) { return range(cp, cp); }
  static CodePointSet range(uint32_t lo, uint32_t hi);
  static CodePointSet all();  // every scalar value

  void add(uint32_t lo, uint32_t hi);
  void add(const CodePointSet& other);
  CodePointSet negated() const;  // within the scalar values

  bool contains(uint32_t cp) const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<CodePointRange>& ranges() const { return ranges_; }

 private:
  void normalize();  // sorts, merges, drops surrogates

  std::vector<CodePointRange> ranges_;  // sorted, disjoint, not adjacent
};

struct ByteRange {
  uint8_t lo = 0;
  uint8_t hi = 0;  // inclusive
};

// One UTF-8 encoding shape: the i-th byte lies in ranges[i], for i < length.
struct ByteSequence {
  std::array<ByteRange, 4> ranges{};
  int length = 0;
};

std::vector<ByteSequence> utf8_sequences(const CodePointSet& set);

// Appends the UTF-8 encoding of a scalar value.
void append_utf8(std::string& out, uint32_t cp);

// Decodes one UTF-8 character at text[pos]; returns its length (1..4) and sets cp, or 0 if the
// bytes there are not a complete, valid (shortest-form, non-surrogate) character.
int decode_utf8(const std::string& text, size_t pos, uint32_t& cp);
int decode_utf8(const char* data, size_t size, uint32_t& cp);

}  // namespace llms::structured
