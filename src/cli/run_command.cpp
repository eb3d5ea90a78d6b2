// `llmserve run -m MODEL -p PROMPT`: one prompt, streamed to stdout, with speed figures.
//
// The one-shot path of the engine: tokenize (optionally through the model's chat template),
// prefill in chunks, then decode one token per step through the same paged forward pass and
// sampler the server uses, printing text as soon as it is complete UTF-8.
#include "run_command.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine_options.h"
#include "gguf/gguf_file.h"
#include "kv/step_batch.h"
#include "model/kv_storage.h"
#include "model/transformer.h"
#include "model_registry.h"
#include "sampling/sampler.h"
#include "tokenizer/chat_prompt.h"
#include "tokenizer/detokenizer.h"
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
  int threads = 0;
  int32_t prefill_chunk = 512;
  std::string kv_cache_dtype = "auto";
  sampling::SamplingParams sampling;
  int64_t seed = -1;
};

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

int run(RunOptions opts) {
  if (opts.n_predict < 0) throw Error(Error::Kind::kInvalidArgument, "-n must be >= 0");
  if (opts.prefill_chunk < 1) throw Error(Error::Kind::kInvalidArgument, "--chunk must be >= 1");
  if (opts.seed >= 0) opts.sampling.seed = static_cast<uint64_t>(opts.seed);
  auto path = resolve_model(opts.model, opts.cache_dir);
  auto t_load = Clock::now();
  gguf::GgufFile file = gguf::GgufFile::open(path);
  tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(file);
  int threads = opts.threads > 0 ? opts.threads : physical_core_count();
  model::Transformer model(file, threads);
  if (tok.n_vocab() > model.n_vocab()) {
    throw Error(Error::Kind::kInvalidFile, "the tokenizer has more tokens than the model's output");
  }
  double load_s = seconds_since(t_load);

  std::vector<int32_t> prompt_ids =
      opts.chat ? tokenizer::encode_chat_prompt(file, tok, opts.system, opts.prompt)
                : tok.encode(opts.prompt, {.add_special = true, .parse_special = false});
  if (prompt_ids.empty()) throw Error(Error::Kind::kInvalidArgument, "the prompt is empty");
  const int64_t n_ctx_limit = model.config().n_ctx_train ? model.config().n_ctx_train : 4096;
  if (static_cast<int64_t>(prompt_ids.size()) + opts.n_predict > n_ctx_limit) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("prompt ({} tokens) + -n ({}) exceeds the context length {}",
                            prompt_ids.size(), opts.n_predict, n_ctx_limit));
  }
  const int32_t block_size = 16;
  const int32_t n_tokens_max = static_cast<int32_t>(prompt_ids.size()) + opts.n_predict + 1;
  const int32_t n_blocks = (n_tokens_max + block_size - 1) / block_size;
  model::KvStorage kv(model.config(), block_size, n_blocks,
                      parse_kv_cache_dtype(opts.kv_cache_dtype));
  std::vector<kv::BlockId> table(n_blocks);
  for (int32_t i = 0; i < n_blocks; ++i) table[i] = i;
  model.reserve(std::min<int32_t>(opts.prefill_chunk, static_cast<int32_t>(prompt_ids.size())), 1);

  sampling::Sampler sampler(opts.sampling, model.n_vocab());
  sampler.set_prompt(prompt_ids);
  tokenizer::IncrementalDetokenizer detok(tok);
  std::vector<int32_t> end_ids = tok.end_of_generation_ids();
  std::vector<float> logits(model.n_vocab());
  kv::StepBatch batch;

  auto t_start = Clock::now();
  int32_t n_cached = 0;
  const int32_t n_prompt = static_cast<int32_t>(prompt_ids.size());
  while (n_cached < n_prompt) {
    int32_t n = std::min(opts.prefill_chunk, n_prompt - n_cached);
    batch.clear();
    batch.add_sequence(0, std::span<const int32_t>(prompt_ids).subspan(n_cached, n), n_cached,
                       table, n_cached + n == n_prompt);
    model.forward(batch, kv, logits.data());
    n_cached += n;
  }
  double prefill_s = seconds_since(t_start);

  int32_t n_generated = 0;
  double ttft_s = 0.0;
  auto t_decode = Clock::now();
  std::string finish = "length";
  while (n_generated < opts.n_predict) {
    int32_t token = sampler.sample(logits).token;
    sampler.accept(token);
    if (n_generated == 0) ttft_s = seconds_since(t_start);
    ++n_generated;
    if (!opts.ignore_eos && std::find(end_ids.begin(), end_ids.end(), token) != end_ids.end()) {
      finish = "stop";
      break;
    }
    auto out = detok.push(token);
    std::fwrite(out.text.data(), 1, out.text.size(), stdout);
    std::fflush(stdout);
    if (n_generated == opts.n_predict) break;
    batch.clear();
    std::vector<int32_t> one = {token};
    batch.add_sequence(0, one, n_cached++, table, true);
    model.forward(batch, kv, logits.data());
  }
  auto tail = detok.finish();
  std::fwrite(tail.text.data(), 1, tail.text.size(), stdout);
  std::fputc('\n', stdout);
  double decode_s = seconds_since(t_decode);

  // The first generated token comes from the prefill's logits; the others each cost one step.
  int32_t n_decode_steps = std::max(0, n_generated - 1);
  fmt::print(stderr,
             "\n[llmserve run] model {} ({} threads), load {:.2f} s\n"
             "  prompt   {:5d} tokens in {:7.3f} s  {:8.2f} tok/s\n"
             "  generate {:5d} tokens in {:7.3f} s  {:8.2f} tok/s  (finish: {})\n"
             "  time to first token {:.1f} ms\n",
             path.filename().string(), threads, load_s, n_prompt, prefill_s,
             n_prompt / std::max(prefill_s, 1e-9), n_generated, decode_s,
             n_decode_steps / std::max(decode_s, 1e-9), finish, ttft_s * 1000.0);
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
  cmd->add_option("--chunk", opts->prefill_chunk, "Prefill chunk size in tokens");
  cmd->add_option("--temp,--temperature", opts->sampling.temperature, "0 = greedy");
  cmd->add_option("--top-k", opts->sampling.top_k, "0 = off");
  cmd->add_option("--top-p", opts->sampling.top_p, "1 = off");
  cmd->add_option("--min-p", opts->sampling.min_p, "0 = off");
  cmd->add_option("--repeat-penalty", opts->sampling.repetition_penalty, "1 = off");
  cmd->add_option("--presence-penalty", opts->sampling.presence_penalty, "0 = off");
  cmd->add_option("--frequency-penalty", opts->sampling.frequency_penalty, "0 = off");
  cmd->add_option("--seed", opts->seed, "Sampling seed (default: random)");
  cmd->add_flag("--ignore-eos", opts->ignore_eos, "Keep generating past end-of-text tokens");
  cmd->add_option("--cache-dir", opts->cache_dir, "Cache root for registered models");
  cmd->callback([opts, &exit_code] { exit_code = run(*opts); });
}

}  // namespace llms::cli
