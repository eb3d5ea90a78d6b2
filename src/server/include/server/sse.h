// server/sse: Server-Sent Events framing as OpenAI streams it.
//
// Contract: one event is "data: <payload>\n\n" where the payload is a JSON document on one line
// (JSON never contains a raw newline, so no event can be split or forged by the text inside);
// the stream ends with "data: [DONE]\n\n".
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace llms::server {

inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// Appends one event to `out`.
void append_sse_event(std::string& out, const nlohmann::json& payload);

}  // namespace llms::server
