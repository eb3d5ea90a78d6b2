// structured/regex_whitespace (private): the code points the regex engines call whitespace.
//
// JSON Schema patterns are ECMA-262 regexes, but instances are often validated with Python's
// `re` (jsonschema), whose \s differs: it adds U+001C-001F and U+0085 and leaves out U+FEFF. The
// pattern compiler stays sound for both (\s matches what both call whitespace, \S excludes what
// either does), the plain regex compiler follows ECMA-262, and the token index's pattern classes
// must agree with the pattern compiler to give token families there. One list for all three.
#pragma once

#include <array>
#include <cstdint>

namespace llms::structured {

struct CodePointInterval {
  uint32_t lo = 0;
  uint32_t hi = 0;  // inclusive
};

// Whitespace in ECMA-262 (WhiteSpace and LineTerminator) and in Python's \s alike.
inline constexpr std::array<CodePointInterval, 9> kSpaceInBothEngines{{{0x09, 0x0D},
                                                                       {0x20, 0x20},
                                                                       {0xA0, 0xA0},
                                                                       {0x1680, 0x1680},
                                                                       {0x2000, 0x200A},
                                                                       {0x2028, 0x2029},
                                                                       {0x202F, 0x202F},
                                                                       {0x205F, 0x205F},
                                                                       {0x3000, 0x3000}}};
// Whitespace in Python's \s only.
inline constexpr std::array<CodePointInterval, 2> kSpaceInPythonOnly{{{0x1C, 0x1F}, {0x85, 0x85}}};
// Whitespace in ECMA-262 only (ZWNBSP).
inline constexpr CodePointInterval kSpaceInEcmaOnly{0xFEFF, 0xFEFF};

}  // namespace llms::structured
