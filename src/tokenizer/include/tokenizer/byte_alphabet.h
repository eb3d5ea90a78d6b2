// tokenizer/byte_alphabet: GPT-2's byte-level alphabet, by which byte-level BPE vocabularies
// (Qwen, Llama 3, GPT-2) spell raw bytes as printable characters.
//
// Printable bytes (0x21..0x7E, 0xA1..0xAC, 0xAE..0xFF) stand for themselves; the other 68 bytes
// map, in byte order, to U+0100 upwards. So every byte has one character in U+0021..U+0143, and
// the space byte is U+0120 'Ġ'.
#pragma once

#include <cstdint>
#include <string>

namespace llms::tokenizer {

// The character that spells `byte`.
char32_t byte_level_char(uint8_t byte);

// The same as UTF-8 (one or two bytes).
std::string byte_level_utf8(uint8_t byte);

}  // namespace llms::tokenizer
