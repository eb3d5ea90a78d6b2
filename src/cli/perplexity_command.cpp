// cli/perplexity_command: `llmserve perplexity -m MODEL -f TEXT [--ctx N] [--batch N]
// [--save-logits FILE] [--kl-divergence-base FILE] [--json]`.
//
// Perplexity of a model over a text file, windowed and scored as llama.cpp's llama-perplexity
// does (eval/perplexity.h), so the two can be compared on the same GGUF, text and window. With
// --save-logits the scored rows' log-probabilities are kept (eval/logits_file.h); with
// --kl-divergence-base a run is compared row by row with such a file (eval/kl_divergence.h). A
// progress line per window goes to stderr; the result to stdout (text, or JSON with --json).
#include "perplexity_command.h"

#include <fmt/core.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine_options.h"
#include "eval/kl_divergence.h"
#include "eval/log_probs.h"
#include "eval/logits_file.h"
#include "eval/perplexity.h"
#include "gguf/gguf_file.h"
#include "model/cpu_runner.h"
#include "model_registry.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/text_file.h"
#include "util/thread_pool.h"
#include "util/utf8.h"

namespace llms::cli {
namespace {

struct PerplexityCommandOptions {
  std::string model = "default";
  std::string text_file;
  std::string cache_dir;
  std::string kv_type = "auto";
  std::string save_logits;
  std::string kl_base;
  int32_t ctx = 512;
  int32_t batch = 0;  // 0: ctx
  int threads = 0;
  int64_t streaming_window = 0;
  int64_t attention_sinks = 0;
  int64_t h2o_budget = 0;
  int64_t h2o_recent = 0;
  bool as_json = false;
};

std::string read_text(const std::string& path) {
  std::string text = read_text_file(path, "-f");
  if (text.empty())
    throw Error(Error::Kind::kInvalidArgument, fmt::format("-f: '{}' is empty", path));
  const size_t bad = find_invalid_utf8(text);
  if (bad != std::string::npos) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("-f: '{}' is not UTF-8 (invalid byte at offset {})", path, bad));
  }
  return text;
}

int run_perplexity(const PerplexityCommandOptions& o) {
  const std::string text = read_text(o.text_file);
  const auto path = resolve_model(o.model, o.cache_dir);
  const gguf::GgufFile file = gguf::GgufFile::open(path);
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(file);

  eval::PerplexityOptions options;
  options.ctx = o.ctx;
  options.batch = o.batch > 0 ? o.batch : o.ctx;
  options.kv_type = parse_kv_cache_dtype(o.kv_type);
  options.h2o = kv::HeavyHitterBudget{o.h2o_budget, o.h2o_recent};
  // As llama.cpp: the whole text is tokenized with the model's special tokens (a BOS where the
  // model adds one), and each window starts with BOS when the model adds one.
  const std::vector<int32_t> tokens = tok.encode(text);
  if (tok.add_bos() && tok.bos_id() >= 0) options.bos_id = tok.bos_id();
  const int32_t n_windows = eval::count_windows(static_cast<int64_t>(tokens.size()), options);

  const int threads = o.threads > 0 ? o.threads : physical_core_count();
  model::CpuRunner runner(file, std::make_shared<ThreadPool>(threads));
  if (o.streaming_window != 0 || o.attention_sinks != 0) {
    runner.set_streaming_attention(o.streaming_window, o.attention_sinks);
  }
  const uint64_t n_ctx_train = runner.config().n_ctx_train;
  if (n_ctx_train > 0 && static_cast<uint64_t>(options.ctx) > n_ctx_train) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("--ctx: {} is more than the model's training context {}", options.ctx,
                            n_ctx_train));
  }
  // What a logits file records of this run, to refuse comparing runs of other texts or models.
  eval::LogitsFileHeader header;
  header.n_vocab = static_cast<uint32_t>(runner.n_vocab());
  header.ctx = static_cast<uint32_t>(options.ctx);
  header.n_windows = static_cast<uint32_t>(n_windows);
  header.rows_per_window = static_cast<uint32_t>(options.ctx - options.ctx / 2 - 1);
  eval::VocabularyHash vocabulary;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) vocabulary.add_token(tok.token_text(id));
  header.vocabulary_hash = vocabulary.value();
  header.tokens.assign(tokens.begin(),
                       tokens.begin() + static_cast<std::ptrdiff_t>(n_windows) * options.ctx);
  std::optional<eval::LogitsFileReader> base;
  if (!o.kl_base.empty()) {
    base.emplace(o.kl_base);
    base->header().check_matches(header, o.kl_base);
  }
  std::optional<eval::LogitsFileWriter> saved;
  if (!o.save_logits.empty()) saved.emplace(o.save_logits, header);
  eval::KlDivergence kl;
  std::vector<float> log_probs(header.n_vocab);
  std::vector<float> base_log_probs(header.n_vocab);
  auto on_row = [&](const eval::ScoredRow& row) {
    eval::log_softmax(row.logits, log_probs);
    if (saved) saved->write_row(log_probs);
    if (base) {
      const int32_t base_top = base->read_row(base_log_probs);
      kl.add(base_log_probs, log_probs, base_top);
    }
  };

  std::fprintf(stderr, "[perplexity] %s: %zu tokens, %d windows of %d, %d threads\n",
               path.filename().string().c_str(), tokens.size(), n_windows, options.ctx, threads);
  const auto t0 = std::chrono::steady_clock::now();
  const eval::PerplexityResult r = eval::perplexity(
      runner, tokens, options,
      [&](const eval::PerplexityProgress& p) {
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::fprintf(stderr, "\r[perplexity] window %d/%d  ppl %.4f  %.1f s, ~%.0f s left   ",
                     p.windows_done, p.windows_total, p.ppl_so_far, s,
                     s / p.windows_done * (p.windows_total - p.windows_done));
        std::fflush(stderr);
      },
      saved || base ? std::function<void(const eval::ScoredRow&)>(on_row) : nullptr);
  if (saved) saved->finish();
  const eval::KlDivergenceSummary kld = kl.summary();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "\n");
  if (o.as_json) {
    nlohmann::json j;
    j["model"] = path.filename().string();
    j["text"] = o.text_file;
    j["ctx"] = options.ctx;
    j["batch"] = options.batch;
    j["kv_cache_dtype"] = o.kv_type;
    j["streaming_window"] = o.streaming_window;
    j["attention_sinks"] = o.attention_sinks;
    j["h2o_budget"] = o.h2o_budget;
    j["h2o_recent"] = o.h2o_recent;
    j["n_tokens"] = r.n_tokens;
    j["n_windows"] = r.n_windows;
    j["n_scored"] = r.n_scored;
    j["ppl"] = r.ppl;
    j["ppl_stderr"] = r.ppl_stderr;
    j["mean_nll"] = r.mean_nll;
    j["ppl_after_window"] = r.ppl_after_window;
    j["seconds"] = seconds;
    j["tokens_per_s"] = static_cast<double>(r.n_windows) * options.ctx / seconds;
    j["threads"] = threads;
    if (saved) j["saved_logits"] = o.save_logits;
    if (base) {
      j["kl_divergence"] = {{"base", o.kl_base},       {"rows", kld.n_rows}, {"mean", kld.mean},
                            {"median", kld.median},    {"p99", kld.p99},     {"max", kld.max},
                            {"same_top", kld.same_top}};
    }
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf(
        "Final estimate: PPL = %.4f +/- %.5f (%lld tokens scored in %d windows of %d; "
        "%.1f s)\n",
        r.ppl, r.ppl_stderr, static_cast<long long>(r.n_scored), r.n_windows, options.ctx, seconds);
    if (base) {
      std::printf(
          "KL-divergence against %s: mean %.6f, median %.6f, p99 %.6f, max %.6f; same top "
          "token %.2f %% of %lld rows\n",
          o.kl_base.c_str(), kld.mean, kld.median, kld.p99, kld.max, 100.0 * kld.same_top,
          static_cast<long long>(kld.n_rows));
    }
  }
  return 0;
}

}  // namespace

void add_perplexity_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<PerplexityCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "perplexity",
      "Perplexity of a model over a text file, in windows scored as llama.cpp's llama-perplexity");
  cmd->add_option("-m,--model", opts->model, "GGUF file or registered model")
      ->capture_default_str();
  cmd->add_option("-f,--file", opts->text_file, "UTF-8 text file")->required();
  cmd->add_option("--ctx", opts->ctx, "Tokens per window (the second half of each is scored)")
      ->capture_default_str();
  cmd->add_option("--batch", opts->batch,
                  "Tokens per forward pass (default: --ctx; a multiple of --ctx runs several "
                  "windows per pass)");
  cmd->add_option(
      "--save-logits", opts->save_logits,
      "Keep the scored rows' log-probabilities in FILE (f16; about 2 bytes x vocabulary "
      "x scored tokens) for a later --kl-divergence-base");
  cmd->add_option(
      "--kl-divergence-base", opts->kl_base,
      "Compare with a --save-logits FILE of the same text and window: KL-divergence and "
      "top-token agreement per token");
  add_kv_cache_dtype_option(*cmd, opts->kv_type);
  add_threads_option(*cmd, opts->threads);
  add_streaming_options(*cmd, opts->streaming_window, opts->attention_sinks);
  add_h2o_options(*cmd, opts->h2o_budget, opts->h2o_recent);
  cmd->add_flag("--json", opts->as_json, "Print the result as JSON");
  cmd->add_option("--cache-dir", opts->cache_dir, "Cache root for registered models");
  cmd->callback([opts, &exit_code] { exit_code = run_perplexity(*opts); });
}

}  // namespace llms::cli
