// bench/metrics: per-request derived values, SLO parsing and run summaries (see metrics.h).
#include "bench/metrics.h"

#include <cmath>
#include <cstdlib>

#include "util/error.h"

namespace llms::bench {

std::optional<double> RequestRecord::tpot_ms() const {
  if (!ttft_ms || output_tokens < 2) return std::nullopt;
  return (e2e_ms - *ttft_ms) / static_cast<double>(output_tokens - 1);
}

std::string RequestRecord::error_key() const {
  if (ok) return "";
  if (error_kind == "http") return "HTTP " + std::to_string(http_status);
  return error_kind.empty() ? "unknown" : error_kind;
}

Slo parse_slo(const std::string& text) {
  Slo slo;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) {
      if (end == text.size()) break;
      continue;
    }
    const size_t eq = item.find('=');
    auto bad = [&](const std::string& why) {
      throw Error(Error::Kind::kInvalidArgument, "--slo: '" + item + "': " + why);
    };
    if (eq == std::string::npos) bad("expected NAME=MILLISECONDS");
    const std::string name = item.substr(0, eq);
    std::string value = item.substr(eq + 1);
    double scale = 1;
    if (value.size() > 2 && value.compare(value.size() - 2, 2, "ms") == 0) {
      value.resize(value.size() - 2);
    } else if (value.size() > 1 && value.back() == 's') {
      value.pop_back();
      scale = 1000;
    }
    char* stop = nullptr;
    const double v = std::strtod(value.c_str(), &stop);
    if (value.empty() || stop != value.c_str() + value.size() || !(v > 0) || !std::isfinite(v)) {
      bad("the bound must be a positive number of milliseconds");
    }
    if (name == "ttft") {
      slo.ttft_ms = v * scale;
    } else if (name == "tpot") {
      slo.tpot_ms = v * scale;
    } else if (name == "e2e") {
      slo.e2e_ms = v * scale;
    } else {
      bad("unknown metric (use ttft, tpot or e2e)");
    }
    if (end == text.size()) break;
  }
  if (!slo.any()) throw Error(Error::Kind::kInvalidArgument, "--slo: no bound given");
  return slo;
}

std::string describe_slo(const Slo& slo) {
  std::string s;
  auto add = [&](const char* name, const std::optional<double>& v) {
    if (!v) return;
    if (!s.empty()) s += ", ";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s <= %g ms", name, *v);
    s += buf;
  };
  add("TTFT", slo.ttft_ms);
  add("TPOT", slo.tpot_ms);
  add("E2E", slo.e2e_ms);
  return s;
}

bool meets_slo(const RequestRecord& r, const Slo& slo) {
  if (!r.ok) return false;
  if (slo.ttft_ms && r.ttft_ms.value_or(r.e2e_ms) > *slo.ttft_ms) return false;
  if (slo.tpot_ms) {
    if (auto t = r.tpot_ms(); t && *t > *slo.tpot_ms) return false;
  }
  if (slo.e2e_ms && r.e2e_ms > *slo.e2e_ms) return false;
  return true;
}

Summary summarize_run(const RunResult& run, const Slo& slo) {
  Summary s;
  s.duration_s = run.duration_s;
  s.client_cpu_s = run.client_cpu_s;
  s.max_in_flight = run.max_in_flight;
  std::vector<double> ttft, tpot, itl, e2e, in_tokens, out_tokens;
  size_t n_good = 0;
  for (const auto& r : run.records) {
    if (r.warmup) continue;
    ++s.n_requests;
    if (!r.ok) {
      ++s.n_failed;
      ++s.errors[r.error_key()];
      continue;
    }
    ++s.n_ok;
    if (r.ttft_ms) ttft.push_back(*r.ttft_ms);
    if (auto t = r.tpot_ms()) tpot.push_back(*t);
    itl.insert(itl.end(), r.itl_ms.begin(), r.itl_ms.end());
    e2e.push_back(r.e2e_ms);
    const int64_t n_in = r.input_tokens >= 0 ? r.input_tokens : r.expected_input_tokens;
    if (n_in >= 0) {
      in_tokens.push_back(static_cast<double>(n_in));
      s.total_input_tokens += n_in;
    }
    out_tokens.push_back(static_cast<double>(r.output_tokens));
    s.total_output_tokens += r.output_tokens;
    if (r.cached_tokens >= 0) {
      s.total_cached_tokens += r.cached_tokens;
      ++s.n_cached_reported;
    }
    if (!r.usage_reported) ++s.n_usage_missing;
    if (slo.any() && meets_slo(r, slo)) ++n_good;
  }
  s.ttft = summarize(std::move(ttft));
  s.tpot = summarize(std::move(tpot));
  s.itl = summarize(std::move(itl));
  s.e2e = summarize(std::move(e2e));
  s.input_tokens = summarize(std::move(in_tokens));
  s.output_tokens = summarize(std::move(out_tokens));
  if (slo.any()) s.n_good = n_good;
  if (s.duration_s > 0) {
    s.request_throughput = static_cast<double>(s.n_ok) / s.duration_s;
    s.output_token_throughput = static_cast<double>(s.total_output_tokens) / s.duration_s;
    s.total_token_throughput =
        static_cast<double>(s.total_input_tokens + s.total_output_tokens) / s.duration_s;
    s.goodput = static_cast<double>(n_good) / s.duration_s;
    s.client_busy = s.client_cpu_s / s.duration_s;
  }
  if (s.total_output_tokens > 0) {
    s.client_us_per_token = s.client_cpu_s * 1e6 / static_cast<double>(s.total_output_tokens);
  }
  return s;
}

}  // namespace llms::bench
