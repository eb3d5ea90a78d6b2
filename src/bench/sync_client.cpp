// bench/sync_client: the blocking HTTP client of the benchmark's set-up requests (model list,
// tokenization, server info; see client.h).
#include <optional>

#include "bench/client.h"
#include "http_common.h"

namespace llms::bench {

using namespace http_common;

// ---------------------------------------------------------------------------------------------
// Blocking client: asynchronous operations run to completion on a private io_context, which is
// what gives the blocking calls a timeout.

struct SyncHttpClient::Impl {
  Target target;
  std::string api_key;
  double timeout_s;
  asio::io_context ioc{1};
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;

  HttpResponse exchange(http::request<http::string_body>& req) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      const bool reused = stream.has_value();
      HttpResponse out;
      beast::error_code ec = attempt_once(req, out);
      if (!ec) return out;
      stream.reset();
      buffer.clear();
      if (!(reused && attempt == 0)) {
        out.error = out.error.empty() ? describe(ec) : out.error;
        return out;
      }
      // A kept-alive connection the server had closed: retry once on a fresh one.
    }
    return {};
  }

  beast::error_code attempt_once(http::request<http::string_body>& req, HttpResponse& out) {
    beast::error_code result;
    ioc.restart();
    if (!stream) {
      auto endpoints = resolve(ioc, target);
      stream.emplace(ioc);
      stream->expires_after(seconds(timeout_s));
      stream->async_connect(endpoints,
                            [&](beast::error_code ec, const tcp::endpoint&) { result = ec; });
      ioc.run();
      if (result) {
        out.error = "connect: " + result.message();
        return result;
      }
      ioc.restart();
    }
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxFullBody);
    stream->expires_after(seconds(timeout_s));
    http::async_write(*stream, req, [&](beast::error_code ec, size_t) {
      if (ec) {
        result = ec;
        return;
      }
      stream->expires_after(seconds(timeout_s));
      http::async_read(*stream, buffer, parser,
                       [&](beast::error_code ec2, size_t) { result = ec2; });
    });
    ioc.run();
    if (result) return result;
    out.status = static_cast<int>(parser.get().result_int());
    out.body = std::move(parser.get().body());
    if (!parser.get().keep_alive()) stream.reset();
    return {};
  }
};

SyncHttpClient::SyncHttpClient(Target target, std::string api_key, double timeout_s)
    : impl_(std::make_unique<Impl>()) {
  impl_->target = std::move(target);
  impl_->api_key = std::move(api_key);
  impl_->timeout_s = timeout_s;
}

SyncHttpClient::~SyncHttpClient() = default;

const Target& SyncHttpClient::target() const { return impl_->target; }

HttpResponse SyncHttpClient::get(const std::string& path) {
  http::request<http::string_body> req{http::verb::get, impl_->target.base_path + path, 11};
  set_common_fields(req, impl_->target, impl_->api_key);
  return impl_->exchange(req);
}

HttpResponse SyncHttpClient::post_json(const std::string& path, const std::string& body) {
  http::request<http::string_body> req{http::verb::post, impl_->target.base_path + path, 11};
  set_common_fields(req, impl_->target, impl_->api_key);
  req.set(http::field::content_type, "application/json");
  req.body() = body;
  req.prepare_payload();
  return impl_->exchange(req);
}

}  // namespace llms::bench
