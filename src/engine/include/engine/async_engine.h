// engine/async_engine: the Engine on its own thread, fed through one queue.
//
// Any thread may submit() and abort(); the engine thread drains the queue between steps, so a
// request waits at most one step to be admitted and an abort frees its KV blocks within one
// step. Outputs are delivered by calling the request's callback ON THE ENGINE THREAD: a
// callback must be quick and must not call back into the engine (post the event to your own
// executor instead).
//
// validate() runs on the caller's thread and reads only what never changes after start-up
// (vocabulary, context length, pool size), so a bad request is refused before it is queued;
// submit() of a validated request cannot fail except after shutdown began.
//
// Metrics: counters and histograms (seconds) kept on the engine thread and copied out under a
// lock by metrics(); the names follow vLLM's Prometheus metrics.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"
#include "engine/request.h"

namespace llms::engine {

// A Prometheus-style cumulative histogram.
struct Histogram {
  std::vector<double> bounds;    // upper bounds, ascending (+Inf implied)
  std::vector<uint64_t> counts;  // per bucket, not cumulative; size bounds.size() + 1
  double sum = 0.0;
  uint64_t count = 0;

  explicit Histogram(std::vector<double> upper_bounds = {});
  void observe(double value);
};

struct EngineMetrics {
  int32_t n_running = 0;
  int32_t n_waiting = 0;  // in the scheduler plus not yet drained from the queue
  double kv_usage = 0.0;  // 0..1
  int64_t prefix_queries = 0;
  int64_t prefix_hits = 0;
  int64_t prompt_tokens_total = 0;
  int64_t generation_tokens_total = 0;
  int64_t preemptions_total = 0;
  int64_t requests_finished_total = 0;
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_free = 0;
  int64_t requests_failed_total = 0;
  // Speculative decoding (vLLM's spec_decode counters), when it is on.
  bool spec_enabled = false;
  int64_t spec_num_drafts = 0;
  int64_t spec_num_draft_tokens = 0;
  int64_t spec_num_accepted_tokens = 0;
  std::vector<int64_t> spec_accepted_per_pos;
  // Stall-free batching (EngineStats).
  sched::StepTimeEstimate step_time;
  double step_time_target_s = 0.0;
  int64_t steps_target_unreachable = 0;
  Histogram time_to_first_token;
  Histogram inter_token_latency;
  Histogram e2e_request_latency;
  Histogram request_queue_time;
};

class AsyncEngine {
 public:
  // Starts the engine thread. `engine` must be fully constructed (the model is loaded).
  explicit AsyncEngine(std::unique_ptr<Engine> engine);
  // Stops at once: aborts everything still running (callbacks get abort events) and joins.
  ~AsyncEngine();
  AsyncEngine(const AsyncEngine&) = delete;
  AsyncEngine& operator=(const AsyncEngine&) = delete;

  // Throws llms::Error(kInvalidArgument) naming the bad field (see Engine::add_request).
  void validate(const GenerationRequest& request) const;

  // Queues a request; returns its id at once. Throws llms::Error(kUnavailable) only after
  // drain() began. `on_output` is called on the engine thread.
  int64_t submit(GenerationRequest request, OutputCallback on_output);
  // Thread-safe; unknown or finished ids are ignored.
  void abort(int64_t request_id);

  // Requests submitted and not yet finished (queued, waiting or running).
  int64_t n_in_flight() const { return in_flight_.load(); }

  // Stops accepting (submit throws), lets in-flight requests run for up to grace_seconds, then
  // aborts the rest. Returns when nothing is in flight. Safe to call once from any thread.
  void drain(double grace_seconds);

  EngineMetrics metrics() const;
  int64_t max_model_len() const { return max_model_len_; }
  int32_t n_vocab() const { return n_vocab_; }
  const KvPoolInfo& kv_pool() const { return kv_pool_; }

 private:
  struct Pending {
    int64_t id;
    GenerationRequest request;
    OutputCallback on_output;
  };
  struct Live {
    int64_t engine_id = 0;
    double last_token_time = 0.0;
  };

  void loop();
  void admit(Pending pending);
  void update_metrics_locked();

  std::unique_ptr<Engine> engine_;
  const int64_t max_model_len_;
  const int32_t n_vocab_;
  const KvPoolInfo kv_pool_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Pending> queue_;
  std::vector<int64_t> aborts_;
  bool stopping_ = false;  // the thread exits
  bool accepting_ = true;
  bool abort_all_ = false;  // drain() ran out of grace
  std::atomic<int64_t> next_id_{1};
  std::atomic<int64_t> in_flight_{0};
  EngineMetrics metrics_;  // guarded by mutex_

  // Engine-thread state.
  std::unordered_map<int64_t, Live> live_;  // by our id
  std::unordered_map<int64_t, int64_t> by_engine_id_;
  std::thread thread_;
};

}  // namespace llms::engine
