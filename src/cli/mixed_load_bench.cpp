// cli/mixed_load_bench: the mixed-load scenario of `bench-engine` (see mixed_load_bench.h).
#include "mixed_load_bench.h"

#include <fmt/core.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <thread>

#include "bench/arrivals.h"
#include "bench/stats.h"
#include "engine_options.h"
#include "util/error.h"

namespace llms::cli {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double now_s() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

std::vector<int32_t> random_prompt(std::mt19937_64& rng, int32_t n, int32_t n_vocab) {
  // Ordinary tokens of the vocabulary's first part (avoids control tokens at the end).
  std::uniform_int_distribution<int32_t> d(100, std::max(101, std::min(n_vocab, 100000) - 1));
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& t : ids) t = d(rng);
  return ids;
}

engine::GenerationRequest greedy_request(std::vector<int32_t> prompt, int32_t max_tokens) {
  engine::GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0.0f;
  return r;
}

// Milliseconds: null where a sample is empty (NaN).
json ms(double seconds) { return std::isnan(seconds) ? json(nullptr) : json(seconds * 1e3); }

json latency_ms(std::vector<double> seconds) {
  const bench::Dist d = bench::summarize(std::move(seconds));
  return {{"n", d.n},         {"mean", ms(d.mean)}, {"p50", ms(d.median)},
          {"p90", ms(d.p90)}, {"p99", ms(d.p99)},   {"max", ms(d.max)}};
}

struct RunSpec {
  std::string name;
  std::string max_itl_ms;  // as --max-itl-ms takes it; empty: the configuration's own
  bool streams = true;
};

json run_one(const gguf::GgufFile& file, const tokenizer::Tokenizer& tok,
             engine::EngineConfig config, const MixedLoadOptions& o, const RunSpec& spec,
             const std::vector<double>& arrivals) {
  if (!spec.max_itl_ms.empty()) config.scheduler.max_step_seconds = parse_max_itl(spec.max_itl_ms);
  engine::Engine eng(file, tok, config);
  std::mt19937_64 rng(o.seed);
  const int32_t n_vocab = eng.n_vocab();

  std::vector<double> stream_itl;
  std::vector<double> stream_ttft;
  std::vector<double> long_ttft;
  int64_t tokens_done = 0;  // prompt + generated tokens of finished requests
  int64_t stream_requests = 0;
  struct Slot {
    bool busy = false;
    double last_token = -1.0;
  };
  std::vector<Slot> slots(static_cast<size_t>(spec.streams ? o.streams : 0));

  const double t0 = now_s();
  const auto add_stream = [&](size_t i) {
    Slot& slot = slots[i];
    slot.busy = true;
    slot.last_token = -1.0;
    ++stream_requests;
    eng.add_request(greedy_request(random_prompt(rng, o.stream_prompt, n_vocab), o.stream_output),
                    [&, i](const engine::RequestOutput& out) {
                      Slot& s = slots[i];
                      if (!out.tokens.empty()) {
                        const double t = now_s();
                        if (s.last_token >= 0.0) stream_itl.push_back(t - s.last_token);
                        s.last_token = t;
                      }
                      if (out.request_finished) {
                        stream_ttft.push_back(out.metrics.time_to_first_token);
                        tokens_done += out.metrics.n_prompt_tokens + out.metrics.n_generated_tokens;
                        s.busy = false;
                      }
                    });
  };
  size_t next_long = 0;
  int64_t steps = 0;
  for (;;) {
    const double now = now_s() - t0;
    while (next_long < arrivals.size() && arrivals[next_long] <= now) {
      eng.add_request(greedy_request(random_prompt(rng, o.long_prompt, n_vocab), o.long_output),
                      [&](const engine::RequestOutput& out) {
                        if (!out.request_finished) return;
                        long_ttft.push_back(out.metrics.time_to_first_token);
                        tokens_done += out.metrics.n_prompt_tokens + out.metrics.n_generated_tokens;
                      });
      ++next_long;
    }
    if (now < o.duration_s) {
      for (size_t i = 0; i < slots.size(); ++i) {
        if (!slots[i].busy) add_stream(i);
      }
    }
    if (eng.has_unfinished()) {
      eng.step();
      ++steps;
      continue;
    }
    if (next_long >= arrivals.size() && (now >= o.duration_s || slots.empty())) break;
    // Idle until the next arrival (only without streams, or between their last and the window's
    // end).
    const double until = next_long < arrivals.size() ? arrivals[next_long] : o.duration_s;
    std::this_thread::sleep_for(std::chrono::duration<double>(std::max(0.0, until - now)));
  }
  const double wall = now_s() - t0;
  const engine::EngineStats st = eng.stats();
  json j;
  j["name"] = spec.name;
  j["max_itl_ms"] = spec.max_itl_ms.empty() ? json(nullptr) : json(spec.max_itl_ms);
  if (spec.streams) {
    j["streams"] = {{"requests", stream_requests},
                    {"itl_ms", latency_ms(stream_itl)},
                    {"ttft_ms", latency_ms(stream_ttft)}};
  }
  const bench::Dist lt = bench::summarize(long_ttft);
  j["long_prompts"] = {{"requests", lt.n}, {"ttft_ms", latency_ms(long_ttft)}};
  j["wall_s"] = wall;
  j["tokens"] = tokens_done;
  j["tokens_per_s"] = wall > 0.0 ? static_cast<double>(tokens_done) / wall : 0.0;
  j["steps"] = steps;
  j["steps_target_unreachable"] = st.steps_target_unreachable;
  j["step_time_target_ms_at_end"] = st.step_time_target_s * 1e3;
  j["step_time_model"] = {{"step_ms", st.step_time.step_s * 1e3},
                          {"prompt_token_ms", st.step_time.prompt_token_s * 1e3},
                          {"decode_sequence_ms", st.step_time.decode_sequence_s * 1e3},
                          {"attended_token_us", st.step_time.attended_token_s * 1e6},
                          {"relative_error", st.step_time.relative_error},
                          {"steps_observed", st.step_time.n_steps}};
  return j;
}

double number_at(const json& j, const char* a, const char* b, const char* c) {
  const json& v = j.at(a).at(b).at(c);
  return v.is_number() ? v.get<double>() : std::nan("");
}

json ratio(double num, double den) {
  return std::isfinite(num) && std::isfinite(den) && den > 0.0 ? json(num / den) : json(nullptr);
}

}  // namespace

json run_mixed_load(const gguf::GgufFile& file, const tokenizer::Tokenizer& tok,
                    const engine::EngineConfig& config, const MixedLoadOptions& o) {
  if (o.streams < 0 || o.stream_prompt < 1 || o.stream_output < 1 || o.long_prompt < 1 ||
      o.long_output < 1 || !(o.long_rate > 0.0) || !(o.duration_s > 0.0)) {
    throw Error(Error::Kind::kInvalidArgument,
                "--mixed: stream and long-prompt lengths must be >= 1, the rate and the duration "
                "> 0");
  }
  for (const std::string& t : o.itl_targets) parse_max_itl(t);  // refuse a bad one up front
  std::vector<double> arrivals;
  bench::ArrivalProcess process(o.long_rate, 1.0, o.seed);
  for (double t = process.next_gap_s(); t < o.duration_s; t += process.next_gap_s()) {
    arrivals.push_back(t);
  }
  json report;
  report["load"] = {{"streams", o.streams},
                    {"stream_prompt_tokens", o.stream_prompt},
                    {"stream_output_tokens", o.stream_output},
                    {"long_rate_per_s", o.long_rate},
                    {"long_prompt_tokens", o.long_prompt},
                    {"long_output_tokens", o.long_output},
                    {"duration_s", o.duration_s},
                    {"seed", o.seed},
                    {"long_arrivals", arrivals.size()}};
  fmt::print(stderr, "mixed load: long prompts alone ...\n");
  const json alone = run_one(file, tok, config, o, RunSpec{"long_only", "", false}, arrivals);
  json runs = json::array();
  for (const std::string& t : o.itl_targets) {
    fmt::print(stderr, "mixed load: --max-itl-ms {} ...\n", t);
    runs.push_back(run_one(file, tok, config, o, RunSpec{"mixed", t, true}, arrivals));
  }
  const double alone_mean = number_at(alone, "long_prompts", "ttft_ms", "mean");
  const double alone_p50 = number_at(alone, "long_prompts", "ttft_ms", "p50");
  const double first_tps = runs.empty() ? 0.0 : runs[0]["tokens_per_s"].get<double>();
  for (json& r : runs) {
    const double p50 = number_at(r, "streams", "itl_ms", "p50");
    r["ratios"] = {{"itl_p99_over_p50", ratio(number_at(r, "streams", "itl_ms", "p99"), p50)},
                   {"itl_max_over_p50", ratio(number_at(r, "streams", "itl_ms", "max"), p50)},
                   {"long_ttft_mean_over_long_only",
                    ratio(number_at(r, "long_prompts", "ttft_ms", "mean"), alone_mean)},
                   {"long_ttft_p50_over_long_only",
                    ratio(number_at(r, "long_prompts", "ttft_ms", "p50"), alone_p50)},
                   {"tokens_per_s_over_first", ratio(r["tokens_per_s"].get<double>(), first_tps)}};
  }
  report["long_only"] = alone;
  report["mixed"] = runs;
  return report;
}

}  // namespace llms::cli
