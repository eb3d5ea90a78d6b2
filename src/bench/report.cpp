// bench/report: table, JSON and progress rendering (see report.h).
#include "bench/report.h"

#include <fmt/core.h>

#include <cmath>

namespace llms::bench {

namespace {

using ojson = nlohmann::ordered_json;

// Milliseconds rounded to the microsecond (token counts stay whole) keep files small without
// hiding anything measurable.
ojson rounded(double v) {
  if (!std::isfinite(v)) return nullptr;
  return std::round(v * 1000.0) / 1000.0;
}

std::string num(double v, int decimals = 2) {
  if (!std::isfinite(v)) return "-";
  return fmt::format("{:.{}f}", v, decimals);
}

std::string dist_row(const char* name, const Dist& d, int decimals = 2) {
  return fmt::format("  {:<20}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}\n", name,
                     num(d.mean, decimals), num(d.median, decimals), num(d.p90, decimals),
                     num(d.p95, decimals), num(d.p99, decimals), num(d.max, decimals), d.n);
}

std::string errors_line(const Summary& s) {
  std::string out;
  for (const auto& [key, n] : s.errors) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} x{}", key, n);
  }
  return out;
}

}  // namespace

std::string describe_level(const LevelSpec& level) {
  if (level.rate > 0) {
    std::string s = std::isinf(level.rate) ? std::string("rate inf (all at once)")
                                           : fmt::format("rate {:g} req/s", level.rate);
    s += fmt::format(" (burstiness {:g}", level.burstiness);
    if (level.concurrency > 0) s += fmt::format(", at most {} in flight", level.concurrency);
    return s + ")";
  }
  return fmt::format("concurrency {}", level.concurrency);
}

std::string format_run_table(const BenchInfo& info, const RunResult& run, const Summary& s) {
  std::string out;
  out += fmt::format("==== llmserve bench: {} ====\n", describe_level(run.level));
  out += fmt::format("  {:<28}{}{}\n", "server", info.url, info.endpoint);
  out += fmt::format("  {:<28}{}\n", "model", info.model.empty() ? "(server default)" : info.model);
  out += fmt::format("  {:<28}{} ({} prompts; lengths: {})\n", "dataset", info.dataset_kind,
                     info.n_prompts, info.length_source);
  out += fmt::format("  {:<28}{} ok, {} failed, {} streamed\n", "requests", s.n_ok, s.n_failed,
                     info.stream ? "all" : "none");
  if (!s.errors.empty()) out += fmt::format("  {:<28}{}\n", "errors", errors_line(s));
  out += fmt::format("  {:<28}{} s\n", "duration", num(s.duration_s, 3));
  out += fmt::format("  {:<28}{} req/s\n", "request throughput", num(s.request_throughput));
  out += fmt::format("  {:<28}{} tok/s\n", "output token throughput",
                     num(s.output_token_throughput, 1));
  out +=
      fmt::format("  {:<28}{} tok/s\n", "total token throughput", num(s.total_token_throughput, 1));
  if (s.n_good) {
    out += fmt::format("  {:<28}{} req/s ({} of {} within {})\n", "goodput", num(s.goodput),
                       *s.n_good, s.n_ok + s.n_failed, describe_slo(info.slo));
  }
  out += fmt::format("  {:<28}{} total, {} mean per request\n", "input tokens",
                     s.total_input_tokens, num(s.input_tokens.mean, 1));
  out += fmt::format("  {:<28}{} total, {} mean per request{}\n", "output tokens",
                     s.total_output_tokens, num(s.output_tokens.mean, 1),
                     s.n_usage_missing > 0
                         ? fmt::format(" ({} without usage: counted chunks)", s.n_usage_missing)
                         : "");
  if (s.n_cached_reported > 0) {
    const double pct = s.total_input_tokens > 0
                           ? 100.0 * static_cast<double>(s.total_cached_tokens) /
                                 static_cast<double>(s.total_input_tokens)
                           : 0.0;
    out += fmt::format("  {:<28}{} ({}% of input)\n", "cached input tokens", s.total_cached_tokens,
                       num(pct, 1));
  } else {
    out += fmt::format("  {:<28}{}\n", "cached input tokens", "not reported by the server");
  }
  out += fmt::format("  {:<20}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}\n", "latency (ms)", "mean",
                     "median", "p90", "p95", "p99", "max", "n");
  out += dist_row("TTFT", s.ttft);
  out += dist_row("TPOT", s.tpot);
  out += dist_row("ITL", s.itl);
  out += dist_row("E2E", s.e2e);
  out += fmt::format("  {:<28}1 thread, {}% busy, {} us CPU per output token, peak {} streams\n",
                     "client", num(100.0 * s.client_busy, 1), num(s.client_us_per_token, 2),
                     s.max_in_flight);
  if (s.client_busy > 0.8 && s.duration_s >= 1.0) {
    out += "  warning: the client's event loop was busy most of the time; it may limit the load\n";
  }
  return out;
}

std::string format_sweep_table(const std::vector<RunResult>& runs,
                               const std::vector<Summary>& summaries, const Slo& slo) {
  std::string out = "==== sweep ====\n";
  out += fmt::format("  {:<34}{:>9}{:>11}{:>10}{:>10}{:>10}{:>10}{:>9}{:>8}\n", "level", "req/s",
                     "out tok/s", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99",
                     slo.any() ? "goodput" : "", "errors");
  for (size_t i = 0; i < runs.size() && i < summaries.size(); ++i) {
    const Summary& s = summaries[i];
    out += fmt::format("  {:<34}{:>9}{:>11}{:>10}{:>10}{:>10}{:>10}{:>9}{:>8}\n",
                       describe_level(runs[i].level), num(s.request_throughput),
                       num(s.output_token_throughput, 1), num(s.ttft.median, 1), num(s.ttft.p99, 1),
                       num(s.tpot.median, 1), num(s.tpot.p99, 1), slo.any() ? num(s.goodput) : "",
                       s.n_failed);
  }
  return out;
}

ojson dist_to_json(const Dist& d) {
  ojson j;
  j["n"] = d.n;
  j["mean"] = rounded(d.mean);
  j["stddev"] = rounded(d.stddev);
  j["min"] = rounded(d.min);
  j["median"] = rounded(d.median);
  j["p90"] = rounded(d.p90);
  j["p95"] = rounded(d.p95);
  j["p99"] = rounded(d.p99);
  j["max"] = rounded(d.max);
  return j;
}

ojson record_to_json(const RequestRecord& r) {
  ojson j;
  j["index"] = r.index;
  j["prompt_index"] = r.prompt_index;
  if (r.warmup) j["warmup"] = true;
  j["ok"] = r.ok;
  j["http_status"] = r.http_status;
  if (!r.ok) {
    j["error_kind"] = r.error_kind;
    j["error"] = r.error;
  }
  j["scheduled_ms"] = rounded(r.scheduled_ms);
  j["start_ms"] = rounded(r.start_ms);
  j["new_connection"] = r.new_connection;
  j["ttft_ms"] = r.ttft_ms ? rounded(*r.ttft_ms) : ojson(nullptr);
  auto tpot = r.tpot_ms();
  j["tpot_ms"] = tpot ? rounded(*tpot) : ojson(nullptr);
  j["e2e_ms"] = rounded(r.e2e_ms);
  ojson itl = ojson::array();
  for (double v : r.itl_ms) itl.push_back(rounded(v));
  j["itl_ms"] = std::move(itl);
  j["expected_input_tokens"] =
      r.expected_input_tokens >= 0 ? ojson(r.expected_input_tokens) : ojson(nullptr);
  j["input_tokens"] = r.input_tokens >= 0 ? ojson(r.input_tokens) : ojson(nullptr);
  j["output_tokens"] = r.output_tokens;
  j["cached_tokens"] = r.cached_tokens >= 0 ? ojson(r.cached_tokens) : ojson(nullptr);
  j["usage_reported"] = r.usage_reported;
  j["content_chunks"] = r.n_content_chunks;
  j["content_bytes"] = r.content_bytes;
  return j;
}

ojson summary_to_json(const Summary& s) {
  ojson j;
  j["n_requests"] = s.n_requests;
  j["n_ok"] = s.n_ok;
  j["n_failed"] = s.n_failed;
  ojson errors = ojson::object();
  for (const auto& [key, n] : s.errors) errors[key] = n;
  j["errors"] = std::move(errors);
  j["duration_s"] = s.duration_s;
  j["request_throughput"] = s.request_throughput;
  j["output_token_throughput"] = s.output_token_throughput;
  j["total_token_throughput"] = s.total_token_throughput;
  j["n_good"] = s.n_good ? ojson(*s.n_good) : ojson(nullptr);
  j["goodput"] = s.n_good ? ojson(s.goodput) : ojson(nullptr);
  j["total_input_tokens"] = s.total_input_tokens;
  j["total_output_tokens"] = s.total_output_tokens;
  j["total_cached_tokens"] =
      s.n_cached_reported > 0 ? ojson(s.total_cached_tokens) : ojson(nullptr);
  j["n_usage_missing"] = s.n_usage_missing;
  j["ttft_ms"] = dist_to_json(s.ttft);
  j["tpot_ms"] = dist_to_json(s.tpot);
  j["itl_ms"] = dist_to_json(s.itl);
  j["e2e_ms"] = dist_to_json(s.e2e);
  j["input_tokens"] = dist_to_json(s.input_tokens);
  j["output_tokens"] = dist_to_json(s.output_tokens);
  j["client"] = {{"threads", 1},
                 {"cpu_s", s.client_cpu_s},
                 {"busy_fraction", s.client_busy},
                 {"cpu_us_per_output_token", s.client_us_per_token},
                 {"max_in_flight", s.max_in_flight}};
  return j;
}

ojson bench_to_json(const BenchInfo& info, const std::vector<RunResult>& runs,
                    const std::vector<Summary>& summaries) {
  ojson j;
  j["format"] = "llmserve-bench/1";
  j["config"] = info.config;
  j["server"] = {{"url", info.url},
                 {"endpoint", info.endpoint},
                 {"model", info.model},
                 {"stream", info.stream}};
  j["dataset"] = {{"kind", info.dataset_kind},
                  {"n_prompts", info.n_prompts},
                  {"length_source", info.length_source},
                  {"token_exact", info.token_exact}};
  if (info.slo.any()) {
    ojson slo = ojson::object();
    if (info.slo.ttft_ms) slo["ttft_ms"] = *info.slo.ttft_ms;
    if (info.slo.tpot_ms) slo["tpot_ms"] = *info.slo.tpot_ms;
    if (info.slo.e2e_ms) slo["e2e_ms"] = *info.slo.e2e_ms;
    j["slo"] = std::move(slo);
  } else {
    j["slo"] = nullptr;
  }
  ojson out_runs = ojson::array();
  for (size_t i = 0; i < runs.size() && i < summaries.size(); ++i) {
    const RunResult& run = runs[i];
    ojson r;
    r["level"] = {{"concurrency", run.level.concurrency},
                  {"rate", run.level.rate > 0
                               ? (std::isinf(run.level.rate) ? ojson("inf") : ojson(run.level.rate))
                               : ojson(nullptr)},
                  {"burstiness", run.level.burstiness}};
    r["summary"] = summary_to_json(summaries[i]);
    r["sse_events"] = run.n_sse_events;
    ojson reqs = ojson::array();
    for (const auto& rec : run.records) reqs.push_back(record_to_json(rec));
    r["requests"] = std::move(reqs);
    out_runs.push_back(std::move(r));
  }
  j["runs"] = std::move(out_runs);
  return j;
}

std::string render_progress(const Progress& p, const std::string& label, int width) {
  double frac = 0;
  if (p.n_target > 0) frac = static_cast<double>(p.n_done) / static_cast<double>(p.n_target);
  if (p.duration_s > 0) {
    const double t = std::min(1.0, p.elapsed_s / p.duration_s);
    frac = p.n_target > 0 ? std::max(frac, t) : t;
  }
  if (p.finished) frac = 1;
  frac = std::clamp(frac, 0.0, 1.0);
  std::string counts =
      p.n_target > 0 ? fmt::format("{}/{}", p.n_done, p.n_target) : fmt::format("{}", p.n_done);
  std::string tail = fmt::format(" {} done, {} in flight, {} failed, {:.1f} s", counts,
                                 p.n_in_flight, p.n_failed, p.elapsed_s);
  std::string head = label + (p.warmup ? " warm-up " : " ");
  const int bar = std::max(10, width - static_cast<int>(head.size() + tail.size()) - 2);
  const int filled = static_cast<int>(std::lround(frac * bar));
  std::string line = head + "[" + std::string(static_cast<size_t>(filled), '#') +
                     std::string(static_cast<size_t>(bar - filled), '.') + "]" + tail;
  if (static_cast<int>(line.size()) > width && width > 0) line.resize(static_cast<size_t>(width));
  return line;
}

}  // namespace llms::bench
