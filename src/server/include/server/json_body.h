// server/json_body: an HTTP body turned into JSON under the server's input rules.
//
// Contract: parse_json_body() refuses (ApiError 400, never a crash or deep recursion) a body that
// is not valid UTF-8, that nests arrays/objects deeper than `max_depth`, or that is not JSON; the
// checks run in one linear pass before the JSON parser sees the bytes. dump_json() and
// append_json_string() never throw on strings from the model that are not valid UTF-8 (they are
// replaced with U+FFFD).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace llms::server {

inline constexpr int kDefaultMaxJsonDepth = 64;

// Deepest nesting of [ and { outside strings (0 for a scalar). Stops counting past `limit + 1`.
int json_nesting_depth(std::string_view text, int limit);

nlohmann::json parse_json_body(std::string_view body, int max_depth = kDefaultMaxJsonDepth);

std::string dump_json(const nlohmann::json& value);

// Appends `text` as a JSON string literal (quotes included), byte for byte what dump_json writes
// for the same string: '"', '\\' and control characters escaped (\b \f \n \r \t, the others
// as \u00xx), every other byte as it is. Text that is not valid UTF-8 takes dump_json's own path
// (each invalid sequence becomes U+FFFD), so both always agree. Hot path of the token stream.
void append_json_string(std::string& out, std::string_view text);

}  // namespace llms::server
