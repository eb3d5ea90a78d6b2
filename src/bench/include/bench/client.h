// bench/client: HTTP to the server under test. Everything that touches Boost.Beast lives in
// client.cpp, behind these Boost-free declarations (Beast is slow to compile).
//
// run_load drives one run on ONE event-loop thread (the caller's): every request is an
// asynchronous exchange on its own connection, connections are kept alive and reused, and the
// loop does nothing but I/O, SSE parsing and time stamps, so it holds thousands of concurrent
// streams and its own CPU time per token is reported. Plain HTTP only (no TLS).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/metrics.h"

namespace llms::bench {

struct Target {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;
  std::string base_path;  // prefix before /v1/..., without a trailing '/'
  std::string url() const;
};

// "http://host[:port][/prefix]" (scheme optional, port 80 by default). "https" is refused.
Target parse_base_url(const std::string& url);

struct HttpResponse {
  int status = 0;  // 0: no response (see error)
  std::string body;
  std::string error;  // transport failure ("connect: Connection refused", "timeout", ...)
};

// Blocking requests over one kept-alive connection, for set-up work (model list, /tokenize).
class SyncHttpClient {
 public:
  SyncHttpClient(Target target, std::string api_key, double timeout_s);
  ~SyncHttpClient();
  SyncHttpClient(const SyncHttpClient&) = delete;
  SyncHttpClient& operator=(const SyncHttpClient&) = delete;

  HttpResponse get(const std::string& path);
  HttpResponse post_json(const std::string& path, const std::string& body);
  const Target& target() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One request of the workload: the serialized body and what the dataset knew about it.
struct PreparedRequest {
  std::string body;
  int64_t expected_input_tokens = -1;
};

struct Progress {
  bool warmup = false;
  size_t n_done = 0;
  size_t n_failed = 0;
  size_t n_in_flight = 0;
  size_t n_target = 0;  // 0: bounded by duration only
  double elapsed_s = 0;
  double duration_s = 0;  // 0: bounded by count only
  bool finished = false;
};

struct LoadConfig {
  Target target;
  std::string path = "/v1/completions";  // appended to target.base_path
  std::string api_key;                   // sent as "Authorization: Bearer ..."
  LevelSpec level;
  size_t n_requests = 0;    // 0: no count limit
  double duration_s = 0;    // 0: no time limit; at least one limit is required
  size_t n_warmup = 0;      // requests sent (closed loop) before the measured phase, not summarized
  size_t first_prompt = 0;  // index of the first prompt to send (requests cycle through them)
  double timeout_s = 300;   // a request fails when the server stays silent this long
  uint64_t seed = 0;        // arrival process
  std::function<void(const Progress&)> on_progress;
  double progress_interval_s = 0.2;
};

// Runs warm-up then the measured phase and returns every record. Throws llms::Error for a bad
// configuration or an unresolvable host; request failures are records, not exceptions.
RunResult run_load(const LoadConfig& config, const std::vector<PreparedRequest>& requests);

// Raises the soft limit on open files towards `wanted` (capped by the hard limit); returns the
// soft limit now in force. Each stream needs one descriptor.
uint64_t raise_open_file_limit(uint64_t wanted);

}  // namespace llms::bench
