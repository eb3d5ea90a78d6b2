// cli/structured_options: see structured_options.h.
#include "structured_options.h"

#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/constraint_compiler.h"
#include "server/structured_output_request.h"
#include "util/error.h"
#include "util/text_file.h"

namespace llms::cli {
std::string StructuredOptions::describe() const {
  if (!regex.empty()) return "regex: " + regex;
  if (!json_schema_file.empty()) return "json_schema: " + json_schema_file;
  if (!grammar_file.empty()) return "grammar: " + grammar_file;
  return "none";
}

void add_structured_options(CLI::App& cmd, StructuredOptions& opts) {
  cmd.add_option("--json-schema", opts.json_schema_file,
                 "The output is JSON valid under the JSON Schema in this file");
  cmd.add_option("--regex", opts.regex, "The output matches this regular expression");
  cmd.add_option("--grammar", opts.grammar_file,
                 "The output is a sentence of the GBNF grammar in this file (docs/STRUCTURED.md)");
}

std::shared_ptr<const sampling::TokenConstraintFactory> compile_structured_options(
    const StructuredOptions& opts, const tokenizer::Tokenizer& tok, int32_t n_logit_rows) {
  const int n_given =
      !opts.json_schema_file.empty() + !opts.regex.empty() + !opts.grammar_file.empty();
  if (n_given == 0) return nullptr;
  if (n_given > 1) {
    throw Error(Error::Kind::kInvalidArgument,
                "--json-schema, --regex and --grammar: give at most one");
  }
  server::StructuredOutput so;
  if (!opts.json_schema_file.empty()) {
    const std::string text = read_text_file(opts.json_schema_file, "--json-schema");
    so.kind = server::StructuredOutput::Kind::kJsonSchema;
    so.param = "--json-schema";
    so.ordered_schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (so.ordered_schema.is_discarded()) {
      throw Error(Error::Kind::kInvalidArgument,
                  fmt::format("--json-schema: '{}' is not JSON", opts.json_schema_file));
    }
    so.schema = nlohmann::json::parse(text);
  } else if (!opts.regex.empty()) {
    so.kind = server::StructuredOutput::Kind::kRegex;
    so.param = "--regex";
    so.text = opts.regex;
  } else {
    so.kind = server::StructuredOutput::Kind::kGrammar;
    so.param = "--grammar";
    so.text = read_text_file(opts.grammar_file, "--grammar");
  }
  server::ConstraintCompiler compiler(tok, n_logit_rows);
  try {
    return compiler.compile(so);
  } catch (const server::ApiError& e) {
    throw Error(Error::Kind::kInvalidArgument, e.what());
  }
}

}  // namespace llms::cli
