// jinja/pystr: Python str semantics over UTF-8 bytes (code-point length and indexing, strip,
// split, case mapping, splitlines) for the interpreter's string methods and filters.
//
// Contract: inputs may be invalid UTF-8 (template text and messages are hostile); an invalid byte
// is treated as one code point of its own and copied through unchanged, never rejected.
// Case mapping covers ASCII, Latin-1, Greek and Cyrillic; other scripts are left unchanged
// (Python maps more, which no known chat template relies on).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace llms::jinja::pystr {

// Decodes the code point at s[i] and advances i (by 1 for an invalid byte, whose value is
// returned as 0xDC00 + byte, a lone surrogate no valid input produces).
// (Strict decoding and the encoder are util/utf8.h's.)
uint32_t decode(std::string_view s, size_t& i);
// Appends the code point as decode() produced it (re-emitting an invalid byte as itself).
void append_cp(std::string& out, uint32_t cp);

bool is_space(uint32_t cp);  // Python str.isspace
bool is_ascii(std::string_view s);

size_t length(std::string_view s);  // in code points
// Byte offsets of each code point, plus s.size() at the end (size == length + 1).
std::vector<size_t> offsets(std::string_view s);
std::vector<uint32_t> code_points(std::string_view s);

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right);
// str.split / str.rsplit; `sep` absent splits on whitespace runs. Throws EvalError on empty sep.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends = false);

uint32_t to_upper(uint32_t cp);
uint32_t to_lower(uint32_t cp);
std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);         // Python str.title
std::string capitalize(std::string_view s);    // Python str.capitalize
std::string title_filter(std::string_view s);  // jinja2's |title (word splits on -\s({[<)

// Substring search in linear time (KMP), since std::string::find is quadratic in the worst case
// and both strings may be hostile. find_all: leftmost non-overlapping matches, in order.
// rfind_all: rightmost non-overlapping matches (as str.rsplit sees them), last match first.
// At most `limit` matches (negative: all). The needle must not be empty.
std::vector<size_t> find_all(std::string_view hay, std::string_view needle, int64_t limit);
std::vector<size_t> rfind_all(std::string_view hay, std::string_view needle, int64_t limit);
bool contains(std::string_view hay, std::string_view needle);

// str.replace with Python's rules (empty `old` inserts between code points). count < 0 = all.
std::string replace(std::string_view s, std::string_view old_s, std::string_view new_s,
                    int64_t count);
// Code-point index of the first/last occurrence, or -1.
int64_t find(std::string_view s, std::string_view sub);
int64_t rfind(std::string_view s, std::string_view sub);
int64_t count(std::string_view s, std::string_view sub);

// HTML escaping as markupsafe does it (& < > " ').
std::string html_escape(std::string_view s);

}  // namespace llms::jinja::pystr
