// `llmserve run -m MODEL -p PROMPT`: one prompt, streamed to stdout, with speed figures.
//
// The one-shot path goes through the serving engine like every other entry point, so it gets
// the same chunked prefill, paged KV cache, sampler chain, stop strings and speculative decoding
// (--speculative-method ngram|draft): one request, stepped until it finishes, its text printed
// as soon as it is complete UTF-8.
#include "run_command.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine_options.h"
#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "model_registry.h"
#include "sampling/sampler.h"
#include "speculative_options.h"
#include "structured_options.h"
#include "tokenizer/chat_prompt.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace llms::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct RunOptions {
  std::string model = "default";
  std::string cache_dir;
  std::string prompt;
  std::string system;
  int32_t n_predict = 128;
  bool chat = false;
  bool ignore_eos = false;
  bool json = false;
  int threads = 0;
  DeviceOptions device;
  int32_t prefill_chunk = 512;
  std::string kv_cache_dtype = "auto";
  std::vector<std::string> stop;
  StructuredOptions structured;
  sampling::SamplingParams sampling;
  int64_t seed = -1;
  SpeculativeOptions speculative;
};

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

int run(RunOptions opts) {
  if (opts.n_predict < 1) throw Error(Error::Kind::kInvalidArgument, "-n must be >= 1");
  if (opts.prefill_chunk < 1) throw Error(Error::Kind::kInvalidArgument, "--chunk must be >= 1");
  if (opts.seed >= 0) opts.sampling.seed = static_cast<uint64_t>(opts.seed);
  opts.sampling.validate(1 << 30);  // the vocabulary is checked by the engine
  engine::EngineConfig config;
  set_device(opts.device, config);
  config.speculative = opts.speculative.to_config();
  auto path = resolve_model(opts.model, opts.cache_dir);
  auto t_load = Clock::now();
  gguf::GgufFile file = gguf::GgufFile::open(path);
  tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(file);
  const auto draft = open_draft_model(opts.speculative, opts.cache_dir);

  std::vector<int32_t> prompt_ids =
      opts.chat ? tokenizer::encode_chat_prompt(file, tok, opts.system, opts.prompt)
                : tok.encode(opts.prompt, {.add_special = true, .parse_special = false});
  if (prompt_ids.empty()) throw Error(Error::Kind::kInvalidArgument, "the prompt is empty");
  const auto n_prompt = static_cast<int32_t>(prompt_ids.size());
  const uint64_t n_ctx = model::ModelConfig::from_gguf(file).n_ctx_train;
  const int64_t n_ctx_limit = n_ctx > 0 ? static_cast<int64_t>(n_ctx) : 4096;
  if (int64_t{n_prompt} + opts.n_predict > n_ctx_limit) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("prompt ({} tokens) + -n ({}) exceeds the context length {}", n_prompt,
                            opts.n_predict, n_ctx_limit));
  }

  config.block_size = 16;
  config.n_kv_blocks = (n_prompt + opts.n_predict + config.block_size) / config.block_size;
  config.kv_cache_dtype = parse_kv_cache_dtype(opts.kv_cache_dtype);
  config.n_threads = opts.threads;
  config.scheduler.max_num_seqs = 1;
  // A prefill chunk per step; a decode step holds 1 + k tokens.
  config.scheduler.max_num_batched_tokens = std::max(std::min(opts.prefill_chunk, n_prompt),
                                                     1 + config.speculative.num_speculative_tokens);
  config.draft_file = draft.get();
  engine::Engine eng(file, tok, config);
  const double load_s = seconds_since(t_load);

  engine::GenerationRequest request;
  request.constraint = compile_structured_options(opts.structured, tok, eng.n_vocab());
  request.prompt = prompt_ids;
  request.sampling = opts.sampling;
  request.max_tokens = opts.n_predict;
  request.ignore_eos = opts.ignore_eos;
  request.stop = opts.stop;
  std::string finish;
  std::string error;
  int32_t n_generated = 0;
  int32_t n_events = 0;  // one per step that gave tokens: the first, then one per target pass
  engine::RequestMetrics metrics;
  auto t_start = Clock::now();
  eng.add_request(std::move(request), [&](const engine::RequestOutput& o) {
    std::fwrite(o.text.data(), 1, o.text.size(), stdout);
    std::fflush(stdout);
    n_generated += static_cast<int32_t>(o.tokens.size());
    if (!o.tokens.empty()) ++n_events;
    if (o.finished) {
      finish = engine::finish_reason_name(o.finish_reason);
      error = o.error;
    }
    if (o.request_finished) metrics = o.metrics;
  });
  while (eng.has_unfinished()) eng.step();
  std::fputc('\n', stdout);
  const double total_s = seconds_since(t_start);
  if (!error.empty()) throw Error(Error::Kind::kInternal, error);

  // The first token comes from the prompt's last step; each later event is one target pass.
  const int32_t n_decode_passes = std::max(0, n_events - 1);
  const double decode_s = std::max(metrics.decode_time, 1e-9);
  const engine::EngineStats stats = eng.stats();
  if (opts.json) {
    // Decode speed counts the tokens after the first over the time after it (the draft model's
    // catch-up on the prompt included): what a user waits for once the answer starts.
    nlohmann::json j = {
        {"model", path.filename().string()},
        {"prompt_tokens", n_prompt},
        {"generated_tokens", n_generated},
        {"finish_reason", finish},
        {"prompt_seconds", metrics.prefill_time},
        {"time_to_first_token_seconds", metrics.time_to_first_token},
        {"decode_seconds", metrics.decode_time},
        {"decode_tokens_per_s", std::max(0, n_generated - 1) / decode_s},
        {"target_passes", n_decode_passes},
        {"tokens_per_target_pass",
         n_decode_passes > 0 ? static_cast<double>(n_generated - 1) / n_decode_passes : 0.0},
        {"speculative_method", spec::method_name(config.speculative.method)},
        {"num_speculative_tokens", config.speculative.num_speculative_tokens},
        {"draft_tokens", stats.spec_num_draft_tokens},
        {"accepted_tokens", stats.spec_num_accepted_tokens},
        {"accepted_per_position", stats.spec_accepted_per_pos},
        {"acceptance_rate", stats.spec_num_draft_tokens > 0
                                ? static_cast<double>(stats.spec_num_accepted_tokens) /
                                      static_cast<double>(stats.spec_num_draft_tokens)
                                : 0.0}};
    fmt::print(stderr, "{}\n", j.dump());
    return 0;
  }
  fmt::print(stderr,
             "\n[llmserve run] model {} ({} threads), load {:.2f} s\n"
             "  prompt   {:5d} tokens in {:7.3f} s  {:8.2f} tok/s\n"
             "  generate {:5d} tokens in {:7.3f} s  {:8.2f} tok/s  (finish: {})\n"
             "  time to first token {:.1f} ms\n",
             path.filename().string(),
             config.n_threads > 0 ? config.n_threads : physical_core_count(), load_s, n_prompt,
             metrics.prefill_time, n_prompt / std::max(metrics.prefill_time, 1e-9), n_generated,
             std::max(total_s - metrics.prefill_time, 0.0), std::max(0, n_generated - 1) / decode_s,
             finish, metrics.time_to_first_token * 1000.0);
  if (config.speculative.enabled()) {
    const engine::EngineStats& s = stats;
    fmt::print(
        stderr,
        "  speculative ({}, up to {} drafts): {} of {} drafts accepted ({:.1f} %), "
        "{:.2f} tokens per target pass\n",
        spec::method_name(config.speculative.method), config.speculative.num_speculative_tokens,
        s.spec_num_accepted_tokens, s.spec_num_draft_tokens,
        s.spec_num_draft_tokens > 0 ? 100.0 * static_cast<double>(s.spec_num_accepted_tokens) /
                                          static_cast<double>(s.spec_num_draft_tokens)
                                    : 0.0,
        n_decode_passes > 0 ? static_cast<double>(n_generated - 1) / n_decode_passes : 0.0);
  }
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<RunOptions>();
  opts->sampling.temperature = 0.8f;  // llama.cpp's interactive defaults
  opts->sampling.top_k = 40;
  opts->sampling.top_p = 0.95f;
  opts->sampling.min_p = 0.05f;
  auto* cmd =
      app.add_subcommand("run", "Generate text for one prompt, streamed, with speed figures");
  cmd->add_option("-m,--model", opts->model, "GGUF file or registered model (default: default)");
  cmd->add_option("-p,--prompt", opts->prompt, "Prompt text")->required();
  cmd->add_option("-n,--n-predict", opts->n_predict, "Tokens to generate");
  add_kv_cache_dtype_option(*cmd, opts->kv_cache_dtype);
  cmd->add_flag("--chat", opts->chat, "Wrap the prompt in the model's chat template");
  cmd->add_option("--system", opts->system, "System message (with --chat)");
  add_threads_option(*cmd, opts->threads);
  add_device_options(*cmd, opts->device);
  cmd->add_option("--chunk", opts->prefill_chunk, "Prefill chunk size in tokens");
  cmd->add_option("--temp,--temperature", opts->sampling.temperature, "0 = greedy");
  cmd->add_option("--top-k", opts->sampling.top_k, "0 = off");
  cmd->add_option("--top-p", opts->sampling.top_p, "1 = off");
  cmd->add_option("--min-p", opts->sampling.min_p, "0 = off");
  cmd->add_option("--repeat-penalty", opts->sampling.repetition_penalty, "1 = off");
  cmd->add_option("--presence-penalty", opts->sampling.presence_penalty, "0 = off");
  cmd->add_option("--frequency-penalty", opts->sampling.frequency_penalty, "0 = off");
  cmd->add_option("--seed", opts->seed, "Sampling seed (default: random)");
  cmd->add_option("--stop", opts->stop, "Stop string (repeatable; never printed)");
  add_structured_options(*cmd, opts->structured);
  cmd->add_flag("--ignore-eos", opts->ignore_eos, "Keep generating past end-of-text tokens");
  cmd->add_flag("--json", opts->json, "Print the figures as one JSON object on stderr");
  cmd->add_option("--cache-dir", opts->cache_dir, "Cache root for registered models");
  add_speculative_options(*cmd, opts->speculative);
  cmd->callback([opts, &exit_code] { exit_code = run(*opts); });
}

}  // namespace llms::cli
