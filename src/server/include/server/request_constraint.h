// server/request_constraint: what a parsed OpenAI request's output must follow, for `serve` and
// `batch` alike: its structured-output field compiled (with the JSON Schema's keys in the order
// the request text gives them), or, for tool_choice "required" or a named function, the tool-call
// grammar of server/tool_grammar.h. With tools and tool_choice "auto", every function's
// parameters must still compile. Null when nothing is enforced. Refusals are ApiError 400s naming
// the field.
#pragma once

#include <memory>
#include <string_view>

#include "sampling/token_constraint.h"
#include "server/constraint_compiler.h"
#include "server/openai_request.h"
#include "server/tool_calls.h"

namespace llms::server {

// body_text: the request's JSON text (for key order). compiler may be null: then any
// enforcement asked for is refused.
std::shared_ptr<const sampling::TokenConstraintFactory> request_constraint(
    OpenAiRequest& r, std::string_view body_text, ConstraintCompiler* compiler,
    ToolCallFormat tool_format);

}  // namespace llms::server
