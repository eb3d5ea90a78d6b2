// `llmserve bench-engine`: the serving engine's speed on this machine, as JSON.
//
// Three measurements, each in one run so the ratios hold:
//  - batched generation: for each concurrency c, c requests of --prompt-len random tokens and
//    --gen-len generated tokens (greedy, EOS ignored) are added at once; prompt throughput is
//    c x prompt-len over the time until every sequence has its first token, generation
//    throughput is the tokens generated after that over the time they took (as
//    llama-batched-bench's S_TG), so the figures compare with PEERS.md; full-batch throughput the
//    same until the step in which the first request finished (with speculation sequences finish
//    apart and the tail runs fewer: the whole phase then measures the slowest one);
//  - prefix caching: a --prefix-len shared system prompt followed by --questions different
//    questions, one request at a time: TTFT of the first (cold) against the mean of the others
//    (warm, prefix-cache hits);
//  - KV waste: allocated token slots minus the slots holding tokens, over allocated, sampled at
//    the end of a run of mixed-length requests.
// With --mixed it runs instead the mixed load of mixed_load_bench.h: streams decoding while long
// prompts arrive, their inter-token latencies and TTFTs under each --mixed-itl-ms target.
// With --json-schema FILE, --regex R or --grammar FILE every request is constrained (structured
// output), so the cost of the masks shows against the same run without them.
#include "bench_engine_command.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine_options.h"
#include "gguf/gguf_file.h"
#include "mixed_load_bench.h"
#include "model_registry.h"
#include "structured_options.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace llms::cli {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct BenchEngineOptions {
  std::string model = "default";
  std::string cache_dir;
  std::string concurrency = "1,4,16,32,64";
  int32_t prompt_len = 128;
  int32_t gen_len = 64;
  int32_t prefix_len = 1024;
  int32_t questions = 32;
  int32_t waste_requests = 48;
  bool skip_prefix = false;
  bool skip_waste = false;
  bool mixed = false;
  std::string mixed_itl_targets = "off,auto";
  MixedLoadOptions mixed_load;
  StructuredOptions structured;
  EngineOptions engine;
};

// The constraint every request follows, when one is asked for.
std::shared_ptr<const sampling::TokenConstraintFactory> g_constraint;

double now_s() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

std::vector<int32_t> random_tokens(std::mt19937_64& rng, int32_t n, int32_t n_vocab) {
  // Ordinary tokens of the vocabulary's first part (avoids control tokens at the end).
  std::uniform_int_distribution<int32_t> d(100, std::max(101, std::min(n_vocab, 100000) - 1));
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& t : ids) t = d(rng);
  return ids;
}

engine::GenerationRequest make_request(std::vector<int32_t> prompt, int32_t max_tokens) {
  engine::GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0.0f;
  r.constraint = g_constraint;
  return r;
}

json bench_concurrency(engine::Engine& eng, int32_t c, const BenchEngineOptions& o,
                       std::mt19937_64& rng) {
  // The generation phase starts when every sequence has its first token (counted per request
  // from its own outputs: running sequences decode while later ones still prefill). Its full-batch
  // part ends when the first request finishes: with speculation, sequences finish at different
  // steps and the phase's tail runs a shrinking batch, so the whole phase measures when the
  // slowest finishes and the full-batch part the throughput at c sequences.
  int32_t n_with_first = 0;
  int64_t n_generated = 0;
  double t_all_first = 0.0;
  int64_t tokens_at_all_first = 0;
  bool any_finished = false;
  double t_first_done = 0.0;  // the end of the step in which the first request finished
  int64_t tokens_at_first_done = 0;
  const engine::EngineStats before = eng.stats();
  const double t0 = now_s();
  for (int32_t i = 0; i < c; ++i) {
    eng.add_request(make_request(random_tokens(rng, o.prompt_len, eng.n_vocab()), o.gen_len),
                    [&, seen = false](const engine::RequestOutput& out) mutable {
                      n_generated += static_cast<int64_t>(out.tokens.size());
                      if (!seen && !out.tokens.empty()) {
                        seen = true;
                        if (++n_with_first == c) {
                          t_all_first = now_s();
                          tokens_at_all_first = n_generated;
                        }
                      }
                      if (out.request_finished) any_finished = true;
                    });
  }
  // The most sequences the pool held at once (what a KV budget admits) and the preemptions it
  // cost.
  int32_t max_running = 0;
  while (eng.has_unfinished()) {
    eng.step();
    max_running = std::max(max_running, eng.stats().n_running);
    if (any_finished && t_first_done == 0.0) {
      t_first_done = now_s();
      tokens_at_first_done = n_generated;
    }
  }
  const double t_end = now_s();
  const int64_t generated = n_generated;
  if (t_all_first == 0.0) t_all_first = t_end;
  const double prompt_s = t_all_first - t0;
  const double gen_s = t_end - t_all_first;
  json j;
  j["concurrency"] = c;
  j["prompt_tokens"] = static_cast<int64_t>(c) * o.prompt_len;
  j["generated_tokens"] = generated;
  j["prompt_phase_s"] = prompt_s;
  j["generation_phase_s"] = gen_s;
  j["prompt_tokens_per_s"] = prompt_s > 0 ? static_cast<double>(c) * o.prompt_len / prompt_s : 0.0;
  j["generation_tokens_per_s"] =
      gen_s > 0 ? static_cast<double>(generated - tokens_at_all_first) / gen_s : 0.0;
  // A request that finished before every sequence had its first token leaves no full batch.
  const double full_s = t_first_done - t_all_first;
  if (t_all_first > 0.0 && full_s > 0) {
    j["full_batch_tokens_per_s"] =
        static_cast<double>(tokens_at_first_done - tokens_at_all_first) / full_s;
  }
  j["total_s"] = t_end - t0;
  const engine::EngineStats after = eng.stats();
  j["target_steps"] = after.n_steps - before.n_steps;
  j["max_running"] = max_running;
  j["preemptions"] = after.n_preemptions - before.n_preemptions;
  if (!after.spec_accepted_per_pos.empty()) {
    const int64_t drafted = after.spec_num_draft_tokens - before.spec_num_draft_tokens;
    const int64_t accepted = after.spec_num_accepted_tokens - before.spec_num_accepted_tokens;
    j["spec_draft_tokens"] = drafted;
    j["spec_accepted_tokens"] = accepted;
    j["spec_acceptance_rate"] = drafted > 0 ? static_cast<double>(accepted) / drafted : 0.0;
  }
  return j;
}

json bench_prefix(engine::Engine& eng, const BenchEngineOptions& o, std::mt19937_64& rng) {
  const std::vector<int32_t> prefix = random_tokens(rng, o.prefix_len, eng.n_vocab());
  std::vector<double> ttft;
  std::vector<int32_t> cached;
  for (int32_t q = 0; q <= o.questions; ++q) {
    std::vector<int32_t> prompt = prefix;
    auto question = random_tokens(rng, 24, eng.n_vocab());
    prompt.insert(prompt.end(), question.begin(), question.end());
    double t = 0.0;
    int32_t n_cached = 0;
    eng.add_request(make_request(std::move(prompt), 1), [&](const engine::RequestOutput& out) {
      if (out.request_finished) {
        t = out.metrics.time_to_first_token;
        n_cached = out.metrics.n_cached_tokens;
      }
    });
    while (eng.has_unfinished()) eng.step();
    ttft.push_back(t);
    cached.push_back(n_cached);
  }
  double warm = 0.0;
  for (size_t i = 1; i < ttft.size(); ++i) warm += ttft[i];
  warm /= std::max<size_t>(1, ttft.size() - 1);
  json j;
  j["prefix_tokens"] = o.prefix_len;
  j["questions"] = o.questions;
  j["cold_ttft_s"] = ttft[0];
  j["warm_ttft_mean_s"] = warm;
  j["cold_over_warm"] = warm > 0 ? ttft[0] / warm : 0.0;
  j["warm_cached_tokens"] = cached.size() > 1 ? cached[1] : 0;
  return j;
}

json bench_waste(engine::Engine& eng, const BenchEngineOptions& o, std::mt19937_64& rng) {
  std::uniform_int_distribution<int32_t> plen(16, 700);
  std::uniform_int_distribution<int32_t> glen(8, 96);
  for (int32_t i = 0; i < o.waste_requests; ++i) {
    eng.add_request(make_request(random_tokens(rng, plen(rng), eng.n_vocab()), glen(rng)), nullptr);
  }
  double sum = 0.0;
  int64_t n = 0;
  double worst = 0.0;
  while (eng.has_unfinished()) {
    eng.step();
    if (!eng.has_unfinished()) break;
    const double w = eng.kv_waste();
    sum += w;
    worst = std::max(worst, w);
    ++n;
  }
  json j;
  j["requests"] = o.waste_requests;
  j["mean_waste_fraction"] = n ? sum / static_cast<double>(n) : 0.0;
  j["max_waste_fraction"] = worst;
  j["steps"] = n;
  return j;
}

int run_bench_engine(const BenchEngineOptions& o) {
  auto path = resolve_model(o.model, o.cache_dir);
  gguf::GgufFile file = gguf::GgufFile::open(path);
  tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(file);
  std::vector<int32_t> levels;
  {
    std::stringstream ss(o.concurrency);
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (item.empty()) continue;
      int32_t c = 0;
      try {
        c = std::stoi(item);
      } catch (const std::exception&) {
        c = 0;
      }
      if (c < 1 || c > 4096) {
        throw Error(Error::Kind::kInvalidArgument,
                    fmt::format("--concurrency: '{}' is not a count in [1, 4096]", item));
      }
      levels.push_back(c);
    }
  }
  EngineOptions eo = o.engine;
  const int32_t top = levels.empty() ? 1 : *std::max_element(levels.begin(), levels.end());
  eo.max_num_seqs = std::max(eo.max_num_seqs, top);
  engine::EngineConfig config = eo.to_config();
  const auto draft = open_draft_model(eo.speculative, o.cache_dir);
  config.draft_file = draft.get();
  if (o.mixed) {
    MixedLoadOptions mo = o.mixed_load;
    mo.itl_targets.clear();
    std::stringstream ss(o.mixed_itl_targets);
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (!item.empty()) mo.itl_targets.push_back(item);
    }
    json report = run_mixed_load(file, tok, config, mo);
    report["model"] = path.filename().string();
    report["max_num_batched_tokens"] = eo.max_num_batched_tokens;
    report["max_itl_ms_long_only"] = eo.max_itl_ms;
    std::printf("%s\n", report.dump(2).c_str());
    return 0;
  }
  engine::Engine eng(file, tok, config);
  print_kv_pool(eng, stderr);
  std::mt19937_64 rng(42);
  g_constraint = compile_structured_options(o.structured, tok, eng.n_vocab());

  json report;
  report["model"] = path.filename().string();
  report["constraint"] = o.structured.describe();
  report["max_num_seqs"] = eo.max_num_seqs;
  report["max_num_batched_tokens"] = eo.max_num_batched_tokens;
  report["kv_blocks"] = eng.kv_pool().n_blocks;
  report["kv_bytes"] = eng.kv_pool().bytes;
  report["kv_cache_groups"] = eng.kv_pool().n_groups;
  report["kv_window_groups"] = eng.kv_pool().n_window_groups;
  json runs = json::array();
  for (int32_t c : levels) {
    fmt::print(stderr, "concurrency {} ...\n", c);
    runs.push_back(bench_concurrency(eng, c, o, rng));
  }
  report["batched_generation"] = runs;
  for (const auto& r : runs) {
    if (r["concurrency"] == 1) {
      const double single = r["generation_tokens_per_s"].get<double>();
      json ratios = json::object();
      for (const auto& q : runs) {
        ratios[std::to_string(q["concurrency"].get<int>())] =
            single > 0 ? q["generation_tokens_per_s"].get<double>() / single : 0.0;
      }
      report["generation_over_single_sequence"] = ratios;
    }
  }
  if (!o.skip_prefix) {
    fmt::print(stderr, "prefix caching ...\n");
    report["prefix_caching"] = bench_prefix(eng, o, rng);
  }
  if (!o.skip_waste) {
    fmt::print(stderr, "kv waste ...\n");
    report["kv_waste"] = bench_waste(eng, o, rng);
  }
  std::printf("%s\n", report.dump(2).c_str());
  return 0;
}

}  // namespace

void add_bench_engine_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<BenchEngineOptions>();
  auto* cmd = app.add_subcommand(
      "bench-engine", "Serving-engine speed: batched generation, prefix caching, KV waste (JSON)");
  cmd->add_option("-m,--model", o->model, "GGUF file or registered model (default: default)");
  cmd->add_option("--concurrency", o->concurrency, "Comma-separated concurrency levels")
      ->capture_default_str();
  cmd->add_option("--prompt-len", o->prompt_len, "Prompt tokens per request")
      ->capture_default_str();
  cmd->add_option("--gen-len", o->gen_len, "Generated tokens per request")->capture_default_str();
  cmd->add_option("--prefix-len", o->prefix_len, "Shared system-prompt tokens")
      ->capture_default_str();
  cmd->add_option("--questions", o->questions, "Requests after the cold one")
      ->capture_default_str();
  cmd->add_option("--waste-requests", o->waste_requests, "Requests in the KV-waste run")
      ->capture_default_str();
  cmd->add_flag("--skip-prefix", o->skip_prefix, "Skip the prefix-caching measurement");
  cmd->add_flag("--skip-waste", o->skip_waste, "Skip the KV-waste measurement");
  cmd->add_flag("--mixed", o->mixed,
                "Run the mixed load instead: streams decoding while long prompts arrive (ITL "
                "percentiles, TTFT; each --mixed-itl-ms target on a fresh engine, and the long "
                "prompts alone)");
  cmd->add_option("--mixed-itl-ms", o->mixed_itl_targets,
                  "--mixed: comma-separated --max-itl-ms targets to compare (the first is the "
                  "throughput reference)")
      ->capture_default_str();
  cmd->add_option("--mixed-streams", o->mixed_load.streams, "--mixed: streams kept decoding")
      ->capture_default_str();
  cmd->add_option("--mixed-stream-output", o->mixed_load.stream_output,
                  "--mixed: tokens each stream request generates")
      ->capture_default_str();
  cmd->add_option("--mixed-long-prompt", o->mixed_load.long_prompt,
                  "--mixed: tokens of each long prompt")
      ->capture_default_str();
  cmd->add_option("--mixed-long-rate", o->mixed_load.long_rate,
                  "--mixed: long prompts per second (Poisson)")
      ->capture_default_str();
  cmd->add_option("--mixed-duration", o->mixed_load.duration_s,
                  "--mixed: seconds of arrivals per run")
      ->capture_default_str();
  cmd->add_option("--mixed-seed", o->mixed_load.seed, "--mixed: seed of arrivals and prompts")
      ->capture_default_str();
  add_structured_options(*cmd, o->structured);  // every request is constrained
  cmd->add_option("--cache-dir", o->cache_dir, "Cache root for registered models");
  add_engine_options(*cmd, o->engine);
  cmd->callback([o, &exit_code] { exit_code = run_bench_engine(*o); });
}

}  // namespace llms::cli
