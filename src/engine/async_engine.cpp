#include "engine/async_engine.h"

#include <algorithm>
#include <chrono>

#include "util/error.h"

namespace llms::engine {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Bucket bounds as vLLM's histograms of the same names.
std::vector<double> ttft_bounds() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}
std::vector<double> itl_bounds() {
  return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
          0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
}
std::vector<double> latency_bounds() {
  return {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
          30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i =
      static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin());
  ++counts[i];
  sum += value;
  ++count;
}

AsyncEngine::AsyncEngine(std::unique_ptr<Engine> engine)
    : engine_(std::move(engine)),
      max_model_len_(engine_->max_model_len()),
      n_vocab_(engine_->n_vocab()),
      kv_pool_(engine_->kv_pool()) {
  metrics_.time_to_first_token = Histogram(ttft_bounds());
  metrics_.inter_token_latency = Histogram(itl_bounds());
  metrics_.e2e_request_latency = Histogram(latency_bounds());
  metrics_.request_queue_time = Histogram(latency_bounds());
  metrics_.kv_blocks_total = kv_pool_.n_blocks;
  metrics_.kv_blocks_free = kv_pool_.n_blocks;
  thread_ = std::thread([this] { loop(); });
}

AsyncEngine::~AsyncEngine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    accepting_ = false;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  // The engine thread is gone: end whatever is left, on this thread.
  std::vector<int64_t> ids;
  for (const auto& [id, live] : live_) ids.push_back(live.engine_id);
  for (int64_t engine_id : ids) engine_->abort(engine_id);
  for (Pending& p : queue_) {
    RequestOutput out;
    out.request_id = p.id;
    out.finished = true;
    out.request_finished = true;
    out.finish_reason = FinishReason::kAbort;
    if (p.on_output) p.on_output(out);
  }
}

void AsyncEngine::validate(const GenerationRequest& request) const { engine_->validate(request); }

int64_t AsyncEngine::submit(GenerationRequest request, OutputCallback on_output) {
  const int64_t id = next_id_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!accepting_) throw Error(Error::Kind::kUnavailable, "the server is shutting down");
    in_flight_.fetch_add(1);
    ++metrics_.n_waiting;
    queue_.push_back(Pending{id, std::move(request), std::move(on_output)});
  }
  wake_.notify_all();
  return id;
}

void AsyncEngine::abort(int64_t request_id) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    aborts_.push_back(request_id);
  }
  wake_.notify_all();
}

void AsyncEngine::drain(double grace_seconds) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    accepting_ = false;
  }
  const double deadline = now_seconds() + std::max(0.0, grace_seconds);
  while (in_flight_.load() > 0 && now_seconds() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (in_flight_.load() > 0) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      abort_all_ = true;
    }
    wake_.notify_all();
    while (in_flight_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

EngineMetrics AsyncEngine::metrics() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return metrics_;
}

void AsyncEngine::admit(Pending pending) {
  const int64_t id = pending.id;
  OutputCallback user = std::move(pending.on_output);
  auto forward = [this, id, user](const RequestOutput& o) {
    RequestOutput out = o;
    out.request_id = id;
    const double now = now_seconds();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = live_.find(id);
      if (it != live_.end() && !o.tokens.empty()) {
        if (it->second.last_token_time > 0.0) {
          metrics_.inter_token_latency.observe(now - it->second.last_token_time);
        }
        it->second.last_token_time = now;
      }
      if (o.request_finished) {
        const RequestMetrics& m = o.metrics;
        if (m.n_generated_tokens > 0) metrics_.time_to_first_token.observe(m.time_to_first_token);
        metrics_.e2e_request_latency.observe(m.e2e_time);
        metrics_.request_queue_time.observe(m.queue_time);
        ++metrics_.requests_finished_total;
        // The engine has already taken the request out of its batch; refresh the gauges now, so
        // a client that reads /metrics right after its response never sees it still running.
        update_metrics_locked();
      }
    }
    if (user) user(out);
    if (o.request_finished) {
      auto it = live_.find(id);
      if (it != live_.end()) {
        by_engine_id_.erase(it->second.engine_id);
        live_.erase(it);
      }
      in_flight_.fetch_sub(1);
    }
  };
  live_[id] = Live{};
  try {
    const int64_t engine_id = engine_->add_request(std::move(pending.request), forward);
    live_[id].engine_id = engine_id;
    by_engine_id_[engine_id] = id;
  } catch (const Error& e) {
    // validate() passed on the caller's thread, so this is not expected; end the request
    // visibly rather than losing it.
    live_.erase(id);
    RequestOutput out;
    out.request_id = id;
    out.finished = true;
    out.request_finished = true;
    out.finish_reason = FinishReason::kAbort;
    out.stop_reason = e.what();
    in_flight_.fetch_sub(1);
    if (user) user(out);
  }
}

void AsyncEngine::update_metrics_locked() {
  const EngineStats s = engine_->stats();
  metrics_.n_running = s.n_running;
  metrics_.n_waiting = s.n_waiting + static_cast<int32_t>(queue_.size());
  metrics_.kv_usage = s.kv_usage;
  metrics_.prefix_queries = s.prefix_queries;
  metrics_.prefix_hits = s.prefix_hits;
  metrics_.prompt_tokens_total = s.prompt_tokens_total;
  metrics_.generation_tokens_total = s.generation_tokens_total;
  metrics_.preemptions_total = s.n_preemptions;
  metrics_.kv_blocks_free = engine_->kv_cache().n_free_blocks();
  metrics_.requests_failed_total = s.n_failed_requests;
  metrics_.spec_enabled = !s.spec_accepted_per_pos.empty();
  metrics_.spec_num_drafts = s.spec_num_drafts;
  metrics_.spec_num_draft_tokens = s.spec_num_draft_tokens;
  metrics_.spec_num_accepted_tokens = s.spec_num_accepted_tokens;
  metrics_.spec_accepted_per_pos = s.spec_accepted_per_pos;
  metrics_.step_time = s.step_time;
  metrics_.step_time_target_s = s.step_time_target_s;
  metrics_.steps_target_unreachable = s.steps_target_unreachable;
}

void AsyncEngine::loop() {
  for (;;) {
    std::deque<Pending> arrivals;
    std::vector<int64_t> aborts;
    bool abort_all = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] {
        return stopping_ || abort_all_ || !queue_.empty() || !aborts_.empty() ||
               engine_->has_unfinished();
      });
      if (stopping_) return;
      arrivals.swap(queue_);
      aborts.swap(aborts_);
      abort_all = abort_all_;
      abort_all_ = false;
    }
    // Admit first, so an abort that raced its own submission still finds the request.
    for (Pending& p : arrivals) admit(std::move(p));
    for (int64_t id : aborts) {
      auto it = live_.find(id);
      if (it != live_.end()) engine_->abort(it->second.engine_id);
    }
    if (abort_all) {
      std::vector<int64_t> ids;
      for (const auto& [id, live] : live_) ids.push_back(live.engine_id);
      for (int64_t engine_id : ids) engine_->abort(engine_id);
    }
    bool stepped = engine_->has_unfinished() && engine_->step();
    std::unique_lock<std::mutex> lock(mutex_);
    update_metrics_locked();
    if (!stepped && engine_->has_unfinished()) {
      // Work exists but none could be scheduled (cannot happen with admission checks): do not
      // spin; wake on the next submission or abort.
      wake_.wait_for(lock, std::chrono::milliseconds(5));
    }
  }
}

}  // namespace llms::engine
