// bench/client: the one-thread load runner (see client.h; the blocking set-up client is in
// sync_client.cpp).
//
// Runner invariants: everything runs on the thread that called run_load; an Exchange owns one
// request from issue to record; a connection is either owned by one Exchange or idle in the pool;
// a record is decided exactly once (finish() or fail()) and delivered to the runner after the
// connection has been released (returned to the pool or closed). Time stamps are taken in the
// completion handler that delivered the bytes, before any parsing, so parsing cost never shifts a
// measured time.
//
// Silence while reading a body is watched by one timer per request (the watchdog), not by
// re-arming the stream's timeout on every read: the reads of a stream come once per token, and
// a timer re-armed per read costs the client system calls per token. For the same reason a
// chunked event stream is read from the socket and de-chunked here (bench/chunked), not through
// Beast's parser, which takes extra handler round trips per chunk.
#include "bench/client.h"

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <optional>

#include "bench/arrivals.h"
#include "bench/chunked.h"
#include "bench/openai.h"
#include "bench/sse.h"
#include "http_common.h"
#include "util/error.h"

namespace llms::bench {

using namespace http_common;

namespace {

constexpr size_t kMaxErrorBody = 64 << 10;

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The load runner.

namespace {

class Runner;

class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(Runner& runner, RequestRecord rec, const PreparedRequest& request);

  void start();

 private:
  void connect();
  void write();
  void read_header();
  void read_body();
  void on_body_bytes(std::string_view bytes, Clock::time_point t);
  void read_raw();
  void on_raw_bytes(std::string_view bytes, Clock::time_point t);
  double body_silence_limit_s() const;
  void on_read_failed(const beast::error_code& ec);
  bool on_sse_bytes(std::string_view bytes, Clock::time_point t);
  bool body_done() const { return raw_ ? chunked_.done() : parser_->is_done(); }
  bool keep_alive() const { return parser_->get().keep_alive() && !raw_leftover_; }
  void on_event(const SseEvent& ev, Clock::time_point t);
  bool can_retry(const beast::error_code& ec) const;
  void retry_fresh();
  void finish(Clock::time_point t_end);
  void deliver();
  void fail(const char* kind, std::string message);
  void release_connection(bool reusable);
  void arm_timeout(double s);
  void watch_silence(double limit_s);
  void on_watchdog(const beast::error_code& ec);

  Runner& runner_;
  RequestRecord rec_;
  const PreparedRequest& request_;
  Clock::time_point t_start_;
  Clock::time_point t_last_content_;
  Clock::time_point t_heard_;  // the last bytes of the body (or the head) arrived
  asio::steady_timer watchdog_;
  double silence_limit_s_ = 0;               // 0: the watchdog is not armed
  bool timed_out_ = false;                   // the watchdog cancelled the read
  std::optional<Clock::time_point> t_done_;  // [DONE] seen: E2E ends here
  std::unique_ptr<beast::tcp_stream> stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> req_;
  std::optional<http::response_parser<http::buffer_body>> parser_;
  std::array<char, 8192> chunk_{};
  SseParser sse_;
  bool raw_ = false;  // the body is read from the socket and de-chunked by chunked_
  ChunkedDecoder chunked_;
  std::vector<std::string_view> pieces_;
  bool raw_leftover_ = false;  // bytes after the end of the body: the connection is not reused
  std::vector<SseEvent> events_;
  std::string body_;  // non-streamed body or error body
  bool is_sse_ = false;
  bool retried_ = false;
  bool recorded_ = false;
  std::optional<Usage> usage_;
};

class Runner {
 public:
  Runner(const LoadConfig& config, const std::vector<PreparedRequest>& requests)
      : config_(config), requests_(requests), arrival_timer_(ioc_), progress_timer_(ioc_) {}

  RunResult run();

  // --- used by Exchange ---
  asio::io_context& ioc() { return ioc_; }
  const tcp::resolver::results_type& endpoints() const { return endpoints_; }
  const LoadConfig& config() const { return config_; }
  std::string full_path() const { return config_.target.base_path + config_.path; }
  double ms_since_start(Clock::time_point t) const {
    return std::chrono::duration<double, std::milli>(t - t0_).count();
  }
  std::unique_ptr<beast::tcp_stream> take_idle() {
    if (idle_.empty()) return nullptr;
    auto s = std::move(idle_.back());
    idle_.pop_back();
    return s;
  }
  void give_idle(std::unique_ptr<beast::tcp_stream> s) { idle_.push_back(std::move(s)); }
  void count_sse_events(size_t n) { n_sse_events_ += n; }
  void on_record(RequestRecord&& rec);

 private:
  struct Phase {
    bool warmup = false;
    bool closed_loop = true;
    size_t concurrency = 1;  // closed: streams; open: cap (0 none)
    size_t limit = 0;        // 0: none
    double duration_s = 0;   // 0: none
  };

  void run_phase(const Phase& phase);
  bool stop_issuing() const;
  void issue(double scheduled_s);
  void on_arrival_timer();
  void drain_pending();
  void maybe_finish();
  void report_progress(bool finished);
  void arm_progress();

  const LoadConfig& config_;
  const std::vector<PreparedRequest>& requests_;
  asio::io_context ioc_{1};
  tcp::resolver::results_type endpoints_;
  asio::steady_timer arrival_timer_;
  asio::steady_timer progress_timer_;
  std::vector<std::unique_ptr<beast::tcp_stream>> idle_;
  std::optional<ArrivalProcess> arrivals_;
  RunResult result_;

  // Phase state.
  Phase phase_;
  Clock::time_point t0_;
  Clock::time_point t_last_end_;
  size_t n_issued_ = 0;
  size_t n_done_ = 0;
  size_t n_failed_ = 0;
  size_t n_in_flight_ = 0;
  size_t n_scheduled_ = 0;
  size_t next_prompt_ = 0;
  double next_arrival_s_ = 0;
  bool arrivals_done_ = false;
  bool phase_done_ = false;
  std::deque<double> pending_;
  uint64_t n_sse_events_ = 0;
};

// --- Exchange ---

Exchange::Exchange(Runner& runner, RequestRecord rec, const PreparedRequest& request)
    : runner_(runner), rec_(std::move(rec)), request_(request), watchdog_(runner.ioc()) {}

void Exchange::start() {
  t_start_ = Clock::now();
  rec_.start_ms = runner_.ms_since_start(t_start_);
  if (rec_.scheduled_ms < 0) rec_.scheduled_ms = rec_.start_ms;
  req_ = http::request<http::string_body>{http::verb::post, runner_.full_path(), 11};
  set_common_fields(req_, runner_.config().target, runner_.config().api_key);
  req_.set(http::field::content_type, "application/json");
  req_.set(http::field::accept, "text/event-stream, application/json");
  req_.body() = request_.body;
  req_.prepare_payload();
  stream_ = runner_.take_idle();
  rec_.new_connection = stream_ == nullptr;
  if (stream_) {
    write();
  } else {
    connect();
  }
}

void Exchange::arm_timeout(double s) { stream_->expires_after(seconds(s)); }

void Exchange::connect() {
  stream_ = std::make_unique<beast::tcp_stream>(runner_.ioc());
  arm_timeout(runner_.config().timeout_s);
  stream_->async_connect(runner_.endpoints(),
                         [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
                           if (ec)
                             return self->fail(ec == beast::error::timeout ? "timeout" : "connect",
                                               "connect: " + describe(ec));
                           self->stream_->socket().set_option(tcp::no_delay(true), ec);
                           self->write();
                         });
}

bool Exchange::can_retry(const beast::error_code& ec) const {
  // Only a reused connection that the server closed while idle, and only before any response.
  return !rec_.new_connection && !retried_ && ec != beast::error::timeout;
}

void Exchange::retry_fresh() {
  retried_ = true;
  rec_.new_connection = true;
  beast::error_code ignored;
  stream_->socket().close(ignored);
  stream_.reset();
  buffer_.clear();
  connect();
}

void Exchange::write() {
  arm_timeout(runner_.config().timeout_s);
  http::async_write(*stream_, req_, [self = shared_from_this()](beast::error_code ec, size_t) {
    if (ec) {
      if (self->can_retry(ec)) return self->retry_fresh();
      return self->fail(ec == beast::error::timeout ? "timeout" : "connect",
                        "write: " + describe(ec));
    }
    self->read_header();
  });
}

void Exchange::read_header() {
  parser_.emplace();
  // No limit for a stream (our own caps apply). Not boost::none: Beast 1.74 compares a
  // Content-Length against an empty optional as "greater" and refuses every sized body.
  parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
  arm_timeout(runner_.config().timeout_s);
  http::async_read_header(
      *stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
        if (ec) {
          if (self->can_retry(ec) && self->buffer_.size() == 0) return self->retry_fresh();
          return self->fail(ec == beast::error::timeout ? "timeout" : "protocol",
                            "reading the response header: " + describe(ec));
        }
        auto& res = self->parser_->get();
        self->rec_.http_status = static_cast<int>(res.result_int());
        auto ct = res[http::field::content_type];
        self->is_sse_ = self->rec_.http_status == 200 &&
                        std::string_view(ct.data(), ct.size()).find("text/event-stream") !=
                            std::string_view::npos;
        if (self->parser_->is_done()) {
          return self->on_body_bytes({}, Clock::now());
        }
        if (self->is_sse_ && self->parser_->chunked()) {
          // The event stream: de-chunked here, starting with what came with the head.
          self->raw_ = true;
          const auto head_rest = self->buffer_.data();
          std::string rest(static_cast<const char*>(head_rest.data()), head_rest.size());
          self->buffer_.consume(self->buffer_.size());
          if (!rest.empty()) return self->on_raw_bytes(rest, Clock::now());
          return self->read_raw();
        }
        self->read_body();
      });
}

void Exchange::watch_silence(double limit_s) {
  if (silence_limit_s_ == 0) {
    stream_->expires_never();  // from here the watchdog, not the stream, bounds the reads
    t_heard_ = Clock::now();
  } else if (limit_s >= silence_limit_s_) {
    return;  // armed already, and its deadline is not moved earlier
  }
  silence_limit_s_ = limit_s;
  watchdog_.expires_at(t_heard_ + seconds(limit_s));
  watchdog_.async_wait(
      [self = shared_from_this()](const beast::error_code& ec) { self->on_watchdog(ec); });
}

void Exchange::on_watchdog(const beast::error_code& ec) {
  if (ec || silence_limit_s_ == 0 || !stream_) return;  // cancelled: the exchange is over
  const Clock::time_point deadline = t_heard_ + seconds(silence_limit_s_);
  if (Clock::now() < deadline) {  // bytes came since it was set: wait for the rest
    watchdog_.expires_at(deadline);
    watchdog_.async_wait(
        [self = shared_from_this()](const beast::error_code& e) { self->on_watchdog(e); });
    return;
  }
  timed_out_ = true;
  beast::error_code ignored;
  stream_->socket().cancel(ignored);  // the pending read ends with operation_aborted
}

double Exchange::body_silence_limit_s() const {
  // After [DONE] only the end of the body is awaited, for the connection's sake: briefly.
  const double limit = runner_.config().timeout_s;
  return t_done_ ? std::min(2.0, limit) : limit;
}

void Exchange::on_read_failed(const beast::error_code& ec) {
  if (recorded_) {  // failed while draining after [DONE]: the record stands
    release_connection(false);
    return deliver();
  }
  fail(ec == beast::error::timeout ? "timeout" : "protocol",
       "reading the response: " + describe(ec));
}

void Exchange::read_body() {
  auto& body = parser_->get().body();
  body.data = chunk_.data();
  body.size = chunk_.size();
  watch_silence(body_silence_limit_s());
  http::async_read_some(*stream_, buffer_, *parser_,
                        [self = shared_from_this()](beast::error_code ec, size_t) {
                          const Clock::time_point t = Clock::now();
                          self->t_heard_ = t;
                          if (ec == http::error::need_buffer) ec = {};
                          if (self->timed_out_) ec = beast::error::timeout;
                          const size_t n = self->chunk_.size() - self->parser_->get().body().size;
                          if (ec) return self->on_read_failed(ec);
                          self->on_body_bytes(std::string_view(self->chunk_.data(), n), t);
                        });
}

void Exchange::read_raw() {
  watch_silence(body_silence_limit_s());
  stream_->socket().async_read_some(
      asio::buffer(chunk_), [self = shared_from_this()](beast::error_code ec, size_t n) {
        const Clock::time_point t = Clock::now();
        self->t_heard_ = t;
        if (self->timed_out_) ec = beast::error::timeout;
        if (ec) return self->on_read_failed(ec);
        self->on_raw_bytes(std::string_view(self->chunk_.data(), n), t);
      });
}

void Exchange::on_raw_bytes(std::string_view bytes, Clock::time_point t) {
  pieces_.clear();
  size_t used = 0;
  try {
    used = chunked_.feed(bytes, pieces_);
  } catch (const Error& e) {
    if (recorded_) {
      release_connection(false);
      return deliver();
    }
    return fail("protocol", e.what());
  }
  if (used < bytes.size()) raw_leftover_ = true;
  if (recorded_) {  // draining after [DONE]
    if (!chunked_.done()) return read_raw();
    release_connection(keep_alive());
    return deliver();
  }
  for (std::string_view piece : pieces_) {
    if (!on_sse_bytes(piece, t)) return;  // failed inside the stream
  }
  if (chunked_.done()) return finish(t_done_.value_or(t));
  if (t_done_) return finish(*t_done_);  // E2E ends at [DONE]; finish() drains the rest
  read_raw();
}

// Feeds stream bytes to the SSE parser and handles the events; false once the record failed.
bool Exchange::on_sse_bytes(std::string_view bytes, Clock::time_point t) {
  events_.clear();
  try {
    sse_.feed(bytes, events_);
  } catch (const Error& e) {
    fail("protocol", e.what());
    return false;
  }
  runner_.count_sse_events(events_.size());
  for (const auto& ev : events_) {
    on_event(ev, t);
    if (recorded_) return false;  // failed inside the stream
  }
  return true;
}

void Exchange::on_body_bytes(std::string_view bytes, Clock::time_point t) {
  if (recorded_) {
    // Draining after [DONE]: the record is complete; only the connection's fate is open.
    if (!parser_->is_done()) return read_body();
    release_connection(parser_->get().keep_alive());
    return deliver();
  }
  if (rec_.http_status != 200 || !is_sse_) {
    const size_t cap = rec_.http_status == 200 ? kMaxFullBody : kMaxErrorBody;
    if (body_.size() + bytes.size() > cap) {
      if (rec_.http_status != 200) {
        body_.append(bytes.substr(0, cap - std::min(cap, body_.size())));
        return fail("http", error_message_of(body_));
      }
      return fail("protocol", "response body larger than " + std::to_string(cap) + " bytes");
    }
    body_.append(bytes);
    if (!parser_->is_done()) return read_body();
    if (rec_.http_status != 200) return fail("http", error_message_of(body_));
    ChunkInfo info = read_full_response(body_);
    if (info.error) return fail("stream", *info.error);
    if (info.is_malformed) return fail("protocol", "the response is not JSON");
    usage_ = info.usage;
    rec_.content_bytes = static_cast<int64_t>(info.content_bytes);
    rec_.n_content_chunks = info.has_content ? 1 : 0;
    return finish(t);
  }
  if (!on_sse_bytes(bytes, t)) return;
  if (parser_->is_done()) return finish(t_done_.value_or(t));
  if (t_done_) return finish(*t_done_);  // E2E ends at [DONE]; finish() drains the rest
  read_body();
}

void Exchange::on_event(const SseEvent& ev, Clock::time_point t) {
  if (t_done_) return;  // nothing after [DONE] counts
  ChunkInfo info = read_stream_chunk(ev.data);
  if (info.is_done) {
    t_done_ = t;
    return;
  }
  if (info.error) return fail("stream", *info.error);
  if (info.is_malformed) {
    return fail("protocol", "a stream chunk is not JSON: " + ev.data.substr(0, 120));
  }
  if (info.usage) usage_ = info.usage;
  if (!info.has_content) return;
  if (rec_.n_content_chunks == 0) {
    rec_.ttft_ms = std::chrono::duration<double, std::milli>(t - t_start_).count();
  } else {
    rec_.itl_ms.push_back(std::chrono::duration<double, std::milli>(t - t_last_content_).count());
  }
  t_last_content_ = t;
  ++rec_.n_content_chunks;
  rec_.content_bytes += static_cast<int64_t>(info.content_bytes);
}

void Exchange::finish(Clock::time_point t_end) {
  rec_.ok = true;
  rec_.e2e_ms = std::chrono::duration<double, std::milli>(t_end - t_start_).count();
  if (usage_) {
    rec_.usage_reported = true;
    rec_.input_tokens = usage_->prompt_tokens;
    rec_.cached_tokens = usage_->cached_tokens;
    rec_.output_tokens =
        usage_->completion_tokens >= 0 ? usage_->completion_tokens : rec_.n_content_chunks;
    if (usage_->completion_tokens < 0) rec_.usage_reported = false;
  } else {
    rec_.output_tokens = rec_.n_content_chunks;
  }
  recorded_ = true;
  // The record is delivered only once the connection is released: a closed loop issues the
  // next request from on_record, and it should find this connection idle. When [DONE] came
  // before the end of the body, the end is awaited first (briefly; E2E already stopped).
  if (!body_done()) return raw_ ? read_raw() : read_body();
  release_connection(keep_alive());
  deliver();
}

void Exchange::deliver() { runner_.on_record(std::move(rec_)); }

void Exchange::fail(const char* kind, std::string message) {
  if (recorded_) return;
  rec_.ok = false;
  rec_.error_kind = kind;
  rec_.error = std::move(message);
  rec_.e2e_ms = std::chrono::duration<double, std::milli>(Clock::now() - t_start_).count();
  if (usage_) rec_.input_tokens = usage_->prompt_tokens;
  recorded_ = true;
  const bool reusable = std::string_view(kind) == "http" && parser_ && parser_->is_done() &&
                        parser_->get().keep_alive();
  release_connection(reusable);
  deliver();
}

void Exchange::release_connection(bool reusable) {
  if (silence_limit_s_ != 0) {
    silence_limit_s_ = 0;
    watchdog_.cancel();
  }
  if (!stream_) return;
  if (reusable && buffer_.size() == 0) {
    stream_->expires_never();
    runner_.give_idle(std::move(stream_));
    return;
  }
  beast::error_code ignored;
  stream_->socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_->socket().close(ignored);
  stream_.reset();
}

// --- Runner ---

RunResult Runner::run() {
  if (requests_.empty()) throw Error(Error::Kind::kInvalidArgument, "no requests to send");
  const LevelSpec& level = config_.level;
  const bool open_loop = level.rate > 0;
  if (!open_loop && level.concurrency == 0) {
    throw Error(Error::Kind::kInvalidArgument, "concurrency must be >= 1 without a request rate");
  }
  if (config_.n_requests == 0 && !(config_.duration_s > 0)) {
    throw Error(Error::Kind::kInvalidArgument, "give a number of requests or a duration");
  }
  if (open_loop && std::isinf(level.rate) && config_.n_requests == 0) {
    throw Error(Error::Kind::kInvalidArgument, "an infinite rate needs a number of requests");
  }
  if (!(config_.timeout_s > 0)) {
    throw Error(Error::Kind::kInvalidArgument, "the request timeout must be > 0 s");
  }
  endpoints_ = resolve(ioc_, config_.target);
  if (open_loop) arrivals_.emplace(level.rate, level.burstiness, config_.seed);
  result_.level = level;
  next_prompt_ = config_.first_prompt;

  if (config_.n_warmup > 0) {
    Phase warm;
    warm.warmup = true;
    warm.closed_loop = true;
    warm.concurrency =
        level.concurrency > 0 ? level.concurrency : std::min<size_t>(64, config_.n_warmup);
    warm.limit = config_.n_warmup;
    run_phase(warm);
  }
  Phase main;
  main.closed_loop = !open_loop;
  main.concurrency = level.concurrency;
  main.limit = config_.n_requests;
  main.duration_s = config_.duration_s;
  const double cpu0 = thread_cpu_s();
  const uint64_t events0 = n_sse_events_;
  result_.max_in_flight = 0;
  run_phase(main);
  result_.client_cpu_s = thread_cpu_s() - cpu0;
  result_.n_sse_events = n_sse_events_ - events0;
  result_.duration_s = std::chrono::duration<double>(t_last_end_ - t0_).count();
  for (auto& s : idle_) {
    beast::error_code ignored;
    s->socket().close(ignored);
  }
  idle_.clear();
  return std::move(result_);
}

void Runner::run_phase(const Phase& phase) {
  phase_ = phase;
  n_issued_ = n_done_ = n_failed_ = n_in_flight_ = n_scheduled_ = 0;
  next_arrival_s_ = 0;
  arrivals_done_ = false;
  phase_done_ = false;
  pending_.clear();
  ioc_.restart();
  t0_ = Clock::now();
  t_last_end_ = t0_;
  if (phase_.closed_loop) {
    for (size_t i = 0; i < phase_.concurrency && !stop_issuing(); ++i) issue(0);
  } else {
    on_arrival_timer();
  }
  arm_progress();
  maybe_finish();
  ioc_.run();
}

bool Runner::stop_issuing() const {
  if (phase_.limit > 0 && n_issued_ >= phase_.limit) return true;
  if (phase_.duration_s > 0 &&
      std::chrono::duration<double>(Clock::now() - t0_).count() >= phase_.duration_s) {
    return true;
  }
  return false;
}

void Runner::issue(double scheduled_s) {
  const size_t prompt = next_prompt_++ % requests_.size();
  RequestRecord rec;
  rec.index = n_issued_++;
  rec.prompt_index = prompt;
  rec.warmup = phase_.warmup;
  rec.scheduled_ms = phase_.closed_loop ? -1.0 : scheduled_s * 1000.0;  // -1: the start itself
  rec.expected_input_tokens = requests_[prompt].expected_input_tokens;
  ++n_in_flight_;
  result_.max_in_flight = std::max(result_.max_in_flight, n_in_flight_);
  std::make_shared<Exchange>(*this, std::move(rec), requests_[prompt])->start();
}

void Runner::on_arrival_timer() {
  const double now_s = std::chrono::duration<double>(Clock::now() - t0_).count();
  while (!arrivals_done_ && next_arrival_s_ <= now_s) {
    if (phase_.duration_s > 0 && next_arrival_s_ >= phase_.duration_s) {
      arrivals_done_ = true;
      break;
    }
    pending_.push_back(next_arrival_s_);
    ++n_scheduled_;
    next_arrival_s_ += arrivals_->next_gap_s();
    if (phase_.limit > 0 && n_scheduled_ >= phase_.limit) arrivals_done_ = true;
  }
  drain_pending();
  if (!arrivals_done_) {
    arrival_timer_.expires_at(t0_ + seconds(next_arrival_s_));
    arrival_timer_.async_wait([this](beast::error_code ec) {
      if (!ec) on_arrival_timer();
    });
  }
  maybe_finish();
}

void Runner::drain_pending() {
  while (!pending_.empty() && (phase_.concurrency == 0 || n_in_flight_ < phase_.concurrency)) {
    const double scheduled = pending_.front();
    pending_.pop_front();
    issue(scheduled);
  }
}

void Runner::on_record(RequestRecord&& rec) {
  --n_in_flight_;
  ++n_done_;
  if (!rec.ok) ++n_failed_;
  t_last_end_ = std::max(t_last_end_, Clock::now());
  result_.records.push_back(std::move(rec));
  if (phase_.closed_loop) {
    if (!stop_issuing()) issue(0);
  } else {
    drain_pending();
  }
  maybe_finish();
}

void Runner::maybe_finish() {
  if (phase_done_ || n_in_flight_ > 0 || !pending_.empty()) return;
  const bool no_more = phase_.closed_loop ? stop_issuing() : arrivals_done_;
  if (!no_more) return;
  phase_done_ = true;
  arrival_timer_.cancel();
  progress_timer_.cancel();
  report_progress(true);
}

void Runner::report_progress(bool finished) {
  if (!config_.on_progress) return;
  Progress p;
  p.warmup = phase_.warmup;
  p.n_done = n_done_;
  p.n_failed = n_failed_;
  p.n_in_flight = n_in_flight_;
  p.n_target = phase_.limit;
  p.duration_s = phase_.duration_s;
  p.elapsed_s = std::chrono::duration<double>(Clock::now() - t0_).count();
  p.finished = finished;
  config_.on_progress(p);
}

void Runner::arm_progress() {
  if (!config_.on_progress || phase_done_) return;
  progress_timer_.expires_after(seconds(std::max(0.01, config_.progress_interval_s)));
  progress_timer_.async_wait([this](beast::error_code ec) {
    if (ec || phase_done_) return;
    report_progress(false);
    arm_progress();
  });
}

}  // namespace

RunResult run_load(const LoadConfig& config, const std::vector<PreparedRequest>& requests) {
  Runner runner(config, requests);
  return runner.run();
}

uint64_t raise_open_file_limit(uint64_t wanted) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  if (lim.rlim_cur < wanted) {
    rlimit raised = lim;
    raised.rlim_cur =
        lim.rlim_max == RLIM_INFINITY ? wanted : std::min<rlim_t>(wanted, lim.rlim_max);
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  return lim.rlim_cur;
}

}  // namespace llms::bench
