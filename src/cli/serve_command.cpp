// `llmserve serve -m MODEL`: the OpenAI-compatible HTTP server (see server/server.h and
// docs/SERVER.md).
//
// Order matters: the server listens first and prints its address (so /health can say 503 while
// loading), then the model is loaded and handed over. SIGTERM/SIGINT drain and exit 0.
#include "serve_command.h"

#include <fmt/core.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "engine/async_engine.h"
#include "engine/engine.h"
#include "engine_options.h"
#include "gguf/gguf_file.h"
#include "jinja/template.h"
#include "model_registry.h"
#include "server/reasoning.h"
#include "server/server.h"
#include "tokenizer/chat_prompt.h"
#include "tokenizer/tokenizer.h"
#include "util/byte_size.h"
#include "util/error.h"

namespace llms::cli {

namespace {

struct ServeOptions {
  std::string model = "default";
  std::string cache_dir;
  std::string max_body = "8MiB";
  server::ServerConfig server;
  EngineOptions engine;
  int32_t fault_token_id = -1;
};

int run_serve(ServeOptions& opts) {
  server::ServerConfig& cfg = opts.server;
  auto body = parse_byte_size(opts.max_body);
  if (!body || *body == 0 || *body > (uint64_t{1} << 32)) {
    throw Error(
        Error::Kind::kInvalidArgument,
        fmt::format("--max-body-bytes: '{}' is not a byte size such as 8MiB", opts.max_body));
  }
  cfg.max_body_bytes = static_cast<size_t>(*body);
  if (cfg.max_queue < 0) throw Error(Error::Kind::kInvalidArgument, "--max-queue: must be >= 0");
  if (cfg.io_threads < 1 || cfg.io_threads > 64) {
    throw Error(Error::Kind::kInvalidArgument, "--io-threads: must be in [1, 64]");
  }
  engine::EngineConfig engine_config = opts.engine.to_config();
  engine_config.fault_token_id = opts.fault_token_id;
  cfg.max_num_seqs = opts.engine.max_num_seqs;
  if (cfg.served_model_name.empty()) {
    std::filesystem::path p(opts.model);
    cfg.served_model_name =
        p.has_extension() && p.extension() == ".gguf" ? p.stem().string() : opts.model;
  }

  server::Server srv(cfg);
  const uint16_t port = srv.listen();
  fmt::print(stderr, "llmserve: listening on http://{}:{} (model '{}' loading)\n", cfg.host, port,
             cfg.served_model_name);
  std::fflush(stderr);

  auto path = resolve_model(opts.model, opts.cache_dir);
  gguf::GgufFile file = gguf::GgufFile::open(path);
  tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(file);
  const std::string template_source = tokenizer::chat_template_for(file);
  jinja::Template chat_template = jinja::Template::parse(template_source);
  const auto draft = open_draft_model(opts.engine.speculative, opts.cache_dir);
  engine_config.draft_file = draft.get();
  auto eng = std::make_unique<engine::Engine>(file, tok, engine_config);
  print_kv_pool(*eng, stderr);
  server::ConstraintCompiler constraints(tok, eng->n_vocab());
  engine::AsyncEngine async(std::move(eng));
  srv.set_backend({&async, &tok, &chat_template,
                   server::tool_call_format_for_template(template_source),
                   server::template_has_reasoning(template_source), &constraints});
  fmt::print(stderr, "llmserve: ready on http://{}:{}\n", cfg.host, port);
  if (cfg.webui) {
    fmt::print(stderr, "llmserve: chat at http://{0}:{1}/, dashboard at http://{0}:{1}/dashboard\n",
               cfg.host, port);
  }
  std::fflush(stderr);

  srv.run_until_stopped();
  fmt::print(stderr, "llmserve: stopped\n");
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<ServeOptions>();
  server::ServerConfig& s = opts->server;
  auto* cmd = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  cmd->add_option("-m,--model", opts->model, "GGUF file or registered model (default: default)");
  cmd->add_option("--cache-dir", opts->cache_dir, "Cache root for registered models");
  cmd->add_option("--host", s.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", s.port, "Port to listen on (0: any free port)")->capture_default_str();
  cmd->add_option("--api-key", s.api_key, "Require Authorization: Bearer KEY (not on /health)");
  cmd->add_flag("!--no-webui", s.webui,
                "Do not serve the chat page (/) and the dashboard (/dashboard)");
  cmd->add_option("--served-model-name", s.served_model_name,
                  "Model name in the API (default: the -m value)");
  s.served_model_name.clear();
  cmd->add_option("--max-queue", s.max_queue,
                  "Requests that may wait beyond --max-num-seqs; more get 429")
      ->capture_default_str();
  cmd->add_option("--max-body-bytes", opts->max_body, "Largest request body (413 above)")
      ->capture_default_str();
  cmd->add_option("--header-timeout", s.header_timeout_s,
                  "Seconds a client may take to send a request head (idle keep-alive included)")
      ->capture_default_str();
  cmd->add_option("--body-timeout", s.body_timeout_s, "Seconds a client may take to send a body")
      ->capture_default_str();
  cmd->add_option("--write-timeout", s.write_timeout_s,
                  "Seconds a write may wait on a client that does not read")
      ->capture_default_str();
  cmd->add_option("--drain-timeout", s.drain_timeout_s,
                  "On SIGTERM: seconds in-flight requests may take to finish")
      ->capture_default_str();
  cmd->add_option("--io-threads", s.io_threads, "HTTP event-loop threads")->capture_default_str();
  // Tests only (hidden): a step holding this token id fails inside the model run.
  cmd->add_option("--debug-fault-token-id", opts->fault_token_id,
                  "Fault injection for tests: a step holding this token id fails")
      ->group("");
  cmd->add_option("--max-n", s.limits.max_n, "Largest n (samples per prompt)")
      ->capture_default_str();
  add_engine_options(*cmd, opts->engine);
  cmd->callback([opts, &exit_code] { exit_code = run_serve(*opts); });
}

}  // namespace llms::cli
