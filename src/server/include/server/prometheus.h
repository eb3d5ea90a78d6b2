// server/prometheus: the engine's metrics in the Prometheus text exposition format (0.0.4), under
// vLLM's names where vLLM has the metric, labelled with model_name like vLLM's.
//
// Contract: each metric has one # HELP and one # TYPE line; histogram buckets are cumulative with
// le="+Inf" equal to _count; label values are escaped (backslash, quote, newline).
#pragma once

#include <cstdint>
#include <string>

#include "engine/async_engine.h"

namespace llms::server {

// Server-side numbers shown next to the engine's.
struct ServerCounters {
  int64_t http_requests_total = 0;
  int64_t http_errors_total = 0;  // responses with status >= 400
  int64_t open_connections = 0;
  int64_t aborted_by_client_total = 0;  // requests aborted because the client went away
  int64_t rejected_queue_full_total = 0;
  int64_t admitted = 0;  // engine requests submitted and not finished
};

std::string render_prometheus(const engine::EngineMetrics& m, const ServerCounters& server,
                              const std::string& model_name);

// "a\"b" -> a\"b escaped for a label value.
std::string escape_label_value(const std::string& value);

}  // namespace llms::server
