// libFuzzer target for the jinja module: any input is parsed as a template and, when it parses,
// rendered against a fixed small chat context with small budgets. Every outcome must be output
// or an llms::Error: no other exception, crash, hang, leak or sanitizer finding.
//
// Seeds: fuzz/corpus/jinja_fuzz/ (the test and built-in chat templates plus language snippets).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "jinja/chat_template.h"
#include "jinja/template.h"
#include "util/error.h"

namespace {

const nlohmann::ordered_json& fuzz_context() {
  static const nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "Hi {{ x }} \u00e9\ud83c\udf89"},
      {"role": "assistant", "content": "<think>r</think>ok", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": {"a": [1, 2.5, null, true]}}}]},
      {"role": "tool", "content": "42"}
    ],
    "tools": [{"type": "function", "function": {"name": "f", "description": "d",
               "parameters": {"type": "object", "properties": {"a": {"type": "array"}}}}}],
    "documents": null,
    "add_generation_prompt": true,
    "bos_token": "<s>",
    "eos_token": "</s>",
    "n": 3, "f": -1.5, "s": "a,b,,c", "d": {"b": 1, "a": {"c": [1, 2, 3]}}, "e": []
  })");
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  try {
    llms::jinja::ParseOptions parse_options;
    parse_options.max_depth = 64;
    const auto tmpl = llms::jinja::Template::parse(source, parse_options);
    llms::jinja::RenderOptions options;
    options.max_steps = 50000;
    options.max_output_bytes = 1 << 16;
    options.max_depth = 64;
    options.now_unix_seconds = 0;
    const std::string out = tmpl.render(fuzz_context(), options);
    if (out.size() > options.max_output_bytes) __builtin_trap();
  } catch (const llms::Error&) {
    // Refused with a message: the expected outcome for most inputs.
  }
  return 0;
}
