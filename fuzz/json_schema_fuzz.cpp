// libFuzzer target for the JSON Schema compiler: any input is parsed as JSON (nlohmann, without
// exceptions) and, when it parses, compiled into grammar text under a small budget; grammar text
// that comes out is compiled by the grammar engine over a byte vocabulary and walked a little.
// Every outcome must be a grammar or an llms::Error: no other exception, crash, hang, leak or
// sanitizer finding; and a grammar the compiler emits must never be refused as malformed.
//
// Seeds: fuzz/corpus/json_schema_fuzz/ (small schemas covering each supported keyword).
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "structured/grammar.h"
#include "structured/json_schema.h"
#include "structured/matcher.h"
#include "structured/vocabulary.h"
#include "util/error.h"

namespace {

std::shared_ptr<const llms::structured::TokenIndex> byte_index() {
  static const auto index = [] {
    llms::structured::Vocabulary vocabulary;
    for (int b = 0; b < 256; ++b) {
      vocabulary.token_bytes.push_back(std::string(1, static_cast<char>(b)));
      vocabulary.is_special.push_back(0);
    }
    return llms::structured::build_token_index(std::move(vocabulary));
  }();
  return index;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 14)) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  using namespace llms::structured;
  for (const bool compact : {false, true}) {
    JsonSchemaOptions options;
    if (compact) options.whitespace = JsonSchemaOptions::Whitespace::kCompact;
    options.any_string_escape = !compact;
    CompileBudget budget(CompileLimits{std::chrono::milliseconds(2000), 200'000});
    std::string grammar;
    try {
      grammar = json_schema_to_grammar(schema, options, budget);
    } catch (const llms::Error& e) {
      if (e.kind() != llms::Error::Kind::kInvalidArgument) __builtin_trap();
      continue;  // refused, naming why
    }
    try {
      CompileBudget engine_budget(CompileLimits{std::chrono::milliseconds(2000), 2'000'000});
      auto compiled = compile_grammar(grammar, byte_index(), engine_budget);
      Matcher matcher(compiled);
      // The grammar's language is never empty: some first byte is allowed.
      std::vector<uint32_t> mask(static_cast<size_t>(byte_index()->n_mask_words()));
      matcher.fill_mask(mask);
      bool any = false;
      for (uint32_t word : mask) any = any || word != 0;
      if (!any) __builtin_trap();
      matcher.accept_bytes(text.substr(0, 64));
    } catch (const llms::Error& e) {
      // Only a budget may stop the engine on a grammar the compiler wrote.
      if (std::string_view(e.what()).find("too complex") == std::string_view::npos) {
        __builtin_trap();
      }
    }
  }
  return 0;
}
