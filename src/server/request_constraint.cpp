// server/request_constraint: see request_constraint.h.
#include "server/request_constraint.h"

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/json_body.h"
#include "server/tool_grammar.h"

namespace llms::server {

std::shared_ptr<const sampling::TokenConstraintFactory> request_constraint(
    OpenAiRequest& r, std::string_view body_text, ConstraintCompiler* compiler,
    ToolCallFormat tool_format) {
  std::shared_ptr<const sampling::TokenConstraintFactory> constraint;
  if (!r.structured.active() && r.tools.is_null()) return constraint;
  // The request with its keys as the client wrote them: a schema's and the tools' parameters'
  // property order is the order the model is asked to write them in.
  const nlohmann::ordered_json doc =
      nlohmann::ordered_json::parse(body_text, nullptr, /*allow_exceptions=*/false);
  if (r.structured.active()) {
    if (compiler == nullptr) {
      throw_invalid(r.structured.param, r.structured.param + ": structured output is off");
    }
    with_key_order(doc, r.structured);
    constraint = compiler->compile(r.structured);
  }
  if (r.tools.is_null()) return constraint;
  const nlohmann::ordered_json tools =
      !doc.is_discarded() && doc.is_object() && doc.contains("tools") && doc["tools"].is_array()
          ? doc["tools"]
          : nlohmann::ordered_json::parse(dump_json(r.tools));
  const bool forced = r.tool_choice == "required" || r.tool_choice_named;
  if (!forced) {
    check_tool_parameters(tools);
    return constraint;
  }
  if (constraint) {
    throw_invalid("tool_choice",
                  "tool_choice: a required tool call and a structured output format cannot both "
                  "be enforced");
  }
  if (compiler == nullptr) throw_invalid("tool_choice", "tool_choice: enforcing is off");
  const std::string grammar = tool_call_grammar(
      tool_format, tools, r.tool_choice_named ? r.tool_choice : "", r.parallel_tool_calls);
  return compiler->compile_grammar_text(grammar, "tool_choice");
}

}  // namespace llms::server
