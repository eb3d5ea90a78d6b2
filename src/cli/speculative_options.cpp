#include "speculative_options.h"

#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "model_registry.h"
#include "util/error.h"

namespace llms::cli {

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& message) {
  throw Error(Error::Kind::kInvalidArgument, message);
}

json parse_config(const std::string& text) {
  if (text.empty()) return json::object();
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) bad("--speculative-config: not a JSON object");
  return j;
}

int32_t json_int(const json& j, const char* key, int32_t lo, int32_t hi) {
  const json& v = j.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
    bad(fmt::format("--speculative-config: \"{}\" must be an integer in [{}, {}]", key, lo, hi));
  }
  return static_cast<int32_t>(v.get<int64_t>());
}

std::string json_string(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_string()) bad(fmt::format("--speculative-config: \"{}\" must be a string", key));
  return v.get<std::string>();
}

}  // namespace

spec::SpeculativeConfig SpeculativeOptions::to_config() const {
  spec::SpeculativeConfig c;
  const json j = parse_config(config_json);
  for (const auto& [key, value] : j.items()) {
    if (key == "method") {
      c.method = spec::parse_method(json_string(j, "method"));
    } else if (key == "model") {
      json_string(j, "model");
    } else if (key == "num_speculative_tokens") {
      c.num_speculative_tokens =
          json_int(j, "num_speculative_tokens", 0, spec::kMaxSpeculativeTokens);
    } else if (key == "prompt_lookup_max") {
      c.prompt_lookup_max = json_int(j, "prompt_lookup_max", 1, 64);
    } else if (key == "prompt_lookup_min") {
      c.prompt_lookup_min = json_int(j, "prompt_lookup_min", 1, 64);
    } else if (key == "disable_by_batch_size") {
      c.disable_by_batch_size = json_int(j, "disable_by_batch_size", 0, 1 << 20);
    } else if (key == "draft_vocab_size") {
      c.draft_vocab_size = json_int(j, "draft_vocab_size", 0, 1 << 30);
    } else if (key == "draft_tree_width") {
      c.draft_tree_width = json_int(j, "draft_tree_width", 1, spec::kMaxDraftTreeWidth);
    } else if (key == "fixed_length") {
      if (!value.is_boolean()) bad("--speculative-config: \"fixed_length\" must be true or false");
      c.fixed_length = value.get<bool>();
    } else {
      bad(
          fmt::format("--speculative-config: unknown key \"{}\" (method, model, "
                      "num_speculative_tokens, prompt_lookup_min, prompt_lookup_max, "
                      "disable_by_batch_size, draft_vocab_size, draft_tree_width, fixed_length)",
                      key));
    }
  }
  if (!method.empty()) c.method = spec::parse_method(method);
  if (num_speculative_tokens >= 0) c.num_speculative_tokens = num_speculative_tokens;
  if (draft_vocab_size >= 0) c.draft_vocab_size = draft_vocab_size;
  if (draft_tree_width >= 0) c.draft_tree_width = draft_tree_width;
  // A draft model alone implies the draft method (as vLLM infers it from "model").
  if (c.method == spec::Method::kNone && !draft_model_name().empty())
    c.method = spec::Method::kDraft;
  if (c.method != spec::Method::kNone && c.num_speculative_tokens == 0 &&
      num_speculative_tokens < 0 && !j.contains("num_speculative_tokens")) {
    c.num_speculative_tokens = 4;  // default draft length when only the method is given
  }
  if (c.method == spec::Method::kNgram && !draft_model_name().empty()) {
    bad("--draft-model: not used by --speculative-method ngram");
  }
  c.validate();
  return c;
}

std::string SpeculativeOptions::draft_model_name() const {
  if (!draft_model.empty()) return draft_model;
  const json j = parse_config(config_json);
  return j.contains("model") && j.at("model").is_string() ? j.at("model").get<std::string>() : "";
}

void add_speculative_options(CLI::App& cmd, SpeculativeOptions& o) {
  cmd.add_option("--speculative-method", o.method,
                 "Speculative decoding: ngram (prompt lookup) or draft (a draft model)");
  cmd.add_option("--draft-model", o.draft_model,
                 "Draft model (registered name or GGUF file) with the target's tokenizer");
  cmd.add_option("--num-speculative-tokens", o.num_speculative_tokens,
                 "Most draft tokens per sequence per step, 0..16 (default 4 with a method)");
  cmd.add_option("--draft-vocab-size", o.draft_vocab_size,
                 "Draft head over the first N token ids only (0: the whole vocabulary)");
  cmd.add_option("--draft-tree-width", o.draft_tree_width,
                 "Draft a token tree: the N likeliest branches at each depth, verified in one "
                 "target pass (1: a chain; needs a draft model)");
  cmd.add_option("--speculative-config", o.config_json,
                 "vLLM-style JSON: method, model, num_speculative_tokens, prompt_lookup_min/max, "
                 "disable_by_batch_size, draft_vocab_size, draft_tree_width");
}

std::unique_ptr<gguf::GgufFile> open_draft_model(const SpeculativeOptions& opts,
                                                 const std::string& cache_dir) {
  const spec::SpeculativeConfig c = opts.to_config();
  if (c.method != spec::Method::kDraft) return nullptr;
  const std::string name = opts.draft_model_name();
  if (name.empty()) bad("--speculative-method draft needs --draft-model (a model name or file)");
  try {
    return std::make_unique<gguf::GgufFile>(gguf::GgufFile::open(resolve_model(name, cache_dir)));
  } catch (const Error& e) {
    throw Error(Error::Kind::kInvalidArgument, fmt::format("--draft-model: {}", e.what()));
  }
}

}  // namespace llms::cli
