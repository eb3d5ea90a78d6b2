// jinja/template: a bounded Jinja interpreter for chat templates.
//
// Contract: Template::parse accepts the Jinja subset that Hugging Face chat templates use and
// renders it byte for byte as transformers' apply_chat_template does (jinja2 with
// trim_blocks=True, lstrip_blocks=True, ImmutableSandboxedEnvironment, default Undefined, and
// transformers' tojson / raise_exception / strftime_now / namespace / dict globals).
// Every failure is an llms::Error (kind kInvalidArgument): syntax errors and runtime errors name
// line and column; exceeding a budget (steps, output size, nesting depth) is an error, never a
// hang or a stack overflow. A parsed Template is immutable and may render on many threads.
// Context values come in as JSON; use nlohmann::ordered_json to keep object key order (tojson
// prints keys in the order the template sees them, as Python dicts do).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "util/error.h"

namespace llms::jinja {

struct Program;

struct ParseOptions {
  uint32_t max_depth = 200;  // nesting of blocks and expressions
};

struct RenderOptions {
  uint64_t max_steps = 10'000'000;        // node evaluations (bulk operations cost more)
  uint64_t max_output_bytes = 16u << 20;  // output and any single string built
  uint32_t max_depth = 200;               // nesting of evaluation and macro calls
  // Clock for strftime_now (Unix seconds, formatted in local time); unset: the system clock.
  std::optional<int64_t> now_unix_seconds;
};

// Thrown when a template calls raise_exception(message); what() is exactly the message, so a
// server can relay it to the client as the reason a request was refused.
class TemplateRaised : public Error {
 public:
  explicit TemplateRaised(std::string message)
      : Error(Kind::kInvalidArgument, std::move(message)) {}
};

class Template {
 public:
  static Template parse(std::string_view source, const ParseOptions& options = {});

  // `context` must be a JSON object; its members become the template's variables.
  std::string render(const nlohmann::ordered_json& context,
                     const RenderOptions& options = {}) const;
  std::string render(const nlohmann::json& context, const RenderOptions& options = {}) const;

 private:
  explicit Template(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const Program> program_;
};

}  // namespace llms::jinja
