// bench/report: the human table on stdout, the --json document and the stderr progress bar.
//
// The JSON document (format "llmserve-bench/1"):
//   {"format", "config": {...as given...}, "dataset": {kind, n_prompts, length_source,
//   token_exact},
//    "slo": {...} | null,
//    "runs": [{"level": {concurrency, rate, burstiness}, "summary": {...}, "requests": [...]}]}
// Times are milliseconds rounded to the microsecond; statistics of empty samples are null.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/client.h"
#include "bench/dataset.h"
#include "bench/metrics.h"

namespace llms::bench {

struct BenchInfo {
  std::string url;
  std::string endpoint;
  std::string model;
  bool stream = true;
  std::string dataset_kind;
  std::string length_source;
  bool token_exact = false;
  size_t n_prompts = 0;
  Slo slo;
  nlohmann::ordered_json config = nlohmann::ordered_json::object();  // echoed into --json
};

// One level: a description line, counts, throughputs, then TTFT/TPOT/ITL/E2E percentiles.
std::string format_run_table(const BenchInfo& info, const RunResult& run, const Summary& s);

// One line per level of a sweep.
std::string format_sweep_table(const std::vector<RunResult>& runs,
                               const std::vector<Summary>& summaries, const Slo& slo);

// "concurrency 16" / "rate 8 req/s (burstiness 0.5, at most 64 in flight)".
std::string describe_level(const LevelSpec& level);

nlohmann::ordered_json dist_to_json(const Dist& d);
nlohmann::ordered_json record_to_json(const RequestRecord& r);
nlohmann::ordered_json summary_to_json(const Summary& s);
nlohmann::ordered_json bench_to_json(const BenchInfo& info, const std::vector<RunResult>& runs,
                                     const std::vector<Summary>& summaries);

// One line (no newline) of `width` columns at most: bar, counts, elapsed time.
std::string render_progress(const Progress& p, const std::string& label, int width);

}  // namespace llms::bench
