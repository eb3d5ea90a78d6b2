// A stand-in OpenAI-compatible server for the bench tests: it streams tokens on a known schedule.
//
// Runs its own event loop on its own thread, listening on 127.0.0.1 at a free port. For a
// completion request it sends the first token first_token_ms after it has read the request, then
// one token every token_gap_ms (deadlines are absolute, so a late timer does not shift the rest),
// then the usage chunk (when stream_options.include_usage) and [DONE]. It records when it read
// each request and when it wrote each token, so tests can compare the client's measurements
// with what the server actually did. Prompts containing a marker misbehave on purpose:
//   please-429 / please-500   answer with that status and an OpenAI error body
//   please-drop               close the connection after two tokens, mid-stream
//   please-stall              send the header, then nothing
//   please-error-event        stream one token, then an error event
// Token counting (/tokenize and usage.prompt_tokens): 1 (BOS) + ceil(len/6) per
// whitespace-separated word, so words longer than six letters are several tokens.
// With hold_until_received = N, no completion is answered before N of them have been read (a
// barrier, so a test can know that N streams were open at once without relying on timing); each
// held answer's schedule then counts from the release instead of from its read.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace llms::bench::testing {

struct StandInConfig {
  double first_token_ms = 50;
  double token_gap_ms = 10;
  int64_t default_tokens = 10;  // when a request names no max_tokens
  int64_t cached_tokens = -1;   // -1: no prompt_tokens_details in usage
  bool serve_tokenize = true;   // POST /tokenize (vLLM dialect); else 404
  bool keep_alive = true;
  bool fragment = false;           // write each event in pieces of 1..7 bytes, CRLF line ends
  bool chat_role_chunk = true;     // chat: an immediate role-only chunk before the first token
  size_t hold_until_received = 0;  // hold completions until this many were read (0: no hold)
};

struct ServedRequest {
  std::string path;
  nlohmann::json body;
  double t_received_ms = 0;        // request fully read, ms since the server started
  std::vector<double> t_token_ms;  // each content chunk handed to the socket
};

class StandInServer {
 public:
  explicit StandInServer(StandInConfig config);
  ~StandInServer();
  StandInServer(const StandInServer&) = delete;
  StandInServer& operator=(const StandInServer&) = delete;

  uint16_t port() const;
  std::vector<ServedRequest> served() const;  // completion requests, in order of arrival
  size_t n_accepted() const;                  // connections accepted so far
  size_t max_open() const;                    // most connections open at once

  static int64_t count_tokens(const std::string& text);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace llms::bench::testing
