// server/server: the OpenAI-compatible HTTP server around one AsyncEngine.
//
// Threading: Boost.Asio event loop on `io_threads` threads (each connection on its own strand);
// the engine runs on its own thread and its output callbacks only post to the connection's
// strand. No I/O thread ever waits on the engine. Tokenizing and template rendering run on the
// I/O threads under the parsers' budgets.
//
// Lifecycle: listen() binds and starts serving at once (/health answers 503 until
// set_backend()); run_until_stopped() blocks until SIGTERM/SIGINT or request_stop(), then drains:
// the listener closes, new requests get 503, in-flight ones may finish within
// drain_timeout_s, the rest end with an error event (stream) or a 503 (non-stream).
//
// Endpoints: GET /health, GET /metrics, GET /v1/models, POST /v1/completions,
// POST /v1/chat/completions, POST /tokenize, POST /detokenize. See docs/SERVER.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "server/constraint_compiler.h"
#include "server/openai_request.h"
#include "server/tool_calls.h"

namespace llms::engine {
class AsyncEngine;
}
namespace llms::tokenizer {
class Tokenizer;
}
namespace llms::jinja {
class Template;
}

namespace llms::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;  // 0: any free port (listen() returns it)
  std::string api_key;   // empty: no authentication
  bool webui = true;     // serve the chat page at / and the dashboard at /dashboard
  std::string served_model_name = "default";
  // Requests admitted at once: max_num_seqs running plus max_queue waiting; more get 429.
  int32_t max_num_seqs = 64;
  int32_t max_queue = 1024;
  size_t max_body_bytes = size_t{8} << 20;
  size_t max_header_bytes = 16 << 10;
  int max_json_depth = 64;
  double header_timeout_s = 30.0;  // whole request head, idle keep-alive included
  double body_timeout_s = 30.0;
  double write_timeout_s = 60.0;  // a client that stops reading is dropped after this
  double drain_timeout_s = 30.0;
  int io_threads = 1;
  ParseLimits limits;  // n_vocab is filled in from the backend
};

// What the loaded model offers; everything must outlive the server.
struct Backend {
  engine::AsyncEngine* engine = nullptr;
  const tokenizer::Tokenizer* tokenizer = nullptr;
  const jinja::Template* chat_template = nullptr;
  // How the chat template writes tool calls (server/tool_calls.h), to parse them from outputs.
  ToolCallFormat tool_call_format = ToolCallFormat::kNone;
  // The template writes <think>...</think>: chat outputs are split into reasoning and content.
  bool reasoning = false;
  // Compiles structured-output requests (null: they are refused).
  ConstraintCompiler* constraints = nullptr;
};

class Server {
 public:
  explicit Server(ServerConfig config);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds, starts the I/O threads and returns the bound port. Throws llms::Error on failure.
  uint16_t listen();
  // The model is ready: /health turns 200 and generation is served.
  void set_backend(const Backend& backend);
  // Blocks until a stop is asked (SIGTERM, SIGINT or request_stop()), then drains and stops.
  void run_until_stopped();
  void request_stop();
  bool stop_requested() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace llms::server
