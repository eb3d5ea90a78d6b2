// cli/quantize_command: `llmserve quantize IN OUT --type TYPE [--imatrix FILE] [--force]
// [-t THREADS]`.
//
// Rewrites a GGUF file (or a registered model's cached file) with its tensors in another type,
// round-to-nearest, or with --imatrix weighted by an importance matrix where it has an entry
// (quantize/model_quantizer.h; which tensor gets which type: quantize/quantize_plan.h; the
// imatrix: `llmserve imatrix`, quantize/weighted_quantizers.h; docs/QUANTIZE.md). A progress line
// per tensor and a one-line summary go to stderr; refusals (an existing OUT without --force, OUT
// equal to IN, an unknown type, ...) happen before any work and leave no file behind.
#include "quantize_command.h"

#include <fmt/core.h>

#include <memory>
#include <string>

#include "engine_options.h"
#include "gguf/ggml_type.h"
#include "model_registry.h"
#include "quantize/model_quantizer.h"
#include "quantize/quantize_plan.h"
#include "util/byte_size.h"
#include "util/thread_pool.h"

namespace llms::cli {
namespace {

struct QuantizeCommandOptions {
  std::string input;
  std::string output;
  std::string type;
  std::string cache_dir;
  std::string imatrix;
  bool force = false;
  int threads = 0;
};

int run_quantize(const QuantizeCommandOptions& o) {
  quantize::QuantizeOptions options;
  // The type first: a typo is refused before a model is looked up.
  options.target = quantize::parse_target(o.type);
  options.input = resolve_model(o.input, o.cache_dir);
  options.output = o.output;
  options.imatrix = o.imatrix;
  options.overwrite = o.force;
  options.n_threads = o.threads > 0 ? o.threads : physical_core_count();
  options.on_tensor = [](const quantize::TensorProgress& p) {
    const bool same = p.from == p.to;
    fmt::print(stderr, "[{:>4}/{}] {:<32} {:>5} -> {}{}\n", p.index + 1, p.n_tensors, p.name,
               gguf::ggml_type_name(p.from), gguf::ggml_type_name(p.to),
               same ? " (copied)" : (p.uses_imatrix ? " (imatrix)" : ""));
  };
  const quantize::QuantizeReport r = quantize::quantize_model(options);
  fmt::print(
      stderr,
      "quantized {} -> {} ({}): {} -> {}, {} tensors ({} converted, {} copied) in {:.1f} s\n",
      options.input.string(), options.output.string(), quantize::target_info(options.target).name,
      format_bytes(r.input_bytes), format_bytes(r.output_bytes), r.n_tensors, r.n_converted,
      r.n_copied, r.seconds);
  if (!options.imatrix.empty()) {
    fmt::print(stderr,
               "imatrix {}: {} of the {} converted tensors weighted by it ({} entries); the "
               "others round-to-nearest\n",
               options.imatrix.string(), r.n_imatrix, r.n_converted, r.n_imatrix_entries);
  }
  return 0;
}

}  // namespace

void add_quantize_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<QuantizeCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "quantize",
      "Rewrite a GGUF model with its weights in another type (round-to-nearest, or weighted by "
      "an importance matrix)");
  cmd->add_option("IN", opts->input, "GGUF file or registered model")->required();
  cmd->add_option("OUT", opts->output, "GGUF file to write")->required();
  cmd->add_option(
         "--type", opts->type,
         "Target type, case-insensitive: " + quantize::target_names() + " (docs/QUANTIZE.md)")
      ->required();
  cmd->add_option("--imatrix", opts->imatrix,
                  "Importance matrix (from `llmserve imatrix` or llama-imatrix's GGUF): tensors "
                  "with an entry are quantized to minimise the error it weights");
  cmd->add_flag("--force", opts->force, "Replace OUT when it exists");
  add_threads_option(*cmd, opts->threads);
  cmd->add_option("--cache-dir", opts->cache_dir, "Cache root for registered models");
  cmd->callback([opts, &exit_code] { exit_code = run_quantize(*opts); });
}

}  // namespace llms::cli
