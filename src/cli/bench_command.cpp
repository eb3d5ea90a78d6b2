// `llmserve bench`: load an OpenAI-compatible server (ours, vLLM, llama.cpp's) and report
// TTFT, TPOT, inter-token latency, end-to-end latency, throughput and goodput.
//
// The command only wires options to the bench library: build the dataset (token-exact through the
// server's /tokenize when it has one), serialize every request body up front, run each level of
// the sweep on one event-loop thread, then print tables and write --json / --plot. Exit status:
// 0 when some request succeeded, 1 when none did (the server is down or refuses everything).
#include "bench_command.h"

#include <fmt/core.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "bench/client.h"
#include "bench/dataset.h"
#include "bench/openai.h"
#include "bench/report.h"
#include "bench/server_info.h"
#include "bench/svg.h"
#include "util/error.h"

namespace llms::cli {

namespace {

using bench::Dataset;

struct BenchOptions {
  std::string url = "http://127.0.0.1:8000";
  std::string endpoint = "auto";
  std::string model;
  std::string api_key;
  std::string dataset = "random";
  int64_t input_len = 512;
  int64_t output_len = 128;
  double range_ratio = 0;
  size_t prefix_groups = 4;
  size_t prefix_questions = 8;
  int64_t prefix_len = 1024;
  int64_t question_len = 64;
  std::string jsonl;
  size_t num_prompts = 0;
  std::string tokenizer = "auto";
  size_t num_requests = 0;
  double duration = 0;
  size_t concurrency = 1;
  std::string rate;
  double burstiness = 1;
  size_t max_concurrency = 0;
  std::vector<size_t> sweep;
  size_t warmup = 0;
  bool no_stream = false;
  bool ignore_eos = false;
  double temperature = 0;
  bool has_temperature = false;
  std::string extra_body;
  double timeout = 300;
  uint64_t seed = 0;
  std::string slo;
  std::string json_path;
  std::string plot_dir;
  bool quiet = false;
  bool force_progress = false;
  bool concurrency_given = false;
  bool max_concurrency_given = false;
};

[[noreturn]] void bad_argument(const std::string& message) {
  throw Error(Error::Kind::kInvalidArgument, message);
}

double parse_rate(const std::string& text) {
  if (text == "inf" || text == "infinity") return INFINITY;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !(v > 0) || !std::isfinite(v)) {
    bad_argument("--rate: expected requests per second > 0 or 'inf', got '" + text + "'");
  }
  return v;
}

int terminal_width() {
  winsize ws{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20) return ws.ws_col;
  return 100;
}

// Builds the prompt set; says on stderr how lengths were obtained.
Dataset build_dataset(const BenchOptions& o, bench::SyncHttpClient& client,
                      const std::string& model, size_t n_prompts) {
  if (o.dataset == "jsonl") {
    if (o.jsonl.empty()) bad_argument("--dataset jsonl needs --jsonl FILE");
    return bench::load_jsonl_dataset(o.jsonl, o.output_len);
  }
  bench::ServerTokenizer tokenizer(client, model);
  bench::TokenCounter counter;
  std::string source = "word list, about one token per word (approximate; --tokenizer words)";
  if (o.tokenizer != "words") {
    std::string why;
    if (tokenizer.probe(&why)) {
      counter = tokenizer.counter();
      source = fmt::format("token-exact via the server's POST /tokenize ({} style)",
                           tokenizer.dialect());
    } else if (o.tokenizer == "server") {
      throw Error(Error::Kind::kUnsupported, "--tokenizer server: POST /tokenize failed: " + why);
    } else {
      source =
          "word list, about one token per word (approximate: POST /tokenize unavailable: " + why +
          ")";
    }
  }
  Dataset ds;
  if (o.dataset == "random") {
    bench::RandomSpec spec;
    spec.n_prompts = n_prompts;
    spec.input = {o.input_len, o.range_ratio};
    spec.output = {o.output_len, o.range_ratio};
    spec.seed = o.seed;
    ds = bench::make_random_dataset(spec, counter, source);
  } else if (o.dataset == "shared-prefix") {
    bench::SharedPrefixSpec spec;
    spec.n_groups = o.prefix_groups;
    spec.n_questions = o.prefix_questions;
    spec.prefix_tokens = o.prefix_len;
    spec.question_tokens = o.question_len;
    spec.output_tokens = o.output_len;
    spec.seed = o.seed;
    ds = bench::make_shared_prefix_dataset(spec, counter, source);
  } else {
    bad_argument("--dataset: expected random, shared-prefix or jsonl, got '" + o.dataset + "'");
  }
  if (counter && !o.quiet) {
    std::fprintf(stderr, "llmserve bench: built %zu prompts with %llu /tokenize calls\n",
                 ds.prompts.size(), static_cast<unsigned long long>(tokenizer.n_calls()));
  }
  return ds;
}

int run_bench(const BenchOptions& o) {
  const bench::Target target = bench::parse_base_url(o.url);
  if (o.num_requests == 0 && !(o.duration > 0)) bad_argument("give --num-requests or --duration");
  if (o.tokenizer != "auto" && o.tokenizer != "server" && o.tokenizer != "words") {
    bad_argument("--tokenizer: expected auto, server or words, got '" + o.tokenizer + "'");
  }
  bench::Slo slo;
  if (!o.slo.empty()) slo = bench::parse_slo(o.slo);
  const double rate = o.rate.empty() ? 0.0 : parse_rate(o.rate);
  nlohmann::json extra = nlohmann::json::object();
  if (!o.extra_body.empty()) {
    extra = nlohmann::json::parse(o.extra_body, nullptr, false);
    if (!extra.is_object()) bad_argument("--extra-body: expected a JSON object");
  }
  bench::raise_open_file_limit(65536);

  bench::SyncHttpClient client(target, o.api_key, std::min(o.timeout, 60.0));
  // GET /v1/models tells whether the server is there at all, and which model it serves.
  const bench::HttpResponse models = client.get("/v1/models");
  if (models.status == 0) {
    throw Error(Error::Kind::kIo, "cannot reach " + target.url() + ": " + models.error);
  }
  std::string model = o.model;
  if (model.empty()) {
    if (auto id = bench::first_model_id_of(models.body); id && models.status == 200) {
      model = *id;
    } else if (!o.quiet) {
      std::fprintf(stderr,
                   "llmserve bench: no --model and GET /v1/models names none (HTTP %d); "
                   "sending none\n",
                   models.status);
    }
  }

  // Levels of the sweep: concurrency (closed loop) or the in-flight cap (with --rate).
  std::vector<bench::LevelSpec> levels;
  // With --rate, -c given alone serves as the cap.
  size_t cap = 0;
  if (o.max_concurrency_given) {
    cap = o.max_concurrency;
  } else if (o.concurrency_given) {
    cap = o.concurrency;
  }
  const std::vector<size_t> values =
      o.sweep.empty() ? std::vector<size_t>{rate > 0 ? cap : o.concurrency} : o.sweep;
  for (size_t v : values) {
    if (rate == 0 && v == 0) bad_argument("concurrency must be >= 1");
    levels.push_back({v, rate, o.burstiness});
  }

  // Enough distinct prompts that no level repeats one (repeats would hit a prefix cache).
  size_t n_prompts = o.num_prompts;
  if (n_prompts == 0) {
    n_prompts = o.dataset == "shared-prefix"
                    ? o.prefix_groups * o.prefix_questions
                    : (o.num_requests > 0 ? levels.size() * (o.num_requests + o.warmup) : 1024);
  }
  Dataset ds = build_dataset(o, client, model, n_prompts);

  bench::RequestOptions ro;
  const bool any_chat = std::any_of(ds.prompts.begin(), ds.prompts.end(),
                                    [](const bench::Prompt& p) { return p.is_chat(); });
  if (o.endpoint == "chat" || (o.endpoint == "auto" && any_chat)) {
    ro.api = bench::Api::kChat;
  } else if (o.endpoint == "completions" || o.endpoint == "auto") {
    ro.api = bench::Api::kCompletions;
  } else {
    bad_argument("--endpoint: expected completions, chat or auto, got '" + o.endpoint + "'");
  }
  ro.model = model;
  ro.stream = !o.no_stream;
  ro.ignore_eos = o.ignore_eos;
  if (o.has_temperature) ro.temperature = o.temperature;
  ro.extra_body = extra;
  std::vector<bench::PreparedRequest> requests;
  requests.reserve(ds.prompts.size());
  for (const auto& p : ds.prompts) {
    requests.push_back({bench::build_request_body(ro, p), p.input_tokens});
  }

  bench::BenchInfo info;
  info.url = target.url();
  info.endpoint = bench::api_path(ro.api);
  info.model = model;
  info.stream = ro.stream;
  info.dataset_kind = ds.kind;
  info.length_source = ds.length_source;
  info.token_exact = ds.token_exact;
  info.n_prompts = ds.prompts.size();
  info.slo = slo;
  info.config = {{"url", o.url},
                 {"dataset", o.dataset},
                 {"input_len", o.input_len},
                 {"output_len", o.output_len},
                 {"range_ratio", o.range_ratio},
                 {"num_requests", o.num_requests},
                 {"duration_s", o.duration},
                 {"warmup", o.warmup},
                 {"rate", o.rate.empty() ? "" : o.rate},
                 {"burstiness", o.burstiness},
                 {"seed", o.seed},
                 {"timeout_s", o.timeout},
                 {"ignore_eos", o.ignore_eos},
                 {"slo", o.slo}};
  if (o.dataset == "shared-prefix") {
    info.config["prefix_groups"] = o.prefix_groups;
    info.config["prefix_questions"] = o.prefix_questions;
    info.config["prefix_len"] = o.prefix_len;
    info.config["question_len"] = o.question_len;
  }
  if (!o.quiet) {
    std::fprintf(stderr, "llmserve bench: %s%s, model %s, %s dataset of %zu prompts (%s)\n",
                 info.url.c_str(), info.endpoint.c_str(), model.empty() ? "-" : model.c_str(),
                 ds.kind.c_str(), ds.prompts.size(), ds.length_source.c_str());
  }

  const bool show_progress = !o.quiet && (o.force_progress || ::isatty(STDERR_FILENO));
  const int width = terminal_width();
  std::vector<bench::RunResult> runs;
  std::vector<bench::Summary> summaries;
  size_t first_prompt = 0;
  size_t n_ok_total = 0;
  for (const auto& level : levels) {
    bench::LoadConfig lc;
    lc.target = target;
    lc.path = info.endpoint;
    lc.api_key = o.api_key;
    lc.level = level;
    lc.n_requests = o.num_requests;
    lc.duration_s = o.duration;
    lc.n_warmup = o.warmup;
    lc.first_prompt = first_prompt;
    lc.timeout_s = o.timeout;
    lc.seed = o.seed;
    const std::string label = bench::describe_level(level);
    if (show_progress) {
      lc.on_progress = [&](const bench::Progress& p) {
        std::fprintf(stderr, "\r%s\x1b[K%s", bench::render_progress(p, label, width - 1).c_str(),
                     p.finished ? "\n" : "");
        std::fflush(stderr);
      };
    }
    bench::RunResult run = bench::run_load(lc, requests);
    first_prompt += run.records.size();
    bench::Summary s = bench::summarize_run(run, slo);
    n_ok_total += s.n_ok;
    std::fputs(bench::format_run_table(info, run, s).c_str(), stdout);
    std::fflush(stdout);
    runs.push_back(std::move(run));
    summaries.push_back(std::move(s));
  }
  if (runs.size() > 1) std::fputs(bench::format_sweep_table(runs, summaries, slo).c_str(), stdout);

  if (!o.json_path.empty()) {
    std::ofstream out(o.json_path, std::ios::binary | std::ios::trunc);
    // Error texts quote server bytes, which need not be valid UTF-8: replace, never throw.
    out << bench::bench_to_json(info, runs, summaries)
               .dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
        << "\n";
    out.close();
    if (!out) throw Error(Error::Kind::kIo, o.json_path + ": cannot write the JSON report");
    if (!o.quiet) std::fprintf(stderr, "llmserve bench: wrote %s\n", o.json_path.c_str());
  }
  if (!o.plot_dir.empty()) {
    auto files = bench::write_plots(o.plot_dir, runs, summaries);
    if (!o.quiet) {
      std::fprintf(stderr, "llmserve bench: wrote %zu charts to %s\n", files.size(),
                   o.plot_dir.c_str());
    }
  }
  return n_ok_total > 0 ? 0 : 1;
}

// The largest prompt or output length, prompt count or group size the client accepts: a mistyped
// value (2e9 tokens) would otherwise build prompts until memory runs out instead of refusing.
constexpr int64_t kMaxBenchCount = int64_t{1} << 20;

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<BenchOptions>();
  if (const char* key = std::getenv("OPENAI_API_KEY")) o->api_key = key;
  auto* cmd = app.add_subcommand(
      "bench", "Benchmark an OpenAI-compatible server: TTFT, TPOT, ITL, E2E, throughput, goodput");
  cmd->add_option("--url,--base-url", o->url, "Server base URL (http only)")->capture_default_str();
  cmd->add_option("--endpoint", o->endpoint,
                  "completions, chat, or auto (chat when the dataset has messages)")
      ->capture_default_str();
  cmd->add_option("--model", o->model, "Model name to send (default: first of GET /v1/models)");
  cmd->add_option("--api-key", o->api_key, "Bearer token (default: $OPENAI_API_KEY)");

  cmd->add_option("--dataset", o->dataset, "random, shared-prefix or jsonl")->capture_default_str();
  cmd->add_option("--input-len", o->input_len, "random: mean prompt length in tokens")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, kMaxBenchCount));
  cmd->add_option("--output-len", o->output_len,
                  "Tokens to ask for (max_tokens); jsonl: default when a line names none")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, kMaxBenchCount));
  cmd->add_option("--range-ratio", o->range_ratio,
                  "random: lengths uniform in [len*(1-r), len*(1+r)]")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.999));
  cmd->add_option("--prefix-groups", o->prefix_groups, "shared-prefix: number of prefixes")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, kMaxBenchCount));
  cmd->add_option("--prefix-questions", o->prefix_questions, "shared-prefix: questions per prefix")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, kMaxBenchCount));
  cmd->add_option("--prefix-len", o->prefix_len, "shared-prefix: prefix tokens")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, kMaxBenchCount));
  cmd->add_option("--question-len", o->question_len, "shared-prefix: question tokens")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, kMaxBenchCount));
  cmd->add_option("--jsonl", o->jsonl, "jsonl: file of {\"prompt\"} or {\"messages\"} lines");
  cmd->add_option("--num-prompts", o->num_prompts,
                  "Distinct prompts to build (default: one per request of every level)")
      ->check(CLI::Range(int64_t{1}, kMaxBenchCount));
  cmd->add_option("--tokenizer", o->tokenizer,
                  "Prompt lengths: auto (/tokenize if served, else word list), server, words")
      ->capture_default_str();

  cmd->add_option("-n,--num-requests", o->num_requests, "Requests per level");
  cmd->add_option("--duration", o->duration, "Seconds per level (stop issuing after it)")
      ->check(CLI::PositiveNumber);
  auto* conc = cmd->add_option("-c,--concurrency", o->concurrency,
                               "Streams kept busy (closed loop); with --rate, the in-flight cap "
                               "unless --max-concurrency is given");
  conc->capture_default_str();
  cmd->add_option("--rate", o->rate, "Open loop: requests per second, or 'inf'");
  cmd->add_option("--burstiness", o->burstiness,
                  "Gamma shape of arrivals: 1 Poisson, <1 burstier, >1 smoother")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  auto* max_conc = cmd->add_option("--max-concurrency", o->max_concurrency,
                                   "With --rate: cap on requests in flight (0: none)");
  max_conc->capture_default_str();
  cmd->add_option("--sweep", o->sweep,
                  "Levels run one after another: concurrencies (or caps with --rate), "
                  "e.g. 1,4,16,32,64")
      ->delimiter(',');
  cmd->add_option("--warmup", o->warmup, "Requests sent before each level, not measured")
      ->capture_default_str();
  cmd->add_flag("--no-stream", o->no_stream, "Ask for whole responses (no TTFT, no ITL)");
  cmd->add_flag("--ignore-eos", o->ignore_eos,
                "Send ignore_eos (vLLM, llama.cpp) so every request yields --output-len tokens");
  auto* temp = cmd->add_option("--temperature", o->temperature, "Sampling temperature to send");
  cmd->add_option("--extra-body", o->extra_body, "JSON object merged into every request body");
  cmd->add_option("--timeout", o->timeout, "Fail a request after this many silent seconds")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1e6));
  cmd->add_option("--seed", o->seed, "Seed of the dataset and the arrivals")->capture_default_str();

  cmd->add_option("--slo", o->slo, "Goodput bounds in ms, e.g. ttft=500,tpot=50 (also e2e=)");
  cmd->add_option("--json", o->json_path, "Write every per-request record and the summaries");
  cmd->add_option("--plot", o->plot_dir, "Write SVG charts (latency CDFs; sweep curves) here");
  cmd->add_flag("-q,--quiet", o->quiet, "Only the result tables");
  cmd->add_flag("--progress", o->force_progress, "Progress bar even when stderr is no terminal");
  cmd->callback([o, temp, conc, max_conc, &exit_code] {
    o->has_temperature = temp->count() > 0;
    o->concurrency_given = conc->count() > 0;
    o->max_concurrency_given = max_conc->count() > 0;
    exit_code = run_bench(*o);
  });
}

}  // namespace llms::cli
