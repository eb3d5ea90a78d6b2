// cli/imatrix_command: `llmserve imatrix -m MODEL -f TEXT -o FILE [--ctx 512] [--chunks N]
// [--process-output] [--force] [-t THREADS]`.
//
// Gathers an importance matrix (quantize/importance_matrix.h) for `quantize --imatrix`, as
// llama.cpp's llama-imatrix does: the text runs through the model in chunks (cli/calibration_run.h)
// and the activation observer hands every weight matmul's input to the collector, which keeps the
// repeating layers' weights (and output.weight with --process-output) over at least 16 rows.
// Every refusal (exit status 2) comes before the model runs. A progress line per chunk and a
// summary go to stderr.
#include "imatrix_command.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "calibration_run.h"
#include "engine_options.h"
#include "gguf/gguf_file.h"
#include "model_registry.h"
#include "quantize/importance_matrix.h"
#include "util/error.h"

namespace llms::cli {
namespace {

namespace fs = std::filesystem;

struct ImatrixCommandOptions {
  std::string model = "default";
  std::string text_file;
  std::string output;
  std::string cache_dir;
  int32_t ctx = 512;
  int64_t chunks = 0;
  bool chunks_given = false;
  bool process_output = false;
  bool force = false;
  int threads = 0;
};

[[noreturn]] void refuse(std::string message) {
  throw Error(Error::Kind::kInvalidArgument, std::move(message));
}

void check_output(const ImatrixCommandOptions& o) {
  const fs::path output(o.output);
  const fs::path dir = output.parent_path().empty() ? fs::path(".") : output.parent_path();
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    refuse(fmt::format("output directory '{}' does not exist", dir.string()));
  if (fs::is_directory(output, ec)) refuse(fmt::format("output '{}' is a directory", o.output));
  if (fs::exists(output, ec) && !o.force) {
    refuse(fmt::format("output '{}' already exists; pass --force to replace it", o.output));
  }
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int run_imatrix(const ImatrixCommandOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  if (o.chunks_given && o.chunks < 1) {
    refuse(fmt::format("--chunks: {} is not a positive number of chunks", o.chunks));
  }
  const int64_t min_ctx = quantize::ImportanceMatrixCollector::kMinRows;
  if (o.ctx < min_ctx) {
    refuse(fmt::format("--ctx: {} is less than {} tokens (a matmul of fewer rows is not counted)",
                       o.ctx, min_ctx));
  }
  check_output(o);
  const fs::path path = resolve_model(o.model, o.cache_dir);
  const gguf::GgufFile file = gguf::GgufFile::open(path);
  CalibrationOptions calibration;
  calibration.text_file = o.text_file;
  calibration.ctx = o.ctx;
  calibration.chunks = o.chunks;
  calibration.min_ctx = min_ctx;
  calibration.logits_rows = o.process_output;
  calibration.threads = o.threads > 0 ? o.threads : physical_core_count();
  calibration.tag = "imatrix";
  CalibrationRun run(file, path.filename().string(), calibration);
  if (o.process_output && !file.find_tensor("output.weight")) {
    fmt::print(stderr,
               "[imatrix] --process-output: {} ties its output to token_embd.weight, which gets "
               "no entry (as with llama-imatrix)\n",
               path.filename().string());
  }

  quantize::ImportanceMatrixCollector collector(o.process_output);
  run.run([&collector](const model::MatmulInput& input) {
    collector.add(input.weight, input.data, input.n_rows, input.n_columns);
  });

  quantize::ImportanceMatrix matrix = collector.take();
  matrix.datasets = {o.text_file};
  matrix.chunk_count = run.n_chunks();
  matrix.chunk_size = o.ctx;
  quantize::write_importance_matrix(matrix, o.output);
  fmt::print(stderr, "imatrix {}: {} entries from {} tokens ({} chunks of {}) of {} in {:.1f} s\n",
             o.output, matrix.entries.size(), run.n_chunks() * o.ctx, run.n_chunks(), o.ctx,
             o.text_file, seconds_since(start));
  return 0;
}

}  // namespace

void add_imatrix_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<ImatrixCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "imatrix",
      "Gather an importance matrix (per-column activation statistics) from a text, for "
      "quantize --imatrix (llama-imatrix's GGUF format)");
  cmd->add_option("-m,--model", opts->model, "GGUF file or registered model")
      ->capture_default_str();
  cmd->add_option("-f,--file", opts->text_file, "UTF-8 calibration text")->required();
  cmd->add_option("-o,--output", opts->output, "Importance matrix file to write")->required();
  cmd->add_option("--ctx", opts->ctx,
                  "Tokens per chunk; each chunk is a fresh sequence (16 to the model's context)")
      ->capture_default_str();
  CLI::Option* chunks = cmd->add_option("--chunks", opts->chunks,
                                        "Chunks to run (default: every whole chunk of the text)");
  cmd->add_flag("--process-output", opts->process_output,
                "Also collect output.weight (over every row of each chunk)");
  cmd->add_flag("--force", opts->force, "Replace the output file when it exists");
  add_threads_option(*cmd, opts->threads);
  cmd->add_option("--cache-dir", opts->cache_dir, "Cache root for registered models");
  cmd->callback([opts, chunks, &exit_code] {
    opts->chunks_given = chunks->count() > 0;
    exit_code = run_imatrix(*opts);
  });
}

}  // namespace llms::cli
