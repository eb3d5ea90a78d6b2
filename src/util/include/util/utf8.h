// util/utf8: strict UTF-8 decoding, encoding, and the one repair rule the project uses (the
// tokenizer's text, the server's check of request bodies, the template engine's strings).
//
// Well-formed means Unicode's Table 3-7: no overlong forms, no surrogates (U+D800..DFFF), nothing
// above U+10FFFF. Repair replaces each *maximal subpart* of an ill-formed sequence with one U+FFFD
// (Unicode "substitution of maximal subparts"; the rule of Rust's String::from_utf8_lossy and of
// Python's bytes.decode("utf-8", "replace")). A valid prefix of a sequence that is cut off at the
// end of the input is one maximal subpart. Repair of valid text returns it unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace llms {

inline constexpr char32_t kReplacementChar = 0xFFFD;
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

// The result of looking at the bytes that start at one position.
struct Utf8Step {
  enum class Kind {
    kValid,       // `length` bytes encode `code_point`
    kInvalid,     // `length` bytes (>= 1) are one maximal ill-formed subpart
    kIncomplete,  // all `length` remaining bytes are a valid but unfinished prefix
  };
  Kind kind;
  uint32_t length;
  char32_t code_point;  // only for kValid
};

// Examines text[pos..]; pos must be < text.size().
Utf8Step utf8_step(std::string_view text, size_t pos);

// Byte offset of the first byte that does not belong to a well-formed sequence (the start of an
// ill-formed or unfinished one), or std::string_view::npos when the text is valid.
size_t find_invalid_utf8(std::string_view text);

// True when every byte of `text` belongs to a well-formed sequence.
bool is_valid_utf8(std::string_view text);

// Appends `text` to `out` with every maximal ill-formed subpart (including an unfinished sequence
// at the very end) replaced by U+FFFD.
void append_utf8_lossy(std::string_view text, std::string& out);
std::string utf8_lossy(std::string_view text);

// Appends the UTF-8 encoding of `cp` (<= U+10FFFF). A surrogate code point gets its 3-byte
// form, which is not well-formed UTF-8 (Python's "surrogatepass"); callers that must produce
// valid text pass scalar values only.
void append_utf8(char32_t cp, std::string& out);

// Length in bytes of the longest prefix of `text` that is not an unfinished sequence cut off by
// the end of `text`: everything up to that point is settled (valid, or ill-formed for good).
size_t utf8_settled_length(std::string_view text);

// Number of code points in valid UTF-8 text.
size_t utf8_length(std::string_view valid_text);

}  // namespace llms
