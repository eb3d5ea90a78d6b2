// server/tool_grammar: see tool_grammar.h.
#include "server/tool_grammar.h"

#include <fmt/core.h>

#include "server/api_error.h"
#include "structured/compile_budget.h"
#include "structured/json_schema.h"
#include "util/error.h"

namespace llms::server {
namespace {

using ojson = nlohmann::ordered_json;

bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9') || c == '-'; }

const ojson& parameters_of(const ojson& tool) {
  static const ojson kAnyObject = {{"type", "object"}};
  const ojson& fn = tool.at("function");
  auto it = fn.find("parameters");
  return it == fn.end() || it->is_null() ? kAnyObject : *it;
}

}  // namespace

std::string rename_rule(const std::string& g, const std::string& from, const std::string& to) {
  std::string out;
  out.reserve(g.size());
  size_t i = 0;
  // Copies a delimited run (string, class, regex) whose backslash escapes skip a character.
  auto copy_delimited = [&](char close) {
    out += g[i++];
    while (i < g.size() && g[i] != close) {
      if (g[i] == '\\' && i + 1 < g.size()) out += g[i++];
      out += g[i++];
    }
    if (i < g.size()) out += g[i++];
  };
  while (i < g.size()) {
    const char c = g[i];
    if (c == '"') {
      copy_delimited('"');
    } else if (c == '[') {
      copy_delimited(']');
    } else if (c == '/') {
      copy_delimited('/');
    } else if (c == '#') {
      while (i < g.size() && g[i] != '\n') out += g[i++];
    } else if (ident_start(c)) {
      size_t j = i;
      while (j < g.size() && ident_char(g[j])) ++j;
      const std::string word = g.substr(i, j - i);
      out += word == from ? to : word;
      i = j;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

void check_tool_parameters(const ojson& tools) {
  for (size_t i = 0; i < tools.size(); ++i) {
    try {
      structured::CompileBudget budget;
      (void)structured::json_schema_to_grammar(parameters_of(tools[i]), {}, budget);
    } catch (const Error& e) {
      const std::string param = fmt::format("tools[{}].function.parameters", i);
      throw_invalid(param, fmt::format("{}: {}", param, e.what()));
    }
  }
}

std::string tool_call_grammar(ToolCallFormat format, const ojson& tools,
                              const std::string& only_function, bool parallel) {
  if (format != ToolCallFormat::kHermes && format != ToolCallFormat::kLlama3Json) {
    throw_invalid("tool_choice",
                  fmt::format("tool_choice: this model's chat template writes tool calls as '{}', "
                              "which cannot be enforced; use \"auto\"",
                              tool_call_format_name(format)));
  }
  check_tool_parameters(tools);
  const char* args_key = format == ToolCallFormat::kHermes ? "arguments" : "parameters";
  ojson branches = ojson::array();
  for (const ojson& tool : tools) {
    const std::string name = tool.at("function").at("name").get<std::string>();
    if (!only_function.empty() && name != only_function) continue;
    ojson call = {{"type", "object"},
                  {"properties", {{"name", {{"const", name}}}, {args_key, parameters_of(tool)}}},
                  {"required", {"name", args_key}},
                  {"additionalProperties", false}};
    branches.push_back(std::move(call));
  }
  const ojson schema = branches.size() == 1 ? branches[0] : ojson{{"anyOf", branches}};
  std::string call;
  try {
    structured::CompileBudget budget;
    call = structured::json_schema_to_grammar(schema, {}, budget);
  } catch (const Error& e) {
    throw_invalid("tools", fmt::format("tools: {}", e.what()));
  }
  constexpr const char* kCall = "llms-tool-call-json";
  std::string g = rename_rule(call, "root", kCall);
  if (format == ToolCallFormat::kHermes) {
    g += fmt::format("\nllms-tool-call-tag ::= \"<tool_call>\\n\" {} \"\\n</tool_call>\"\n", kCall);
    g += parallel ? "root ::= llms-tool-call-tag (\"\\n\" llms-tool-call-tag)*\n"
                  : "root ::= llms-tool-call-tag\n";
  } else {
    g += fmt::format("\nroot ::= {}\n", kCall);
  }
  return g;
}

}  // namespace llms::server
