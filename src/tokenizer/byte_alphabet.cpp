// tokenizer/byte_alphabet: GPT-2's byte-to-character table (see byte_alphabet.h).
#include "tokenizer/byte_alphabet.h"

#include <array>

#include "util/utf8.h"

namespace llms::tokenizer {

namespace {

std::array<char32_t, 256> make_table() {
  std::array<char32_t, 256> table{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    table[static_cast<size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
  }
  return table;
}

}  // namespace

char32_t byte_level_char(uint8_t byte) {
  static const std::array<char32_t, 256> table = make_table();
  return table[byte];
}

std::string byte_level_utf8(uint8_t byte) {
  std::string s;
  append_utf8(byte_level_char(byte), s);
  return s;
}

}  // namespace llms::tokenizer
