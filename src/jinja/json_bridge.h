// jinja/json_bridge: nlohmann JSON in, Python json.dumps text out.
//
// from_json keeps object key order as the json type holds it (ordered_json: insertion order, as
// a Python dict parsed from the same text; json: sorted). Integers above INT64_MAX become
// floats. Nesting deeper than kMaxValueDepth is refused with llms::Error.
// to_json reproduces transformers' tojson filter: json.dumps(x, ensure_ascii=False, indent=...,
// separators=..., sort_keys=...), byte for byte, including Python's float repr.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "value.h"

namespace llms::jinja {

Value from_json(const nlohmann::json& j);
Value from_json(const nlohmann::ordered_json& j);

struct JsonStyle {
  std::optional<std::string> indent;  // none: single line
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};

// Throws EvalError for values JSON cannot hold (undefined, namespaces, functions).
std::string to_json(const Value& v, const JsonStyle& style);

}  // namespace llms::jinja
