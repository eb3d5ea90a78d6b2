// cli/imatrix_command: `llmserve imatrix -m MODEL -f TEXT -o FILE [--ctx 512] [--chunks N]
// [--process-output] [--force] [-t THREADS]`.
//
// Gathers an importance matrix (quantize/importance_matrix.h) for `quantize --imatrix`, as
// llama.cpp's llama-imatrix does: the whole text is tokenized (with BOS where the model adds one),
// cut into chunks of --ctx tokens, and each chunk runs as a fresh sequence from position 0 with
// its first token replaced by BOS where the model adds one; the transformer's activation observer
// (model/transformer.h) hands every weight matmul's input to the collector, which keeps the
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

#include "engine_options.h"
#include "gguf/gguf_file.h"
#include "kv/step_batch.h"
#include "model/cpu_runner.h"
#include "model/model_config.h"
#include "model_registry.h"
#include "quantize/importance_matrix.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/text_file.h"
#include "util/thread_pool.h"
#include "util/utf8.h"

namespace llms::cli {
namespace {

namespace fs = std::filesystem;

constexpr int32_t kKvBlock = 16;

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

std::string read_text(const std::string& path) {
  std::string text = read_text_file(path, "-f");
  if (text.empty()) refuse(fmt::format("-f: '{}' is empty", path));
  const size_t bad = find_invalid_utf8(text);
  if (bad != std::string::npos) {
    refuse(fmt::format("-f: '{}' is not UTF-8 (invalid byte at offset {})", path, bad));
  }
  return text;
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
  const std::string text = read_text(o.text_file);
  const fs::path path = resolve_model(o.model, o.cache_dir);
  const gguf::GgufFile file = gguf::GgufFile::open(path);
  const uint64_t n_ctx_train = model::ModelConfig::from_gguf(file).n_ctx_train;
  if (n_ctx_train > 0 && static_cast<uint64_t>(o.ctx) > n_ctx_train) {
    refuse(fmt::format("--ctx: {} is more than the model's context {}", o.ctx, n_ctx_train));
  }
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(file);
  const std::vector<int32_t> tokens = tok.encode(text);
  const auto n_available = static_cast<int64_t>(tokens.size()) / o.ctx;
  if (n_available < 1) {
    refuse(fmt::format("the text has {} tokens; one chunk of --ctx {} needs {}", tokens.size(),
                       o.ctx, o.ctx));
  }
  const int64_t n_chunks = o.chunks_given ? std::min(o.chunks, n_available) : n_available;
  if (o.chunks_given && o.chunks > n_available) {
    fmt::print(stderr, "[imatrix] the text holds {} chunks of {} tokens, not {}: using {}\n",
               n_available, o.ctx, o.chunks, n_available);
  }
  const int threads = o.threads > 0 ? o.threads : physical_core_count();
  model::CpuRunner runner(file, std::make_shared<ThreadPool>(threads));
  const int32_t n_blocks = (o.ctx + kKvBlock - 1) / kKvBlock;
  runner.allocate_kv(kKvBlock, n_blocks, kv::KvCacheType::kF16, runner.config().single_kv_layout());
  // The output matmul runs only over rows that want logits: all of them when it is collected.
  const int32_t n_logits = o.process_output ? o.ctx : 0;
  runner.reserve(o.ctx, std::max(n_logits, 1));
  if (o.process_output && !file.find_tensor("output.weight")) {
    fmt::print(stderr,
               "[imatrix] --process-output: {} ties its output to token_embd.weight, which gets "
               "no entry (as with llama-imatrix)\n",
               path.filename().string());
  }

  quantize::ImportanceMatrixCollector collector(o.process_output);
  runner.transformer().set_activation_observer([&collector](const model::MatmulInput& input) {
    collector.add(input.weight, input.data, input.n_rows, input.n_columns);
  });
  std::vector<kv::BlockId> table(static_cast<size_t>(n_blocks));
  for (int32_t b = 0; b < n_blocks; ++b) table[static_cast<size_t>(b)] = b;
  const int32_t bos = tok.add_bos() ? tok.bos_id() : -1;
  fmt::print(stderr, "[imatrix] {}: {} tokens, {} chunks of {}, {} threads\n",
             path.filename().string(), tokens.size(), n_chunks, o.ctx, threads);
  const auto run_start = std::chrono::steady_clock::now();
  kv::StepBatch batch;
  std::vector<int32_t> chunk;
  for (int64_t c = 0; c < n_chunks; ++c) {
    const auto begin = tokens.begin() + static_cast<std::ptrdiff_t>(c * o.ctx);
    chunk.assign(begin, begin + o.ctx);
    if (bos >= 0) chunk[0] = bos;
    batch.clear();
    // Each chunk is a new sequence at position 0 over the same blocks: nothing of the previous
    // chunk is attended to.
    batch.add_sequence(c, chunk, 0, table, n_logits);
    runner.execute(batch);
    const double s = seconds_since(run_start);
    fmt::print(stderr, "[imatrix] chunk {}/{}  {:.1f} s, ~{:.0f} s left\n", c + 1, n_chunks, s,
               s / static_cast<double>(c + 1) * static_cast<double>(n_chunks - c - 1));
  }
  runner.transformer().set_activation_observer(nullptr);

  quantize::ImportanceMatrix matrix = collector.take();
  matrix.datasets = {o.text_file};
  matrix.chunk_count = n_chunks;
  matrix.chunk_size = o.ctx;
  quantize::write_importance_matrix(matrix, o.output);
  fmt::print(stderr, "imatrix {}: {} entries from {} tokens ({} chunks of {}) of {} in {:.1f} s\n",
             o.output, matrix.entries.size(), n_chunks * o.ctx, n_chunks, o.ctx, o.text_file,
             seconds_since(start));
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
