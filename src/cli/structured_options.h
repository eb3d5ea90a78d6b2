// cli/structured_options: the structured-output flags of run and bench-engine: --json-schema
// FILE, --regex R, --grammar FILE (at most one), compiled exactly as the server compiles a
// request's response_format / structured_outputs.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "sampling/token_constraint.h"
#include "tokenizer/tokenizer.h"

namespace llms::cli {

struct StructuredOptions {
  std::string json_schema_file;
  std::string regex;
  std::string grammar_file;

  // "regex: R", "json_schema: FILE", "grammar: FILE" or "none" (for reports).
  std::string describe() const;
};

void add_structured_options(CLI::App& cmd, StructuredOptions& opts);

// The compiled constraint, or null when no flag is given. Throws llms::Error(kInvalidArgument)
// naming the flag: more than one given, an unreadable file, text that does not compile.
std::shared_ptr<const sampling::TokenConstraintFactory> compile_structured_options(
    const StructuredOptions& opts, const tokenizer::Tokenizer& tok, int32_t n_logit_rows);

}  // namespace llms::cli
