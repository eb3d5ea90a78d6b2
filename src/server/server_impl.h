// server/server_impl: state shared by the listener and every connection (private header).
//
// Invariants: `backend` is published once (atomic flag `ready`) and never changes after;
// `admitted` counts engine requests submitted and not yet finished (decremented on the engine
// thread by the request's last event); `active_jobs` counts HTTP exchanges that have a
// generation in progress or a response still being written.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/thread_pool.hpp>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "server/prometheus.h"
#include "server/server.h"

namespace llms::server {

struct Server::Impl {
  explicit Impl(ServerConfig c) : config(std::move(c)) {}

  ServerConfig config;
  std::weak_ptr<Impl> self;
  Backend backend;
  std::atomic<bool> ready{false};
  std::atomic<bool> draining{false};

  // Owned through a pointer so that ~Server can destroy it (and with it every pending handler,
  // which may hold a Session that holds this Impl) while the Impl is still alive.
  std::unique_ptr<boost::asio::io_context> ioc = std::make_unique<boost::asio::io_context>();
  std::optional<boost::asio::ip::tcp::acceptor> acceptor;
  std::optional<boost::asio::signal_set> signals;
  std::vector<std::thread> threads;
  // Structured-output constraints compile here, off the I/O threads (a schema may take up to its
  // compile budget, a second, which would stall every connection of an I/O thread) and off the
  // engine thread. One thread: compiling is CPU work on a machine the engine already fills.
  std::unique_ptr<boost::asio::thread_pool> compile_pool =
      std::make_unique<boost::asio::thread_pool>(1);

  std::mutex stop_mutex;
  std::condition_variable stop_cv;
  bool stop = false;

  std::atomic<int64_t> admitted{0};
  std::atomic<int64_t> active_jobs{0};
  std::atomic<int64_t> next_request_id{1};
  std::atomic<int64_t> http_requests_total{0};
  std::atomic<int64_t> http_errors_total{0};
  std::atomic<int64_t> open_connections{0};
  std::atomic<int64_t> aborted_by_client_total{0};
  std::atomic<int64_t> rejected_queue_full_total{0};

  // Reserves `n` engine-request slots; false when the queue is full.
  bool try_admit(int64_t n) {
    const int64_t cap = int64_t{config.max_num_seqs} + config.max_queue;
    int64_t cur = admitted.load();
    while (true) {
      if (cur + n > cap) return false;
      if (admitted.compare_exchange_weak(cur, cur + n)) return true;
    }
  }

  ServerCounters counters() const {
    return {http_requests_total.load(),       http_errors_total.load(),
            open_connections.load(),          aborted_by_client_total.load(),
            rejected_queue_full_total.load(), admitted.load()};
  }

  void do_accept();
};

// Starts a connection on its socket (session.cpp).
void start_session(std::shared_ptr<Server::Impl> server, boost::asio::ip::tcp::socket socket);

// Constant-time comparison of a presented key with the configured one.
bool keys_equal(std::string_view presented, std::string_view expected);

}  // namespace llms::server
