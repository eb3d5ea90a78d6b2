// server/tool_grammar: the grammar that enforces tool_choice "required" or a named function.
//
// The answer must be a tool call in the format the model's chat template teaches, to one of the
// allowed functions, with arguments valid under that function's `parameters` schema (compiled by
// the JSON Schema compiler): for Hermes templates `<tool_call>\n{"name": ..., "arguments": ...}\n
// </tool_call>` (several, one per line, with parallel_tool_calls), for Llama 3 one JSON object
// {"name": ..., "parameters": ...}. Mistral's [TOOL_CALLS] is a control token no grammar may
// produce, so it (and templates without tool syntax) is refused. Errors are ApiError 400: a bad
// parameters schema names tools[i].function.parameters.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "server/tool_calls.h"

namespace llms::server {

// only_function: the named function, or empty for any of `tools`.
std::string tool_call_grammar(ToolCallFormat format, const nlohmann::ordered_json& tools,
                              const std::string& only_function, bool parallel);

// Checks that every tool's parameters compile (400 naming tools[i].function.parameters).
void check_tool_parameters(const nlohmann::ordered_json& tools);

// Grammar text with every reference to and definition of rule `from` renamed `to` (literals,
// character classes, regexes and comments untouched).
std::string rename_rule(const std::string& grammar, const std::string& from, const std::string& to);

}  // namespace llms::server
