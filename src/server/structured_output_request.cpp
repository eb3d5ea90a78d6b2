// server/structured_output_request: see structured_output_request.h.
#include "server/structured_output_request.h"

#include <fmt/core.h>

#include <algorithm>

#include "server/api_error.h"

namespace llms::server {
namespace {

using json = nlohmann::json;

const json* present(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

// A schema given as an object, or as its JSON text (vLLM accepts both).
json schema_value(const json& v, const std::string& param) {
  if (v.is_object() || v.is_boolean()) return v;
  if (v.is_string()) {
    json parsed = json::parse(v.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded() || !(parsed.is_object() || parsed.is_boolean())) {
      throw_invalid(param, param + ": must be a JSON Schema (an object, or its JSON text)");
    }
    return parsed;
  }
  throw_invalid(param, param + ": must be a JSON Schema (an object, or its JSON text)");
}

std::string non_empty_string(const json& v, const std::string& param) {
  if (!v.is_string() || v.get<std::string>().empty()) {
    throw_invalid(param, param + ": must be a non-empty string");
  }
  return v.get<std::string>();
}

std::vector<std::string> choice_list(const json& v, const std::string& param) {
  if (!v.is_array() || v.empty()) {
    throw_invalid(param, param + ": must be a non-empty list of strings");
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) {
      throw_invalid(param, fmt::format("{}[{}]: must be a string", param, i));
    }
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

StructuredOutput from_response_format(const json& rf) {
  StructuredOutput s;
  if (!rf.is_object()) throw_invalid("response_format", "response_format: must be an object");
  const json* type = present(rf, "type");
  if (type == nullptr || !type->is_string()) {
    throw_invalid("response_format.type",
                  "response_format.type: must be one of text, json_object, json_schema");
  }
  const std::string t = type->get<std::string>();
  if (t == "text") return s;
  if (t == "json_object") {
    s.kind = StructuredOutput::Kind::kJsonObject;
    s.param = "response_format";
    return s;
  }
  if (t != "json_schema") {
    throw_invalid("response_format.type",
                  fmt::format("response_format.type: '{}' is not one of text, json_object, "
                              "json_schema",
                              t));
  }
  const json* js = present(rf, "json_schema");
  if (js == nullptr || !js->is_object()) {
    throw_invalid("response_format.json_schema",
                  "response_format.json_schema: an object with name and schema is required");
  }
  const json* name = present(*js, "name");
  const auto good_name = [](const std::string& n) {
    if (n.empty() || n.size() > 64) return false;
    for (const char c : n) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '-';
      if (!ok) return false;
    }
    return true;
  };
  if (name == nullptr || !name->is_string() || !good_name(name->get<std::string>())) {
    throw_invalid("response_format.json_schema.name",
                  "response_format.json_schema.name: 1 to 64 of a-z, A-Z, 0-9, _ and -");
  }
  if (const json* strict = present(*js, "strict"); strict != nullptr && !strict->is_boolean()) {
    throw_invalid("response_format.json_schema.strict",
                  "response_format.json_schema.strict: must be a boolean");
  }
  s.kind = StructuredOutput::Kind::kJsonSchema;
  s.param = "response_format.json_schema.schema";
  const json* schema = present(*js, "schema");
  // OpenAI lets the schema out; then any JSON object will do.
  s.schema = schema == nullptr ? json::object() : schema_value(*schema, s.param);
  return s;
}

// One constraint given as `value` under a vLLM key (json, regex, choice, grammar, json_object);
// `param` names it in errors (structured_outputs.regex, guided_regex, ...).
StructuredOutput from_vllm_key(std::string_view key, const json& value, const std::string& param) {
  StructuredOutput s;
  s.param = param;
  if (key == "json") {
    s.kind = StructuredOutput::Kind::kJsonSchema;
    s.schema = schema_value(value, param);
  } else if (key == "regex") {
    s.kind = StructuredOutput::Kind::kRegex;
    s.text = non_empty_string(value, param);
  } else if (key == "choice") {
    s.kind = StructuredOutput::Kind::kChoice;
    s.choices = choice_list(value, param);
  } else if (key == "grammar") {
    s.kind = StructuredOutput::Kind::kGrammar;
    s.text = non_empty_string(value, param);
  } else {  // json_object
    if (!value.is_boolean()) throw_invalid(param, param + ": must be a boolean");
    if (value.get<bool>()) s.kind = StructuredOutput::Kind::kJsonObject;
  }
  return s;
}

StructuredOutput from_vllm(const json& so) {
  if (!so.is_object()) throw_invalid("structured_outputs", "structured_outputs: must be an object");
  StructuredOutput s;
  int n = 0;
  for (const char* key : {"json", "regex", "choice", "grammar", "json_object"}) {
    const json* v = present(so, key);
    if (v == nullptr) continue;
    StructuredOutput given = from_vllm_key(key, *v, std::string("structured_outputs.") + key);
    if (!given.active()) continue;  // json_object: false
    ++n;
    s = std::move(given);
  }
  if (n > 1) {
    throw_invalid("structured_outputs",
                  "structured_outputs: give one of json, regex, choice, grammar, json_object");
  }
  return s;
}

}  // namespace

StructuredOutput parse_structured_output(const json& body) {
  StructuredOutput out;
  std::string given;  // the field that gave it, to refuse a second one
  auto take = [&](StructuredOutput s, const char* field) {
    if (!s.active()) return;
    if (out.active()) {
      throw_invalid(field, fmt::format("{}: only one of response_format, structured_outputs and "
                                       "guided_* may be given (also {})",
                                       field, given));
    }
    out = std::move(s);
    given = field;
  };
  if (const json* rf = present(body, "response_format")) {
    take(from_response_format(*rf), "response_format");
  }
  if (const json* so = present(body, "structured_outputs")) {
    take(from_vllm(*so), "structured_outputs");
  }
  // vLLM's older spelling: guided_json, guided_regex, guided_choice, guided_grammar.
  for (const char* key : {"json", "regex", "choice", "grammar"}) {
    const std::string field = std::string("guided_") + key;
    if (const json* v = present(body, field.c_str())) {
      take(from_vllm_key(key, *v, field), field.c_str());
    }
  }
  return out;
}

void with_key_order(const nlohmann::ordered_json& body, StructuredOutput& so) {
  if (so.kind != StructuredOutput::Kind::kJsonSchema || body.is_discarded()) return;
  const nlohmann::ordered_json* at = &body;
  size_t begin = 0;
  while (begin <= so.param.size()) {
    const size_t dot = std::min(so.param.find('.', begin), so.param.size());
    const std::string key = so.param.substr(begin, dot - begin);
    if (!at->is_object() || !at->contains(key)) return;
    at = &(*at)[key];
    begin = dot + 1;
  }
  if (at->is_string()) {
    nlohmann::ordered_json parsed =
        nlohmann::ordered_json::parse(at->get<std::string>(), nullptr, false);
    if (!parsed.is_discarded()) so.ordered_schema = std::move(parsed);
  } else {
    so.ordered_schema = *at;
  }
}

}  // namespace llms::server
