// The JSON Schema compiler over the shared corpus of real-world schemas (../shared/data, never
// copied into the repository): every schema is compiled or refused with a message naming the
// keyword; every instance is walked byte by byte, written compactly and with whitespace, its keys
// in the compiler's order. No invalid instance may be accepted; a valid one may be rejected only
// where the list below says why.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "json_schema_test_walk.h"
#include "util/error.h"

namespace llms::structured::testing {
namespace {

std::filesystem::path corpus_path() {
  const char* dir = std::getenv("LLMS_SHARED_DATA_DIR");
  return std::filesystem::path(dir ? dir : "/work/shared/data") / "jsonschema-corpus.jsonl";
}

// Valid instances the grammar rejects, by schema id and instance index, each with its reason.
// Every entry is a sound restriction documented in docs/STRUCTURED.md.
const std::map<std::pair<std::string, int>, std::string>& known_rejections() {
  static const std::map<std::pair<std::string, int>, std::string> known = {};
  return known;
}

// "unsupported JSON Schema keyword 'x' at ..." -> "x"; other refusals by their first words.
std::string refusal_reason(const std::string& message) {
  static const std::regex keyword("unsupported JSON Schema keyword '([^']+)'");
  std::smatch match;
  if (std::regex_search(message, match, keyword)) return match[1];
  return message.substr(0, std::min<size_t>(message.size(), 60));
}

TEST(JsonSchemaCorpus, EveryInstanceWalkedNoInvalidAccepted) {
  const std::filesystem::path path = corpus_path();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no corpus at " << path;
  std::ifstream in(path);
  std::string line;
  int n_schemas = 0, n_compiled = 0;
  int n_valid = 0, n_valid_accepted = 0, n_invalid = 0, n_invalid_rejected = 0;
  std::map<std::string, int> refusals;
  std::vector<std::string> unexplained;
  while (std::getline(in, line)) {
    const Json record = Json::parse(line);
    const std::string id = record["id"].get<std::string>();
    const Json& schema = record["schema"];
    ++n_schemas;
    CompiledSchema flexible, compact;
    try {
      flexible = compile_schema(schema);
      compact = compile_schema(schema, compact_options());
    } catch (const Error& e) {
      ASSERT_EQ(e.kind(), Error::Kind::kInvalidArgument) << id << ": " << e.what();
      ++refusals[refusal_reason(e.what())];
      continue;
    }
    ++n_compiled;
    const Json& tests = record["tests"];
    for (size_t i = 0; i < tests.size(); ++i) {
      const bool valid = tests[i]["valid"].get<bool>();
      const Json instance = order_keys_like_grammar(schema, tests[i]["data"]);
      const std::string texts[] = {instance.dump(), instance.dump(1)};
      const bool accepted_compact = compact.accepts(texts[0]);
      const bool accepted_flexible = flexible.accepts(texts[0]) && flexible.accepts(texts[1]);
      if (valid) {
        ++n_valid;
        if (accepted_compact && accepted_flexible) {
          ++n_valid_accepted;
        } else if (!known_rejections().count({id, static_cast<int>(i)})) {
          unexplained.push_back(id + " #" + std::to_string(i) + ": " + texts[0].substr(0, 300));
        }
      } else {
        ++n_invalid;
        const bool accepted_any =
            accepted_compact || flexible.accepts(texts[0]) || flexible.accepts(texts[1]);
        EXPECT_FALSE(accepted_any)
            << "invalid instance accepted: " << id << " #" << i << ": " << texts[0].substr(0, 300);
        if (!accepted_any) ++n_invalid_rejected;
      }
    }
  }
  std::string refused_by;
  int n_refused = 0;
  for (const auto& [reason, count] : refusals) {
    refused_by += "  " + reason + ": " + std::to_string(count) + "\n";
    n_refused += count;
  }
  std::printf(
      "corpus: %d schemas, %d compiled, %d refused\n%s"
      "valid instances accepted: %d / %d\ninvalid instances rejected: %d / %d\n",
      n_schemas, n_compiled, n_refused, refused_by.c_str(), n_valid_accepted, n_valid,
      n_invalid_rejected, n_invalid);
  std::string listed;
  for (const std::string& u : unexplained) listed += "  " + u + "\n";
  EXPECT_TRUE(unexplained.empty()) << "valid instances rejected without a documented reason:\n"
                                   << listed;
}

}  // namespace
}  // namespace llms::structured::testing
