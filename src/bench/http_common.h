// bench/http_common (private): what the blocking client (sync_client.cpp) and the load runner
// (client.cpp) share: the request header fields, name resolution, error wording, time units.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <string>

#include "bench/client.h"
#include "util/error.h"

namespace llms::bench::http_common {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

inline constexpr size_t kMaxFullBody = size_t{64} << 20;  // a whole non-streamed response

inline Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

inline std::string describe(const beast::error_code& ec) {
  return ec == beast::error::timeout ? "timeout" : ec.message();
}

// Host (IPv6 literals bracketed), user agent, bearer key, keep-alive.
inline void set_common_fields(http::request<http::string_body>& req, const Target& target,
                              const std::string& api_key) {
  req.version(11);
  const bool v6 = target.host.find(':') != std::string::npos;  // a literal IPv6 address
  req.set(http::field::host,
          (v6 ? "[" + target.host + "]" : target.host) + ":" + std::to_string(target.port));
  req.set(http::field::user_agent, "llmserve-bench/1");
  if (!api_key.empty()) req.set(http::field::authorization, "Bearer " + api_key);
  req.keep_alive(true);
}

inline tcp::resolver::results_type resolve(asio::io_context& ioc, const Target& target) {
  tcp::resolver resolver(ioc);
  beast::error_code ec;
  auto results = resolver.resolve(target.host, std::to_string(target.port), ec);
  if (ec) {
    throw Error(Error::Kind::kNotFound,
                "cannot resolve host '" + target.host + "': " + ec.message());
  }
  return results;
}

}  // namespace llms::bench::http_common
