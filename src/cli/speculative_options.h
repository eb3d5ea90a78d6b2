// cli/speculative_options: the speculative-decoding flags of serve, batch, bench-engine and run,
// named as vLLM names them: --speculative-method ngram|draft, --draft-model NAME|FILE,
// --num-speculative-tokens N (1..16), or the whole as JSON in --speculative-config
// '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 5}'; a flag given
// beside the JSON overrides its key.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "gguf/gguf_file.h"
#include "spec/speculative_config.h"

namespace llms::cli {

struct SpeculativeOptions {
  std::string method;
  std::string draft_model;
  int32_t num_speculative_tokens = -1;  // -1: not given
  int32_t draft_vocab_size = -1;        // -1: not given
  int32_t draft_tree_width = -1;        // -1: not given
  std::string config_json;

  // Throws llms::Error(kInvalidArgument) naming the flag (or JSON key) that is wrong.
  spec::SpeculativeConfig to_config() const;
  // The draft model's name or path (flag, else JSON "model"); empty when none.
  std::string draft_model_name() const;
};

void add_speculative_options(CLI::App& cmd, SpeculativeOptions& opts);

// Opens the draft model when the method needs one (nullptr otherwise); a name that resolves to
// nothing is refused naming --draft-model.
std::unique_ptr<gguf::GgufFile> open_draft_model(const SpeculativeOptions& opts,
                                                 const std::string& cache_dir);

}  // namespace llms::cli
