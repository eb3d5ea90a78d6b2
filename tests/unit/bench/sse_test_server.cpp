// The stand-in SSE server of the bench tests (see sse_test_server.h), on Boost.Beast like the
// load client it serves (src/bench/client.cpp, sync_client.cpp).
#include "sse_test_server.h"

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <functional>
#include <sstream>
#include <thread>

namespace llms::bench::testing {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

struct StandInServer::Impl {
  StandInConfig config;
  Clock::time_point epoch = Clock::now();
  mutable std::mutex mu;
  std::vector<ServedRequest> served;
  std::atomic<size_t> n_accepted{0};
  std::atomic<size_t> n_open{0};
  std::atomic<size_t> max_open{0};
  asio::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  uint16_t port = 0;
  std::thread thread;
  // hold_until_received: completions read so far and the answers waiting for the barrier. Used
  // only on the server's own thread. Declared last so that held sessions go before the io_context.
  size_t n_holdable = 0;
  std::vector<std::function<void()>> held;

  double ms(Clock::time_point t) const {
    return std::chrono::duration<double, std::milli>(t - epoch).count();
  }
  void accept();
  // Runs `answer` once hold_until_received completions have been read (at once when no barrier
  // is set or it was already reached).
  void hold(std::function<void()> answer) {
    ++n_holdable;
    if (n_holdable < config.hold_until_received) return held.push_back(std::move(answer));
    auto waiting = std::move(held);
    held.clear();
    for (auto& f : waiting) f();
    answer();
  }
};

namespace {

std::string prompt_text(const json& body) {
  if (body.contains("prompt") && body["prompt"].is_string()) return body["prompt"];
  std::string text;
  if (body.contains("messages") && body["messages"].is_array()) {
    for (const auto& m : body["messages"]) {
      if (m.contains("content") && m["content"].is_string()) {
        text += m["content"].get<std::string>() + " ";
      }
    }
  }
  return text;
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(StandInServer::Impl& server, tcp::socket socket)
      : server_(server), stream_(std::move(socket)), timer_(server.ioc) {
    const size_t open = ++server_.n_open;
    size_t seen = server_.max_open.load();
    while (open > seen && !server_.max_open.compare_exchange_weak(seen, open)) {
    }
  }
  ~Session() { --server_.n_open; }

  void read() {
    req_ = {};
    parser_.emplace();
    parser_->body_limit(1 << 20);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->close();
                       self->req_ = self->parser_->release();
                       self->handle();
                     });
  }

 private:
  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  void send_simple(http::status status, const json& body) {
    auto res = std::make_shared<http::response<http::string_body>>(status, 11);
    res->set(http::field::content_type, "application/json");
    res->keep_alive(server_.config.keep_alive && req_.keep_alive());
    res->body() = body.dump();
    res->prepare_payload();
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res](beast::error_code ec, size_t) {
                        if (ec || !res->keep_alive()) return self->close();
                        self->read();
                      });
  }

  void handle() {
    const std::string target(req_.target());
    if (req_.method() == http::verb::get && target == "/v1/models") {
      return send_simple(http::status::ok, {{"object", "list"},
                                            {"data", {{{"id", "stand-in"}, {"object", "model"}}}}});
    }
    json body = json::parse(req_.body(), nullptr, false);
    if (req_.method() == http::verb::post && target == "/tokenize") {
      if (!server_.config.serve_tokenize || !body.is_object() || !body.contains("prompt") ||
          !body["prompt"].is_string()) {
        return send_simple(http::status::not_found, {{"detail", "Not Found"}});
      }
      const int64_t n = StandInServer::count_tokens(body["prompt"].get<std::string>());
      return send_simple(http::status::ok, {{"count", n}, {"tokens", json::array()}});
    }
    if (req_.method() != http::verb::post ||
        (target != "/v1/completions" && target != "/v1/chat/completions") || !body.is_object()) {
      return send_simple(http::status::not_found, {{"error", {{"message", "no such route"}}}});
    }
    chat_ = target == "/v1/chat/completions";
    const std::string prompt = prompt_text(body);
    t_recv_ = Clock::now();
    {
      std::lock_guard lock(server_.mu);
      index_ = server_.served.size();
      server_.served.push_back({target, body, server_.ms(t_recv_), {}});
    }
    if (prompt.find("please-429") != std::string::npos) {
      return send_simple(http::status::too_many_requests,
                         {{"error", {{"message", "rate limited"}, {"code", 429}}}});
    }
    if (prompt.find("please-500") != std::string::npos) {
      return send_simple(http::status::internal_server_error,
                         {{"error", {{"message", "internal failure"}, {"code", 500}}}});
    }
    n_tokens_ = body.value("max_tokens", server_.config.default_tokens);
    prompt_tokens_ = StandInServer::count_tokens(prompt);
    drop_after_ = prompt.find("please-drop") != std::string::npos ? 2 : -1;
    error_after_ = prompt.find("please-error-event") != std::string::npos ? 1 : -1;
    stall_ = prompt.find("please-stall") != std::string::npos;
    include_usage_ =
        body.contains("stream_options") && body["stream_options"].value("include_usage", false);
    sent_ = 0;
    stream_requested_ = body.value("stream", false);
    t_base_ = t_recv_;
    server_.hold([self = shared_from_this()] {
      if (self->server_.config.hold_until_received > 0) self->t_base_ = Clock::now();
      self->respond();
    });
  }

  void respond() {
    if (!stream_requested_) return respond_whole();
    auto res = std::make_shared<http::response<http::empty_body>>(http::status::ok, 11);
    res->set(http::field::content_type, "text/event-stream");
    res->keep_alive(server_.config.keep_alive && req_.keep_alive());
    res->chunked(true);
    keep_alive_ = res->keep_alive();
    auto sr = std::make_shared<http::response_serializer<http::empty_body>>(*res);
    http::async_write_header(
        stream_, *sr, [self = shared_from_this(), res, sr](beast::error_code ec, size_t) {
          if (ec) return self->close();
          if (self->stall_) return self->stall();
          if (self->chat_ && self->server_.config.chat_role_chunk) {
            return self->send_event(self->chunk_json("", true), [self] { self->schedule_next(); });
          }
          self->schedule_next();
        });
  }

  // The non-streamed answer arrives when the last token would have.
  void respond_whole() {
    const double total = server_.config.first_token_ms +
                         server_.config.token_gap_ms * static_cast<double>(n_tokens_ - 1);
    timer_.expires_at(t_base_ + std::chrono::microseconds(static_cast<int64_t>(total * 1000)));
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->close();
      std::string text;
      for (int64_t i = 0; i < self->n_tokens_; ++i) text += " tok";
      json choice = self->chat_ ? json{{"index", 0},
                                       {"message", {{"role", "assistant"}, {"content", text}}},
                                       {"finish_reason", "length"}}
                                : json{{"index", 0}, {"text", text}, {"finish_reason", "length"}};
      self->send_simple(http::status::ok,
                        {{"id", "x"}, {"choices", {choice}}, {"usage", self->usage_json()}});
    });
  }

  void stall() {
    // Hold the connection open with nothing to say until the client gives up (or the server stops).
    timer_.expires_after(std::chrono::seconds(30));
    timer_.async_wait([self = shared_from_this()](beast::error_code) { self->close(); });
  }

  json usage_json() const {
    json u = {{"prompt_tokens", prompt_tokens_},
              {"completion_tokens", n_tokens_},
              {"total_tokens", prompt_tokens_ + n_tokens_}};
    if (server_.config.cached_tokens >= 0) {
      u["prompt_tokens_details"] = {{"cached_tokens", server_.config.cached_tokens}};
    }
    return u;
  }

  std::string chunk_json(const std::string& text, bool role_only) const {
    json choice;
    if (chat_) {
      json delta =
          role_only ? json{{"role", "assistant"}, {"content", ""}} : json{{"content", text}};
      choice = {{"index", 0}, {"delta", delta}, {"finish_reason", nullptr}};
    } else {
      choice = {{"index", 0}, {"text", text}, {"finish_reason", nullptr}};
    }
    return json{{"id", "x"}, {"object", "chunk"}, {"choices", {choice}}}.dump();
  }

  void schedule_next() {
    const double at =
        server_.config.first_token_ms + server_.config.token_gap_ms * static_cast<double>(sent_);
    timer_.expires_at(t_base_ + std::chrono::microseconds(static_cast<int64_t>(at * 1000)));
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->close();
      self->send_token();
    });
  }

  void send_token() {
    if (drop_after_ >= 0 && sent_ >= drop_after_) return close();
    if (error_after_ >= 0 && sent_ >= error_after_) {
      return send_event(json{{"error", {{"message", "boom"}, {"code", 500}}}}.dump(),
                        [self = shared_from_this()] { self->send_done(); });
    }
    {
      std::lock_guard lock(server_.mu);
      server_.served[index_].t_token_ms.push_back(server_.ms(Clock::now()));
    }
    ++sent_;
    send_event(chunk_json(" tok", false), [self = shared_from_this()] {
      if (self->sent_ < self->n_tokens_) return self->schedule_next();
      if (self->include_usage_) {
        json usage_chunk = {{"id", "x"}, {"choices", json::array()}, {"usage", self->usage_json()}};
        return self->send_event(usage_chunk.dump(), [self] { self->send_done(); });
      }
      self->send_done();
    });
  }

  void send_done() {
    send_raw("data: [DONE]\n\n", [self = shared_from_this()] {
      asio::async_write(self->stream_, http::make_chunk_last(),
                        [self](beast::error_code ec, size_t) {
                          if (ec || !self->keep_alive_) return self->close();
                          self->read();
                        });
    });
  }

  template <typename Next>
  void send_event(const std::string& data, Next next) {
    send_raw(server_.config.fragment ? "data: " + data + "\r\n\r\n" : "data: " + data + "\n\n",
             std::move(next));
  }

  // Writes `text` as one HTTP chunk, or in pieces of 1..7 bytes when fragmenting.
  template <typename Next>
  void send_raw(std::string text, Next next) {
    pieces_.clear();
    if (server_.config.fragment) {
      for (size_t i = 0, n = 1; i < text.size(); i += n, n = n % 7 + 1) {
        pieces_.push_back(text.substr(i, n));
      }
    } else {
      pieces_.push_back(std::move(text));
    }
    write_piece(0, std::move(next));
  }

  template <typename Next>
  void write_piece(size_t i, Next next) {
    if (i == pieces_.size()) return next();
    asio::async_write(stream_, http::make_chunk(asio::buffer(pieces_[i])),
                      [self = shared_from_this(), i, next](beast::error_code ec, size_t) mutable {
                        if (ec) return self->close();
                        self->write_piece(i + 1, std::move(next));
                      });
  }

  StandInServer::Impl& server_;
  beast::tcp_stream stream_;
  asio::steady_timer timer_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> req_;
  Clock::time_point t_recv_;
  Clock::time_point t_base_;  // the schedule's zero: t_recv_, or the release of a held answer
  size_t index_ = 0;
  bool chat_ = false;
  bool include_usage_ = false;
  bool keep_alive_ = true;
  bool stall_ = false;
  bool stream_requested_ = false;
  int64_t n_tokens_ = 0;
  int64_t prompt_tokens_ = 0;
  int64_t sent_ = 0;
  int64_t drop_after_ = -1;
  int64_t error_after_ = -1;
  std::vector<std::string> pieces_;
};

}  // namespace

void StandInServer::Impl::accept() {
  acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec) return;  // the acceptor was closed
    ++n_accepted;
    socket.set_option(tcp::no_delay(true), ec);
    std::make_shared<Session>(*this, std::move(socket))->read();
    accept();
  });
}

StandInServer::StandInServer(StandInConfig config) : impl_(std::make_unique<Impl>()) {
  impl_->config = config;
  tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), 0);
  impl_->acceptor.open(ep.protocol());
  impl_->acceptor.set_option(asio::socket_base::reuse_address(true));
  impl_->acceptor.bind(ep);
  impl_->acceptor.listen(asio::socket_base::max_listen_connections);
  impl_->port = impl_->acceptor.local_endpoint().port();
  impl_->accept();
  impl_->thread = std::thread([impl = impl_.get()] { impl->ioc.run(); });
}

StandInServer::~StandInServer() {
  impl_->ioc.stop();
  impl_->thread.join();
}

uint16_t StandInServer::port() const { return impl_->port; }

std::vector<ServedRequest> StandInServer::served() const {
  std::lock_guard lock(impl_->mu);
  return impl_->served;
}

size_t StandInServer::n_accepted() const { return impl_->n_accepted.load(); }
size_t StandInServer::max_open() const { return impl_->max_open.load(); }

int64_t StandInServer::count_tokens(const std::string& text) {
  int64_t n = 1;  // BOS
  std::istringstream in(text);
  for (std::string word; in >> word;) n += (static_cast<int64_t>(word.size()) + 5) / 6;
  return n;
}

}  // namespace llms::bench::testing
