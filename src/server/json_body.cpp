// server/json_body: UTF-8 and depth checks before parsing (see json_body.h).
#include "server/json_body.h"

#include <fmt/core.h>

#include "server/api_error.h"
#include "util/utf8.h"

namespace llms::server {

int json_nesting_depth(std::string_view text, int limit) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) {
        deepest = depth;
        if (deepest > limit) return deepest;
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

nlohmann::json parse_json_body(std::string_view body, int max_depth) {
  if (size_t bad = find_invalid_utf8(body); bad != std::string_view::npos) {
    throw ApiError(400, fmt::format("The request body is not valid UTF-8 (at byte {})", bad));
  }
  if (json_nesting_depth(body, max_depth) > max_depth) {
    throw ApiError(400,
                   fmt::format("The request body nests JSON deeper than {} levels", max_depth));
  }
  nlohmann::json value = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    throw ApiError(400,
                   "We could not parse the JSON body of your request. The body must be valid "
                   "JSON.");
  }
  return value;
}

std::string dump_json(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void append_json_string(std::string& out, std::string_view text) {
  if (find_invalid_utf8(text) != std::string_view::npos) {
    out += dump_json(nlohmann::json(std::string(text)));  // rare: keep one replacement rule
    return;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  size_t run = 0;  // start of the bytes not yet copied
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(text.data() + run, i - run);
    run = i + 1;
    out.push_back('\\');
    switch (c) {
      case '"':
        out.push_back('"');
        break;
      case '\\':
        out.push_back('\\');
        break;
      case '\b':
        out.push_back('b');
        break;
      case '\f':
        out.push_back('f');
        break;
      case '\n':
        out.push_back('n');
        break;
      case '\r':
        out.push_back('r');
        break;
      case '\t':
        out.push_back('t');
        break;
      default:
        out.append("u00");
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 0xF]);
    }
  }
  out.append(text.data() + run, text.size() - run);
  out.push_back('"');
}

}  // namespace llms::server
