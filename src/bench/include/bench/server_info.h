// bench/server_info: what the benchmark asks the server before it starts — which model it
// serves (GET /v1/models) and how it counts tokens (POST /tokenize).
//
// /tokenize is not part of the OpenAI API. Two dialects are understood: vLLM's
// {"model", "prompt"} -> {"count", "tokens"} and llama.cpp's {"content"} -> {"tokens"}; the first
// that answers is kept. Counts include the special tokens the server adds to a completion prompt,
// so they agree with usage.prompt_tokens.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "bench/client.h"
#include "bench/dataset.h"

namespace llms::bench {

// The first model id of GET /v1/models, or nullopt with the reason in *why.
std::optional<std::string> first_model_id(SyncHttpClient& client, std::string* why);

// The first "id" of a /v1/models answer ({"data": [{"id": ...}]}), nullopt when there is none.
std::optional<std::string> first_model_id_of(const std::string& models_body);

class ServerTokenizer {
 public:
  ServerTokenizer(SyncHttpClient& client, std::string model)
      : client_(client), model_(std::move(model)) {}

  // Asks the server to count a short text; false (with the reason in *why) when no dialect works.
  bool probe(std::string* why);

  // Token count of `text`, nullopt when the server does not answer.
  std::optional<int64_t> count(const std::string& text);

  TokenCounter counter() {
    return [this](const std::string& text) { return count(text); };
  }

  const char* dialect() const {
    return dialect_ == 1 ? "vllm" : dialect_ == 2 ? "llama.cpp" : "none";
  }
  uint64_t n_calls() const { return n_calls_; }

 private:
  std::optional<int64_t> count_with(int dialect, const std::string& text, std::string* why);

  SyncHttpClient& client_;
  std::string model_;
  int dialect_ = 0;  // 0 unknown, 1 vLLM, 2 llama.cpp
  uint64_t n_calls_ = 0;
};

}  // namespace llms::bench
