// engine/request: what a caller asks the engine for and what comes back, per request.
//
// A request is a prompt (token ids; text and chat are tokenized before they reach the engine),
// sampling parameters, n samples and stop rules. Outputs stream back as RequestOutput events,
// one sample (index) at a time; the last event of a sample has `finished` set and carries its
// finish reason and the request's metrics.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sampling/sampler.h"
#include "sampling/token_constraint.h"

namespace llms::engine {

struct GenerationRequest {
  std::vector<int32_t> prompt;
  sampling::SamplingParams sampling;
  int32_t max_tokens = 16;              // generated tokens per sample
  int32_t n = 1;                        // samples of the same prompt; they share its KV blocks
  std::vector<std::string> stop;        // stop strings: never streamed, end the sample
  std::vector<int32_t> stop_token_ids;  // end the sample (the token is not streamed as text)
  bool ignore_eos = false;              // keep going past the model's end-of-generation tokens
  bool skip_special_tokens = true;
  int32_t priority = 0;  // lower runs first under the priority policy (as vLLM)
  // Speculative decoding for this request: -1 follows the engine's configuration, 0 turns it
  // off, 1..16 caps the draft length (the load-adaptive policy may still choose fewer).
  int32_t num_speculative_tokens = -1;
  // Structured output: each sample's tokens are masked by a constraint of its own from this
  // factory (null: free text). A sample whose constraint allows no next token ends the request
  // with FinishReason::kStop and the reason in stop_reason.
  std::shared_ptr<const sampling::TokenConstraintFactory> constraint;
};

// kError: a fault inside the step (a failing kernel, a bad token reaching the model) ended the
// request; RequestOutput::error says what. Other requests are not affected.
enum class FinishReason { kNone, kStop, kLength, kAbort, kError };

// "stop", "length", "abort" (OpenAI's names), "error", "" while running.
const char* finish_reason_name(FinishReason reason);

struct TokenOutput {
  int32_t id = 0;
  float logprob = 0.0f;                              // when asked
  std::vector<sampling::TokenLogprob> top_logprobs;  // when asked
};

struct RequestMetrics {
  double arrival_time = 0.0;  // seconds, steady clock
  double queue_time = 0.0;    // arrival to first scheduled
  double time_to_first_token = 0.0;
  double prefill_time = 0.0;  // first scheduled to first token
  double decode_time = 0.0;   // first token to finish (of the last sample to finish)
  double e2e_time = 0.0;      // arrival to finish
  int32_t n_prompt_tokens = 0;
  int32_t n_cached_tokens = 0;     // taken from the prefix cache at the first admission
  int32_t n_generated_tokens = 0;  // all samples together
  int32_t n_preemptions = 0;
};

struct RequestOutput {
  int64_t request_id = 0;
  int32_t index = 0;                // which of the n samples
  std::vector<TokenOutput> tokens;  // new tokens in this event
  std::string text;                 // new text (complete UTF-8; stop strings held back)
  bool finished = false;            // last event of this sample
  FinishReason finish_reason = FinishReason::kNone;
  std::string stop_reason;        // the stop string or token that ended it, when one did
  std::string error;              // with FinishReason::kError: what failed
  bool request_finished = false;  // last event of the whole request; metrics are final
  RequestMetrics metrics;
};

// Called on the engine thread; must not call back into the engine.
using OutputCallback = std::function<void(const RequestOutput&)>;

}  // namespace llms::engine
