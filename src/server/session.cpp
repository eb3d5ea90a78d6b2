// server/session: one client connection — HTTP/1.1 reading under deadlines and caps, routing,
// and the generation exchange with the engine (streamed over SSE or answered whole).
//
// Invariants (all state is touched only on the connection's strand):
//  - At most one read (request head/body, or the disconnect watch) and one write are pending.
//  - Engine events cross to the strand through inbox_ (under inbox_mutex_, the only state the
//    engine thread touches): an event is queued and a drain is posted only when none is pending
//    already, so a burst of events costs one wake of the I/O thread and one write.
//  - Bytes to send accumulate in out_ and go out in one write at a time (events that arrive while
//    a write is pending are coalesced into the next one). A write is first tried at once on the
//    non-blocking socket; only what the kernel does not take goes to an asynchronous write under
//    write_timeout_s. A write that fails or outlasts the timeout means the client is gone.
//    Completion (end of exchange, failure) is always handled from a posted handler, never from
//    inside flush(), so callers of flush() never see the session change under them.
//  - While a generation runs, a read stays pending on the socket: EOF or an error there (or a
//    failed write) is a disconnect, and every unfinished engine request of the exchange is
//    aborted at once. The session lives until the engine's last event for each request arrived
//    (the engine callback holds it), so no event ever reaches a destroyed session.
//  - An exchange ends when its response was flushed; then the next request is read
//    (keep-alive) or the connection is closed.
#include <fmt/core.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <chrono>
#include <ctime>
#include <mutex>
#include <random>

#include "engine/async_engine.h"
#include "jinja/template.h"
#include "server/api_error.h"
#include "server/json_body.h"
#include "server/openai_response.h"
#include "server/request_constraint.h"
#include "server/sse.h"
#include "server_impl.h"
#include "tokenizer/chat_prompt.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "webui/assets.h"

namespace llms::server {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using nlohmann::json;

constexpr size_t kWatchChunk = 4096;
constexpr size_t kMaxPipelinedBytes = 64 << 10;

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

std::string_view sv(beast::string_view s) { return {s.data(), s.size()}; }

std::string random_suffix() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{:016x}", rng());
}

std::string head(int status, std::string_view content_type, size_t content_length, bool keep_alive,
                 const std::vector<std::pair<std::string, std::string>>& extra) {
  std::string h =
      fmt::format("HTTP/1.1 {} {}\r\nServer: llmserve\r\n", status,
                  sv(http::obsolete_reason(http::int_to_status(static_cast<unsigned>(status)))));
  if (!content_type.empty()) h += fmt::format("Content-Type: {}\r\n", content_type);
  h += fmt::format("Content-Length: {}\r\n", content_length);
  h += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  for (const auto& [k, v] : extra) h += fmt::format("{}: {}\r\n", k, v);
  h += "\r\n";
  return h;
}

// The engine refused a request (validate): OpenAI's shape, with the param it names.
[[noreturn]] void throw_engine_refusal(const Error& e, const char* prompt_param) {
  const std::string msg = e.what();
  constexpr std::string_view kContext = "context_length_exceeded: ";
  if (msg.rfind(kContext, 0) == 0) {
    throw ApiError(400, msg.substr(kContext.size()), prompt_param, "context_length_exceeded");
  }
  if (e.kind() != Error::Kind::kInvalidArgument) throw ApiError(500, msg);
  std::string param;
  const size_t colon = msg.find(": ");
  if (colon != std::string::npos && colon < 40) {
    param = msg.substr(0, colon);
    for (char c : param) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) {
        param.clear();
        break;
      }
    }
  }
  if (param == "prompt") param = prompt_param;
  throw ApiError(400, msg, param);
}

struct SubRequest {
  int64_t engine_id = 0;
  int32_t prompt_index = 0;
  bool finished = false;
};

struct Job {
  Endpoint endpoint = Endpoint::kCompletions;
  bool stream = false;
  bool include_usage = false;
  int32_t n = 1;
  std::unique_ptr<ResponseBuilder> builder;
  std::vector<SubRequest> subs;
  int32_t n_open = 0;
  bool ended_by_server = false;  // aborted by the engine (drain), not by the client
  std::string error;             // a fault in the engine ended a sub-request: what it said
  bool complete = false;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<Server::Impl> server, tcp::socket socket)
      : server_(std::move(server)),
        strand_(socket.get_executor()),
        stream_(std::move(socket)),
        cfg_(server_->config) {
    server_->open_connections.fetch_add(1);
    beast::error_code ignored;
    stream_.socket().non_blocking(true, ignored);  // for flush()'s immediate write
  }

  ~Session() {
    server_->open_connections.fetch_sub(1);
    if (job_counted_) server_->active_jobs.fetch_sub(1);
  }

  void start() { do_read(); }

 private:
  // ---- reading ------------------------------------------------------------------------------
  void do_read() {
    if (closed_) return;
    head_request_ = false;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(cfg_.max_header_bytes));
    parser_->body_limit(cfg_.max_body_bytes);
    stream_.expires_after(seconds(cfg_.header_timeout_s));
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    if (ec) {
      if (ec == http::error::header_limit) {
        keep_alive_ = false;
        return send_error(ApiError(431, "The request head is too large"));
      }
      if (ec == http::error::body_limit) {  // Content-Length above the cap, seen in the head
        keep_alive_ = false;
        return send_error(ApiError(413, fmt::format("The request body is larger than the limit "
                                                    "of {} bytes",
                                                    cfg_.max_body_bytes)));
      }
      if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
          ec == asio::error::operation_aborted || ec == asio::error::eof ||
          ec == asio::error::connection_reset || buffer_.size() == 0) {
        return close();
      }
      keep_alive_ = false;
      return send_error(ApiError(400, "Malformed HTTP request: " + ec.message()));
    }
    if (auto len = parser_->content_length(); len && *len > cfg_.max_body_bytes) {
      keep_alive_ = false;  // the body is never read
      return send_error(ApiError(413, fmt::format("The request body ({} bytes) is larger than "
                                                  "the limit of {} bytes",
                                                  *len, cfg_.max_body_bytes)));
    }
    stream_.expires_after(seconds(cfg_.body_timeout_s));
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code e, size_t) { self->on_body(e); });
  }

  void on_body(beast::error_code ec) {
    if (ec) {
      if (ec == http::error::body_limit) {
        keep_alive_ = false;
        return send_error(ApiError(413, fmt::format("The request body is larger than the limit "
                                                    "of {} bytes",
                                                    cfg_.max_body_bytes)));
      }
      return close();
    }
    stream_.expires_never();
    keep_alive_ = parser_->get().keep_alive();
    head_request_ = parser_->get().method() == http::verb::head;
    server_->http_requests_total.fetch_add(1);
    guarded([this] { route(); });
  }

  // Runs a step of an exchange; a refusal or failure becomes the exchange's error response.
  template <class Fn>
  void guarded(Fn&& fn) {
    try {
      fn();
    } catch (const ApiError& e) {
      send_error(e);
    } catch (const jinja::TemplateRaised& e) {
      send_error(ApiError(400, e.what(), "messages"));
    } catch (const Error& e) {
      send_error(ApiError(e.kind() == Error::Kind::kInvalidArgument ? 400 : 500, e.what()));
    } catch (const std::exception& e) {
      send_error(ApiError(500, std::string("internal error: ") + e.what()));
    }
  }

  // ---- routing ------------------------------------------------------------------------------
  void route() {
    const auto& req = parser_->get();
    std::string_view target = sv(req.target());
    std::string_view path = target.substr(0, target.find('?'));
    const http::verb method = req.method();

    struct RouteInfo {
      std::string_view path;
      http::verb method;
    };
    static constexpr RouteInfo kRoutes[] = {
        {"/health", http::verb::get},
        {"/metrics", http::verb::get},
        {"/v1/models", http::verb::get},
        {"/v1/completions", http::verb::post},
        {"/v1/chat/completions", http::verb::post},
        {"/tokenize", http::verb::post},
        {"/detokenize", http::verb::post},
    };
    if (cfg_.webui) {
      if (const webui::Asset* asset = webui::find_asset(path)) return send_asset(*asset, method);
    }
    const RouteInfo* found = nullptr;
    for (const RouteInfo& r : kRoutes) {
      if (r.path == path) found = &r;
    }
    if (!found) throw ApiError(404, fmt::format("Not found: {}", std::string(path)));
    if (found->method != method) {
      extra_headers_ = {{"Allow", std::string(http::to_string(found->method))}};
      throw ApiError(405, fmt::format("Method {} is not allowed on {}; use {}",
                                      std::string(http::to_string(method)), std::string(path),
                                      std::string(http::to_string(found->method))));
    }
    if (path == "/health") {
      if (!server_->ready.load()) throw ApiError(503, "The model is loading");
      return send_response(200, "application/json", "{}");
    }
    if (path == "/metrics") {
      if (!server_->ready.load()) throw ApiError(503, "The model is loading");
      return send_response(200, "text/plain; version=0.0.4; charset=utf-8",
                           render_prometheus(server_->backend.engine->metrics(),
                                             server_->counters(), cfg_.served_model_name));
    }
    check_auth();
    if (!server_->ready.load()) throw ApiError(503, "The model is loading");
    if (path == "/v1/models") return send_json(200, models_json());
    const json body = parse_json_body(parser_->get().body(), cfg_.max_json_depth);
    if (path == "/tokenize") return tokenize(body);
    if (path == "/detokenize") return detokenize(body);
    if (server_->draining.load()) throw ApiError(503, "The server is shutting down");
    start_generation(path == "/v1/chat/completions" ? Endpoint::kChat : Endpoint::kCompletions,
                     body);
  }

  // A web UI file: public (the page asks for the API key itself), revalidated by ETag on every
  // use (Cache-Control: no-cache) so a new binary's files are picked up, under a strict CSP.
  void send_asset(const webui::Asset& asset, http::verb method) {
    for (const auto& [name, value] : webui::security_headers()) {
      extra_headers_.emplace_back(std::string(name), std::string(value));
    }
    if (method != http::verb::get && method != http::verb::head) {
      extra_headers_.emplace_back("Allow", "GET, HEAD");
      throw ApiError(
          405, fmt::format("Method {} is not allowed on {}; use GET",
                           std::string(http::to_string(method)), std::string(asset.url_path)));
    }
    extra_headers_.emplace_back("Cache-Control", "no-cache");
    extra_headers_.emplace_back("ETag", std::string(asset.etag));
    if (etag_matches(sv(parser_->get()[http::field::if_none_match]), asset.etag)) {
      return write_response(304, asset.content_type, asset.body.size(), {});
    }
    send_response(200, asset.content_type, asset.body);
  }

  // If-None-Match: a list of entity tags (weak ones compare equal too) or "*".
  static bool etag_matches(std::string_view header, std::string_view etag) {
    while (!header.empty()) {
      const size_t comma = header.find(',');
      std::string_view tag = header.substr(0, comma);
      header = comma == std::string_view::npos ? std::string_view{} : header.substr(comma + 1);
      while (!tag.empty() && (tag.front() == ' ' || tag.front() == '\t')) tag.remove_prefix(1);
      while (!tag.empty() && (tag.back() == ' ' || tag.back() == '\t')) tag.remove_suffix(1);
      if (tag.substr(0, 2) == "W/") tag.remove_prefix(2);
      if (tag == "*" || tag == etag) return true;
    }
    return false;
  }

  void check_auth() {
    if (cfg_.api_key.empty()) return;
    std::string_view auth = sv(parser_->get()[http::field::authorization]);
    constexpr std::string_view kBearer = "Bearer ";
    const bool ok = auth.size() > kBearer.size() &&
                    beast::iequals(beast::string_view(auth.data(), 7), "Bearer ") &&
                    keys_equal(auth.substr(kBearer.size()), cfg_.api_key);
    if (!ok) {
      extra_headers_ = {{"WWW-Authenticate", "Bearer"}};
      throw ApiError(401, "Incorrect or missing API key (Authorization: Bearer <key>)", "",
                     "invalid_api_key");
    }
  }

  void check_model(const std::string& model) {
    if (!model.empty() && model != cfg_.served_model_name) {
      throw ApiError(404, fmt::format("The model '{}' does not exist", model), "model",
                     "model_not_found");
    }
  }

  json models_json() const {
    static const int64_t created = static_cast<int64_t>(std::time(nullptr));
    return {{"object", "list"},
            {"data", json::array({{{"id", cfg_.served_model_name},
                                   {"object", "model"},
                                   {"created", created},
                                   {"owned_by", "llmserve"},
                                   {"root", cfg_.served_model_name},
                                   {"max_model_len", server_->backend.engine->max_model_len()}}})}};
  }

  std::vector<int32_t> encode_messages(const json& messages, const json& tools,
                                       bool add_generation_prompt) const {
    jinja::ChatInputs chat;
    chat.messages = nlohmann::ordered_json::parse(dump_json(messages));
    if (!tools.is_null()) chat.tools = nlohmann::ordered_json::parse(dump_json(tools));
    chat.add_generation_prompt = add_generation_prompt;
    try {
      return tokenizer::encode_chat(*server_->backend.chat_template, *server_->backend.tokenizer,
                                    std::move(chat))
          .ids;
    } catch (const Error& e) {
      throw ApiError(400, e.what(), "messages");
    }
  }

  // The generation prompt ends inside an open <think> (the template started the thinking).
  bool prompt_opens_thinking(const std::vector<int32_t>& prompt) const {
    const size_t n = std::min<size_t>(prompt.size(), 4);
    std::string tail = server_->backend.tokenizer->decode(
        std::vector<int32_t>(prompt.end() - static_cast<std::ptrdiff_t>(n), prompt.end()));
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
    return tail.size() >= 7 && tail.compare(tail.size() - 7, 7, "<think>") == 0;
  }

  void tokenize(const json& body) {
    check_model(parse_model_field(body));
    TokenizeRequest r = parse_tokenize_request(body);
    std::vector<int32_t> ids =
        r.is_chat ? encode_messages(r.messages, nullptr, r.add_generation_prompt)
                  : server_->backend.tokenizer->encode(
                        r.prompt, {.add_special = r.add_special_tokens, .parse_special = false});
    send_json(200, {{"count", ids.size()},
                    {"max_model_len", server_->backend.engine->max_model_len()},
                    {"tokens", ids}});
  }

  void detokenize(const json& body) {
    check_model(parse_model_field(body));
    std::vector<int32_t> ids =
        parse_detokenize_request(body, server_->backend.tokenizer->n_vocab());
    send_json(200, {{"prompt", server_->backend.tokenizer->decode(ids)}});
  }

  // ---- generation ---------------------------------------------------------------------------
  void start_generation(Endpoint endpoint, const json& body) {
    OpenAiRequest r = endpoint == Endpoint::kChat ? parse_chat_request(body, cfg_.limits)
                                                  : parse_completion_request(body, cfg_.limits);
    check_model(r.model);
    if (!r.structured.active() && r.tools.is_null()) {
      return continue_generation(endpoint, std::move(r), nullptr);
    }
    // A constraint to compile: on the compile thread, then back on this connection's strand.
    auto request = std::make_shared<OpenAiRequest>(std::move(r));
    asio::post(*server_->compile_pool, [self = shared_from_this(), endpoint, request,
                                        text = std::string(parser_->get().body())] {
      std::shared_ptr<const sampling::TokenConstraintFactory> constraint;
      std::exception_ptr failure;
      try {
        const Backend& b = self->server_->backend;
        constraint = request_constraint(*request, text, b.constraints, b.tool_call_format);
      } catch (...) {
        failure = std::current_exception();
      }
      asio::post(self->strand_, [self, endpoint, request, constraint, failure] {
        if (self->closed_) return;
        self->guarded([&] {
          if (failure) std::rethrow_exception(failure);
          if (self->server_->draining.load()) throw ApiError(503, "The server is shutting down");
          self->continue_generation(endpoint, std::move(*request), constraint);
        });
      });
    });
  }

  // Tokenizes, admits and submits a parsed request whose constraint (if any) is compiled.
  void continue_generation(Endpoint endpoint, OpenAiRequest r,
                           std::shared_ptr<const sampling::TokenConstraintFactory> constraint) {
    const Backend& b = server_->backend;
    const char* prompt_param = endpoint == Endpoint::kChat ? "messages" : "prompt";

    std::vector<std::vector<int32_t>> prompts;
    std::vector<std::string> echo;
    if (endpoint == Endpoint::kChat) {
      prompts.push_back(encode_messages(r.messages, r.tools, r.add_generation_prompt));
    } else {
      for (const PromptInput& in : r.prompts) {
        prompts.push_back(in.is_ids ? in.ids
                                    : b.tokenizer->encode(
                                          in.text, {.add_special = true, .parse_special = false}));
        if (r.echo) echo.push_back(in.is_ids ? b.tokenizer->decode(in.ids) : in.text);
      }
    }
    std::vector<engine::GenerationRequest> requests;
    for (std::vector<int32_t>& ids : prompts) {
      const int64_t room = b.engine->max_model_len() - static_cast<int64_t>(ids.size());
      const int32_t max_tokens = r.max_tokens
                                     ? *r.max_tokens
                                     : static_cast<int32_t>(std::clamp<int64_t>(room, 1, 1 << 30));
      engine::GenerationRequest g = generation_request(r, std::move(ids), max_tokens);
      g.constraint = constraint;
      try {
        b.engine->validate(g);
      } catch (const Error& e) {
        throw_engine_refusal(e, prompt_param);
      }
      requests.push_back(std::move(g));
    }
    if (!server_->try_admit(static_cast<int64_t>(requests.size()))) {
      server_->rejected_queue_full_total.fetch_add(1);
      extra_headers_ = {{"Retry-After", "1"}};
      throw ApiError(429, "The server is at capacity (queue full); retry later", "", "queue_full");
    }

    job_ = std::make_unique<Job>();
    job_->endpoint = endpoint;
    job_->stream = r.stream;
    job_->include_usage = r.include_usage;
    job_->n = r.n;
    const int32_t n_choices = static_cast<int32_t>(requests.size()) * r.n;
    const std::string id =
        fmt::format("{}-{:x}{}", endpoint == Endpoint::kChat ? "chatcmpl" : "cmpl",
                    server_->next_request_id.fetch_add(1), random_suffix());
    job_->builder = std::make_unique<ResponseBuilder>(
        endpoint, id, static_cast<int64_t>(std::time(nullptr)), cfg_.served_model_name, n_choices,
        r.sampling.logprobs, *b.tokenizer);
    if (endpoint == Endpoint::kChat && !r.tools.is_null() && r.tool_choice != "none") {
      job_->builder->enable_tool_calls(b.tool_call_format);
    }
    if (endpoint == Endpoint::kChat && b.reasoning) {
      job_->builder->enable_reasoning(prompt_opens_thinking(requests.front().prompt));
    }
    for (size_t p = 0; p < echo.size(); ++p) {
      for (int32_t k = 0; k < r.n; ++k) {
        job_->builder->set_prefix(static_cast<int32_t>(p) * r.n + k, echo[p]);
      }
    }
    server_->active_jobs.fetch_add(1);
    job_counted_ = true;

    for (size_t k = 0; k < requests.size(); ++k) {
      std::weak_ptr<Server::Impl> weak_server = server_;
      auto on_output = [self = shared_from_this(), k, weak_server](const engine::RequestOutput& o) {
        if (o.request_finished) {
          if (auto s = weak_server.lock()) s->admitted.fetch_sub(1);
        }
        bool post = false;
        {
          std::lock_guard lock(self->inbox_mutex_);
          self->inbox_.push_back({k, o});
          post = !self->drain_posted_;
          self->drain_posted_ = true;
        }
        if (post) asio::post(self->strand_, [self] { self->drain_inbox(); });
      };
      try {
        const int64_t engine_id = b.engine->submit(std::move(requests[k]), std::move(on_output));
        job_->subs.push_back({engine_id, static_cast<int32_t>(k), false});
        ++job_->n_open;
      } catch (const Error&) {
        // Shutting down: release the slots never used and end what was already submitted.
        server_->admitted.fetch_sub(static_cast<int64_t>(requests.size() - k));
        for (const SubRequest& s : job_->subs) b.engine->abort(s.engine_id);
        job_->ended_by_server = true;
        if (job_->n_open == 0) {
          job_.reset();
          release_job();
          throw ApiError(503, "The server is shutting down");
        }
        break;
      }
    }
    if (job_->stream) {
      append_out(
          "HTTP/1.1 200 OK\r\nServer: llmserve\r\nContent-Type: text/event-stream\r\n"
          "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n");
      append_out(keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n");
      flush();  // the client sees 200 at once, before the first token
    }
    start_watch();
  }

  // On the strand: every event queued since the last drain, then one write for all of them.
  void drain_inbox() {
    {
      std::lock_guard lock(inbox_mutex_);
      batch_.swap(inbox_);
      drain_posted_ = false;
    }
    for (const Pending& p : batch_) on_output(p.k, p.out);
    batch_.clear();
    flush();
  }

  void on_output(size_t k, const engine::RequestOutput& o) {
    if (!job_) return;
    Job& job = *job_;
    SubRequest& sub = job.subs.at(k);
    if (o.finish_reason == engine::FinishReason::kAbort && !client_gone_) {
      job.ended_by_server = true;
    }
    if (o.finish_reason == engine::FinishReason::kError && job.error.empty()) {
      job.error = o.error.empty() ? std::string("the engine failed on this request") : o.error;
    }
    if (o.request_finished && !sub.finished) {
      sub.finished = true;
      --job.n_open;
      job.builder->add_usage(o.metrics);
    }
    if (client_gone_) {
      if (job.n_open == 0) {
        job_.reset();
        release_job();
      }
      return;
    }
    const int32_t choice = sub.prompt_index * job.n + o.index;
    if (job.stream) {
      if (o.finish_reason != engine::FinishReason::kAbort &&
          o.finish_reason != engine::FinishReason::kError) {
        sse_.clear();
        job.builder->stream_event(choice, o, job.include_usage, sse_);
        append_chunk(sse_);
      }
    } else {
      job.builder->accumulate(choice, o);
    }
    if (job.n_open == 0) complete_job();
  }

  void complete_job() {
    Job& job = *job_;
    job.complete = true;
    if (job.stream) {
      std::string tail;
      if (!job.error.empty()) {
        append_sse_event(tail, error_body(500, job.error));
      } else if (job.ended_by_server) {
        append_sse_event(tail, error_body(503, "The server shut down before the request finished"));
      } else if (job.include_usage) {
        append_sse_event(tail, job.builder->usage_chunk());
      }
      tail += kSseDone;
      append_chunk(tail);
      append_out("0\r\n\r\n");
      exchange_done_ = true;
      flush();
    } else if (!job.error.empty()) {
      send_error(ApiError(500, job.error));
    } else if (job.ended_by_server) {
      send_error(ApiError(503, "The server shut down before the request finished"));
    } else {
      send_json(200, job.builder->final_response());
    }
  }

  void release_job() {
    if (job_counted_) {
      job_counted_ = false;
      server_->active_jobs.fetch_sub(1);
    }
  }

  // A read stays pending while generating, so a disconnect is seen at once.
  void start_watch() {
    if (watching_ || closed_) return;
    watching_ = true;
    stream_.async_read_some(
        buffer_.prepare(kWatchChunk),
        [self = shared_from_this()](beast::error_code ec, size_t n) { self->on_watch(ec, n); });
  }

  void on_watch(beast::error_code ec, size_t n) {
    watching_ = false;
    if (!ec) buffer_.commit(n);
    if (cancel_watch_) {
      cancel_watch_ = false;
      if (!ec || ec == asio::error::operation_aborted) return do_read();
      return close();
    }
    if (ec) return client_gone();
    if (buffer_.size() < kMaxPipelinedBytes) start_watch();
  }

  void client_gone() {
    if (client_gone_) return;
    client_gone_ = true;
    keep_alive_ = false;
    if (job_) {
      bool any = false;
      for (const SubRequest& s : job_->subs) {
        if (!s.finished) {
          server_->backend.engine->abort(s.engine_id);
          any = true;
        }
      }
      if (any) server_->aborted_by_client_total.fetch_add(1);
      if (job_->n_open == 0) {
        job_.reset();
        release_job();
      }
    }
    close();
  }

  // ---- writing ------------------------------------------------------------------------------
  void append_out(std::string_view bytes) { out_.append(bytes); }

  // One HTTP/1.1 chunk of a streamed body (sent by the next flush()).
  void append_chunk(std::string_view data) {
    if (data.empty()) return;
    char size[2 * sizeof(size_t)];
    const auto r = std::to_chars(size, size + sizeof(size), data.size(), 16);
    out_.append(size, r.ptr);
    out_ += "\r\n";
    out_.append(data);
    out_ += "\r\n";
  }

  void flush() {
    if (writing_ || out_.empty() || closed_) return;
    // Most writes fit in the socket's send buffer: they go out now, without arming the write
    // timer or waiting for a completion handler.
    beast::error_code ec;
    const size_t n = stream_.socket().write_some(asio::buffer(out_), ec);
    if (!ec && n == out_.size()) {
      out_.clear();
      if (!exchange_done_) return;
      writing_ = true;  // ends the exchange from a handler, as an asynchronous write would
      asio::post(strand_, [self = shared_from_this()] { self->on_write({}); });
      return;
    }
    if (ec && ec != asio::error::would_block) {
      writing_ = true;
      asio::post(strand_, [self = shared_from_this(), ec] { self->on_write(ec); });
      return;
    }
    // The send buffer is full (a slow reader): the rest waits under the write timeout.
    out_.erase(0, ec ? 0 : n);
    writing_ = true;
    wbuf_.swap(out_);
    out_.clear();
    stream_.expires_after(seconds(cfg_.write_timeout_s));
    asio::async_write(
        stream_, asio::buffer(wbuf_),
        [self = shared_from_this()](beast::error_code e, size_t) { self->on_write(e); });
  }

  void on_write(beast::error_code ec) {
    writing_ = false;
    wbuf_.clear();
    if (ec) return client_gone();
    if (!out_.empty()) return flush();
    stream_.expires_never();
    if (exchange_done_) end_exchange();
  }

  void end_exchange() {
    exchange_done_ = false;
    if (job_ && job_->complete) {
      job_.reset();
      release_job();
    }
    if (!keep_alive_ || server_->draining.load()) return close();
    if (watching_) {
      cancel_watch_ = true;
      beast::error_code ignored;
      stream_.socket().cancel(ignored);  // on_watch then reads the next request
      return;
    }
    do_read();
  }

  void send_response(int status, std::string_view content_type, std::string_view body) {
    write_response(status, content_type, body.size(), body);
  }

  // Writes a head describing content_length bytes, then `body` unless the exchange answers HEAD
  // (the client would read a body as the next response). A 304 passes no body.
  void write_response(int status, std::string_view content_type, size_t content_length,
                      std::string_view body) {
    if (status >= 400) server_->http_errors_total.fetch_add(1);
    if (server_->draining.load()) keep_alive_ = false;
    append_out(head(status, content_type, content_length, keep_alive_, extra_headers_));
    if (!head_request_) append_out(body);
    extra_headers_.clear();
    exchange_done_ = true;
    flush();
  }

  void send_json(int status, const json& body) {
    send_response(status, "application/json", dump_json(body));
  }

  void send_error(const ApiError& e) { send_json(e.status(), e.to_json()); }

  void close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  std::shared_ptr<Server::Impl> server_;
  asio::any_io_executor strand_;
  beast::tcp_stream stream_;
  const ServerConfig& cfg_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::vector<std::pair<std::string, std::string>> extra_headers_;
  std::unique_ptr<Job> job_;
  struct Pending {
    size_t k = 0;  // which engine request of the job
    engine::RequestOutput out;
  };
  std::mutex inbox_mutex_;
  std::vector<Pending> inbox_;  // guarded by inbox_mutex_ (filled on the engine thread)
  bool drain_posted_ = false;   // guarded by inbox_mutex_
  std::vector<Pending> batch_;  // the events being handled (strand)
  std::string sse_;             // scratch for one event's SSE text
  std::string out_;
  std::string wbuf_;
  bool keep_alive_ = true;
  bool writing_ = false;
  bool watching_ = false;
  bool cancel_watch_ = false;
  bool exchange_done_ = false;
  bool head_request_ = false;  // the exchange answers a HEAD request: heads only
  bool client_gone_ = false;
  bool closed_ = false;
  bool job_counted_ = false;
};

}  // namespace

void start_session(std::shared_ptr<Server::Impl> server, tcp::socket socket) {
  std::make_shared<Session>(std::move(server), std::move(socket))->start();
}

}  // namespace llms::server
