// server/server: listener, I/O threads, signals and the drain sequence (see server.h).
#include "server/server.h"

#include <fmt/core.h>
#include <sys/resource.h>

#include <boost/asio/strand.hpp>
#include <chrono>
#include <csignal>

#include "engine/async_engine.h"
#include "server_impl.h"
#include "util/error.h"

namespace llms::server {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

bool keys_equal(std::string_view presented, std::string_view expected) {
  // Every byte of the longer string is visited whatever matches, so timing does not reveal
  // where the first difference is.
  const size_t n = std::max(presented.size(), expected.size());
  unsigned diff = presented.size() == expected.size() ? 0u : 1u;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char a = i < presented.size() ? static_cast<unsigned char>(presented[i]) : 0;
    const unsigned char b = i < expected.size() ? static_cast<unsigned char>(expected[i]) : 0;
    diff |= static_cast<unsigned>(a ^ b);
  }
  return diff == 0;
}

void Server::Impl::do_accept() {
  acceptor->async_accept(
      asio::make_strand(*ioc), [this](boost::system::error_code ec, tcp::socket socket) {
        if (ec == asio::error::operation_aborted || !acceptor || !acceptor->is_open()) return;
        if (!ec && !draining.load()) {
          // SSE sends one small chunk per token: without TCP_NODELAY, Nagle's algorithm holds
          // each chunk until the client's (delayed) ACK of the previous one arrives.
          boost::system::error_code ignored;
          socket.set_option(tcp::no_delay(true), ignored);
          start_session(self.lock(), std::move(socket));
        }
        do_accept();
      });
}

Server::Server(ServerConfig config) : impl_(std::make_shared<Impl>(std::move(config))) {
  impl_->self = impl_;
}

Server::~Server() {
  impl_->compile_pool->stop();
  impl_->compile_pool->join();
  impl_->ioc->stop();
  for (std::thread& t : impl_->threads) {
    if (t.joinable()) t.join();
  }
  // Break the cycle Impl -> io_context -> pending handlers -> Session -> Impl.
  impl_->acceptor.reset();
  impl_->signals.reset();
  impl_->ioc.reset();
}

uint16_t Server::listen() {
  Impl& s = *impl_;
  // Many concurrent streams need many descriptors: raise the soft limit to the hard one.
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  boost::system::error_code ec;
  const asio::ip::address address = asio::ip::make_address(s.config.host, ec);
  if (ec) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("--host: '{}' is not an IP address", s.config.host));
  }
  const tcp::endpoint endpoint(address, s.config.port);
  s.acceptor.emplace(*s.ioc);
  s.acceptor->open(endpoint.protocol(), ec);
  if (!ec) s.acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor->bind(endpoint, ec);
  if (!ec) s.acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    throw Error(Error::Kind::kIo, fmt::format("cannot listen on {}:{}: {}", s.config.host,
                                              s.config.port, ec.message()));
  }
  const uint16_t port = s.acceptor->local_endpoint().port();
  s.signals.emplace(*s.ioc, SIGTERM, SIGINT);
  s.signals->async_wait([weak = std::weak_ptr<Impl>(impl_)](boost::system::error_code e, int) {
    if (e) return;
    if (auto strong = weak.lock()) {
      std::lock_guard lock(strong->stop_mutex);
      strong->stop = true;
      strong->stop_cv.notify_all();
    }
  });
  s.do_accept();
  const int n_threads = std::max(1, s.config.io_threads);
  for (int i = 0; i < n_threads; ++i) {
    s.threads.emplace_back([&s] { s.ioc->run(); });
  }
  return port;
}

void Server::set_backend(const Backend& backend) {
  impl_->backend = backend;
  impl_->config.limits.n_vocab = backend.engine ? backend.engine->n_vocab() : 0;
  impl_->ready.store(true);
}

void Server::request_stop() {
  std::lock_guard lock(impl_->stop_mutex);
  impl_->stop = true;
  impl_->stop_cv.notify_all();
}

bool Server::stop_requested() const {
  std::lock_guard lock(impl_->stop_mutex);
  return impl_->stop;
}

void Server::run_until_stopped() {
  Impl& s = *impl_;
  {
    std::unique_lock lock(s.stop_mutex);
    s.stop_cv.wait(lock, [&] { return s.stop; });
  }
  // 1. Stop accepting; new requests on open connections get 503.
  s.draining.store(true);
  asio::post(*s.ioc, [&s] {
    boost::system::error_code ignored;
    if (s.acceptor) s.acceptor->close(ignored);
    if (s.signals) s.signals->cancel(ignored);
  });
  // 2. Let in-flight requests finish within the grace period; the engine aborts the rest, and
  // their connections send the error event / 503.
  if (s.ready.load() && s.backend.engine) s.backend.engine->drain(s.config.drain_timeout_s);
  // 3. Give connections a moment to write their last bytes.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (s.active_jobs.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  s.compile_pool->stop();
  s.compile_pool->join();
  s.ioc->stop();
  for (std::thread& t : s.threads) {
    if (t.joinable()) t.join();
  }
  s.threads.clear();
}

}  // namespace llms::server
