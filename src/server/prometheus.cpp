// server/prometheus: text exposition of the metrics (see prometheus.h).
#include "server/prometheus.h"

#include <fmt/core.h>

#include <cmath>
#include <vector>

namespace llms::server {

namespace {

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

class Writer {
 public:
  explicit Writer(std::string labels) : labels_(std::move(labels)) {}

  void header(const char* name, const char* type, const char* help) {
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void sample(const char* name, double value) {
    out_ += fmt::format("{}{{{}}} {}\n", name, labels_, number(value));
  }
  void scalar(const char* name, const char* type, const char* help, double value) {
    header(name, type, help);
    sample(name, value);
  }
  void histogram(const char* name, const char* help, const engine::Histogram& h) {
    header(name, "histogram", help);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds.size(); ++i) {
      cumulative += i < h.counts.size() ? h.counts[i] : 0;
      out_ += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels_, number(h.bounds[i]),
                          cumulative);
    }
    out_ += fmt::format("{}_bucket{{{},le=\"+Inf\"}} {}\n", name, labels_, h.count);
    out_ += fmt::format("{}_sum{{{}}} {}\n", name, labels_, number(h.sum));
    out_ += fmt::format("{}_count{{{}}} {}\n", name, labels_, h.count);
  }
  // One counter with an extra label per value: name{labels,label="i"} values[i].
  void labeled(const char* name, const char* type, const char* help, const char* label,
               const std::vector<int64_t>& values) {
    header(name, type, help);
    for (size_t i = 0; i < values.size(); ++i) {
      out_ += fmt::format("{}{{{},{}=\"{}\"}} {}\n", name, labels_, label, i, values[i]);
    }
  }
  // One gauge with an extra label per named value: name{labels,label="name"} value.
  void named(const char* name, const char* help, const char* label,
             const std::vector<std::pair<const char*, double>>& values) {
    header(name, "gauge", help);
    for (const auto& [key, value] : values) {
      out_ += fmt::format("{}{{{},{}=\"{}\"}} {}\n", name, labels_, label, key, number(value));
    }
  }
  std::string take() { return std::move(out_); }

 private:
  std::string labels_;
  std::string out_;
};

}  // namespace

std::string escape_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string render_prometheus(const engine::EngineMetrics& m, const ServerCounters& s,
                              const std::string& model_name) {
  Writer w(fmt::format("model_name=\"{}\"", escape_label_value(model_name)));
  w.scalar("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
           m.n_running);
  w.scalar("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
           m.n_waiting);
  w.scalar("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
           m.kv_usage);
  w.scalar("vllm:prefix_cache_queries", "counter",
           "Prefix cache queries, in terms of number of queried tokens.",
           static_cast<double>(m.prefix_queries));
  w.scalar("vllm:prefix_cache_hits", "counter",
           "Prefix cache hits, in terms of number of cached tokens.",
           static_cast<double>(m.prefix_hits));
  w.scalar("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
           static_cast<double>(m.prompt_tokens_total));
  w.scalar("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
           static_cast<double>(m.generation_tokens_total));
  w.scalar("vllm:num_preemptions_total", "counter", "Cumulative number of preemptions.",
           static_cast<double>(m.preemptions_total));
  w.scalar("vllm:request_success_total", "counter", "Count of finished requests.",
           static_cast<double>(m.requests_finished_total));
  w.histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
              m.time_to_first_token);
  w.histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
              m.inter_token_latency);
  w.histogram("vllm:e2e_request_latency_seconds",
              "Histogram of end-to-end request latency in seconds.", m.e2e_request_latency);
  w.histogram("vllm:request_queue_time_seconds",
              "Histogram of time spent in the waiting queue in seconds.", m.request_queue_time);
  if (m.spec_enabled) {
    w.scalar("vllm:spec_decode_num_drafts_total", "counter",
             "Number of spec decoding drafts (verifications of at least one draft token).",
             static_cast<double>(m.spec_num_drafts));
    w.scalar("vllm:spec_decode_num_draft_tokens_total", "counter", "Number of draft tokens.",
             static_cast<double>(m.spec_num_draft_tokens));
    w.scalar("vllm:spec_decode_num_accepted_tokens_total", "counter", "Number of accepted tokens.",
             static_cast<double>(m.spec_num_accepted_tokens));
    w.labeled("vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter",
              "Accepted tokens per draft position.", "position", m.spec_accepted_per_pos);
  }
  w.named("llmserve:step_time_estimate_seconds",
          "Step-time model: seconds per step, prompt token, decode sequence and attended "
          "position, as fitted to the steps so far.",
          "term",
          {{"step", m.step_time.step_s},
           {"prompt_token", m.step_time.prompt_token_s},
           {"decode_sequence", m.step_time.decode_sequence_s},
           {"attended_token", m.step_time.attended_token_s}});
  w.scalar("llmserve:step_time_relative_error", "gauge",
           "Step-time model: mean |predicted / measured - 1| over recent steps.",
           m.step_time.relative_error);
  w.scalar("llmserve:step_time_target_seconds", "gauge",
           "The time a step that carries decode work is sized for (0: no target).",
           m.step_time_target_s);
  w.scalar("llmserve:steps_target_unreachable_total", "counter",
           "Steps where even one prompt token beside the decode work was predicted to exceed "
           "the step-time target.",
           static_cast<double>(m.steps_target_unreachable));
  w.scalar("llmserve:requests_failed_total", "counter",
           "Requests ended by a fault inside the engine (the server went on).",
           static_cast<double>(m.requests_failed_total));
  w.scalar("llmserve:kv_cache_blocks_total", "gauge", "KV blocks in the pool.", m.kv_blocks_total);
  w.scalar("llmserve:kv_cache_blocks_free", "gauge",
           "KV blocks held by no sequence (cached prefixes included).", m.kv_blocks_free);
  w.scalar("llmserve:http_requests_total", "counter", "HTTP requests answered.",
           static_cast<double>(s.http_requests_total));
  w.scalar("llmserve:http_errors_total", "counter", "HTTP responses with status >= 400.",
           static_cast<double>(s.http_errors_total));
  w.scalar("llmserve:open_connections", "gauge", "Open client connections.",
           static_cast<double>(s.open_connections));
  w.scalar("llmserve:requests_aborted_by_client_total", "counter",
           "Requests aborted because the client disconnected.",
           static_cast<double>(s.aborted_by_client_total));
  w.scalar("llmserve:requests_rejected_queue_full_total", "counter",
           "Requests refused with 429 because the queue was full.",
           static_cast<double>(s.rejected_queue_full_total));
  w.scalar("llmserve:requests_admitted", "gauge",
           "Engine requests admitted (running or queued) and not finished.",
           static_cast<double>(s.admitted));
  return w.take();
}

}  // namespace llms::server
