// bench/metrics: what one request measured, what one run measured, and their summary.
//
// Definitions (all times in milliseconds on the client's monotonic clock):
// - start: the moment the client issues the request (before connecting, when a new connection is
//   needed; connection set-up therefore counts towards TTFT and E2E, as a user would see it).
// - TTFT: start -> arrival of the first chunk that carries content (see openai.h); absent for a
//   non-streamed request and for a request that produced no content.
// - ITL: every gap between arrivals of consecutive content chunks (a chunk holding several tokens
//   is one arrival, so servers that batch tokens into a chunk show one long gap, not several).
// - E2E: start -> end of the response (after [DONE] or the last byte).
// - TPOT: (E2E - TTFT) / (output_tokens - 1), for requests with TTFT and >= 2 output tokens.
// - Output tokens come from usage.completion_tokens; when the server reports no usage, the number
//   of content chunks stands in (usage_reported says which).
// Summaries cover only successful requests of the measured phase (never warm-up). Throughputs
// divide by the run's duration: from its first request's start to its last request's end.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/stats.h"

namespace llms::bench {

struct RequestRecord {
  uint64_t index = 0;       // order of issue within the run (warm-up requests count separately)
  size_t prompt_index = 0;  // which dataset prompt was sent
  bool warmup = false;
  double scheduled_ms = 0;  // intended start (open loop: the arrival time; closed loop: = start)
  double start_ms = 0;      // relative to the run's start
  bool new_connection = true;
  bool ok = false;
  int http_status = 0;     // 0 when no response status arrived
  std::string error_kind;  // "" when ok; else "http", "connect", "timeout", "stream", "protocol"
  std::string error;       // human-readable detail
  std::optional<double> ttft_ms;
  double e2e_ms = 0;
  std::vector<double> itl_ms;
  int64_t expected_input_tokens = -1;  // from the dataset, -1 unknown
  int64_t input_tokens = -1;           // usage.prompt_tokens
  int64_t output_tokens = 0;
  int64_t cached_tokens = -1;  // usage.prompt_tokens_details.cached_tokens
  bool usage_reported = false;
  int64_t n_content_chunks = 0;
  int64_t content_bytes = 0;

  std::optional<double> tpot_ms() const;
  // Key of the error in the summary's error table: "HTTP 429", "connect", "timeout", ...
  std::string error_key() const;
};

// The load shape of one run (one level of a sweep).
struct LevelSpec {
  size_t concurrency = 1;  // closed loop: streams kept busy; open loop: cap on in-flight (0: none)
  double rate = 0;         // requests/s; 0: closed loop
  double burstiness = 1;
};

struct RunResult {
  LevelSpec level;
  std::vector<RequestRecord> records;  // warm-up ones first, then measured ones in issue order
  double duration_s = 0;               // measured phase
  double client_cpu_s = 0;             // CPU time of the event-loop thread in the measured phase
  size_t max_in_flight = 0;
  uint64_t n_sse_events = 0;
};

// Service-level objectives for goodput; a request is "good" when it succeeded and meets every set
// bound. Without TTFT (non-streamed), E2E stands in for TTFT; without TPOT (one output token), the
// TPOT bound holds.
struct Slo {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  std::optional<double> e2e_ms;
  bool any() const { return ttft_ms || tpot_ms || e2e_ms; }
};

// "ttft=500,tpot=50,e2e=2000" (milliseconds; "ms" or "s" suffixes allowed). Throws llms::Error.
Slo parse_slo(const std::string& text);
std::string describe_slo(const Slo& slo);
bool meets_slo(const RequestRecord& r, const Slo& slo);

struct Summary {
  size_t n_requests = 0;  // measured requests
  size_t n_ok = 0;
  size_t n_failed = 0;
  std::map<std::string, size_t> errors;  // error_key -> count
  double duration_s = 0;
  double request_throughput = 0;       // successful requests / s
  double output_token_throughput = 0;  // output tokens / s
  double total_token_throughput = 0;   // (input + output) tokens / s
  int64_t total_input_tokens = 0;
  int64_t total_output_tokens = 0;
  int64_t total_cached_tokens = 0;
  size_t n_cached_reported = 0;  // requests whose usage carried cached_tokens
  size_t n_usage_missing = 0;    // successful requests without usage
  Dist ttft, tpot, itl, e2e, input_tokens, output_tokens;
  std::optional<size_t> n_good;  // with an SLO
  double goodput = 0;            // good requests / s
  double client_cpu_s = 0;
  double client_busy = 0;          // client CPU / duration
  double client_us_per_token = 0;  // client CPU per output token, microseconds
  size_t max_in_flight = 0;
};

Summary summarize_run(const RunResult& run, const Slo& slo);

}  // namespace llms::bench
