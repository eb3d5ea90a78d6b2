// `llmserve tiny-model --out FILE`: writes a small GGUF model with random weights and a real
// tokenizer (model/tiny_model.h). Tests and overhead measurements use it where a downloaded model
// would be slow or absent: with tiny shapes the engine's own cost is small, so the cost of the
// layers around it (HTTP, JSON, SSE) becomes measurable. Same flags and seed, same bytes.
#include "tiny_model_command.h"

#include <cctype>
#include <cstdio>
#include <memory>
#include <string>

#include "gguf/ggml_type.h"
#include "model/tiny_model.h"
#include "util/error.h"

namespace llms::cli {

namespace {

struct TinyModelOptions {
  std::string out;
  std::string type = "f32";
  std::string embedding_type;  // empty: same as type
  std::string tokenizer = "bpe";
  model::TinyModelSpec spec;
};

gguf::GgmlType parse_type(const std::string& name, const char* flag) {
  std::string upper = name;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto type = gguf::ggml_type_from_name(upper);
  if (!type) {
    throw Error(Error::Kind::kInvalidArgument,
                std::string(flag) + ": unknown weight type '" + name + "'");
  }
  return *type;
}

void run_tiny_model(const TinyModelOptions& o) {
  model::TinyModelSpec spec = o.spec;
  spec.weight_type = parse_type(o.type, "--type");
  if (!o.embedding_type.empty()) spec.embedding_type = parse_type(o.embedding_type, "--embd-type");
  if (o.tokenizer == "bpe") {
    spec.tokenizer = model::TinyTokenizerKind::kByteLevelBpe;
  } else if (o.tokenizer == "spm") {
    spec.tokenizer = model::TinyTokenizerKind::kSentencePieceLike;
  } else {
    throw Error(Error::Kind::kInvalidArgument,
                "--tokenizer: expected bpe or spm, got '" + o.tokenizer + "'");
  }
  model::write_tiny_model(spec, o.out);
  std::fprintf(stderr, "wrote %s (%s, %u layers, %u wide, %s weights)\n", o.out.c_str(),
               spec.architecture.c_str(), spec.n_layers, spec.n_embd, o.type.c_str());
}

}  // namespace

void add_tiny_model_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<TinyModelOptions>();
  CLI::App* cmd = app.add_subcommand(
      "tiny-model", "Write a small GGUF model with random weights (for tests and measurements)");
  cmd->add_option("--out", opts->out, "Output GGUF file")->required();
  cmd->add_option("--arch", opts->spec.architecture, "llama, qwen2, qwen3 or gemma3")
      ->capture_default_str();
  cmd->add_option("--layers", opts->spec.n_layers, "Layers")->capture_default_str();
  cmd->add_option("--embd", opts->spec.n_embd, "Hidden width")->capture_default_str();
  cmd->add_option("--ff", opts->spec.n_ff, "Feed-forward width")->capture_default_str();
  cmd->add_option("--heads", opts->spec.n_heads, "Query heads")->capture_default_str();
  cmd->add_option("--kv-heads", opts->spec.n_kv_heads, "Key/value heads")->capture_default_str();
  cmd->add_option("--ctx", opts->spec.n_ctx, "Context length")->capture_default_str();
  cmd->add_option("--type", opts->type, "Weight type of the matrices (f32, f16, q8_0, q4_0, ...)")
      ->capture_default_str();
  cmd->add_option("--embd-type", opts->embedding_type,
                  "Weight type of token_embd (default: --type)");
  cmd->add_option("--vocab", opts->spec.n_vocab,
                  "Vocabulary rows, padded with unused tokens (0: the tokenizer's own)")
      ->capture_default_str();
  cmd->add_flag("--tie-embeddings", opts->spec.tie_embeddings,
                "No output.weight: the output projection reuses token_embd");
  cmd->add_option("--tokenizer", opts->tokenizer, "bpe (Qwen-like) or spm (Gemma-like)")
      ->capture_default_str();
  cmd->add_option("--seed", opts->spec.seed, "Random seed of the weights")->capture_default_str();
  cmd->add_flag("--fast-weights", opts->spec.fast_weights,
                "Random block bytes with fixed scales, on every core: real shapes in seconds for "
                "speed runs (the model computes nothing meaningful)");
  cmd->callback([opts, &exit_code] {
    run_tiny_model(*opts);
    exit_code = 0;
  });
}

}  // namespace llms::cli
