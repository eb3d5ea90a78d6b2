// Test helpers for the jinja module: render a template string against a JSON context.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "jinja/template.h"

namespace llms::jinja::testing {

// A case rendered and compared byte for byte. Expected outputs in the tables were produced by
// jinja2 3.1.6 under transformers' chat-template environment.
struct Case {
  const char* tmpl;
  const char* context;  // JSON object text ("" for {})
  const char* expected;
};

inline std::string render(std::string_view tmpl, std::string_view context_json = "{}",
                          const RenderOptions& options = {}) {
  const auto ctx = nlohmann::ordered_json::parse(context_json.empty() ? "{}" : context_json);
  return Template::parse(tmpl).render(ctx, options);
}

// The message of the llms::Error that rendering throws, or "" when it does not throw.
inline std::string render_error(std::string_view tmpl, std::string_view context_json = "{}",
                                const RenderOptions& options = {}) {
  try {
    render(tmpl, context_json, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace llms::jinja::testing
