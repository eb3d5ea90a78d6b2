// libFuzzer target for what the server parses from clients it does not trust: a request body
// (server/json_body.h: UTF-8, nesting depth, JSON) and the OpenAI fields of the completions,
// chat, tokenize and detokenize endpoints (server/openai_request.h).
//
// Checks, beyond "no sanitizer finding":
//   - every refusal is an ApiError with a 4xx status (the session turns any other exception into
//     a 500, which a client's input must never cause), and a field parser's 400 names the field
//     when the body is an object (openai_request.h's contract);
//   - an accepted request is inside the limits it was checked against: n, prompts, stop strings,
//     token ids, max_tokens and the sampling parameters' ranges;
//   - append_json_string writes, for the input as a string, byte for byte what dump_json writes
//     (its contract: the token stream's fast path must not differ from the JSON tree's output).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "server/api_error.h"
#include "server/json_body.h"
#include "server/openai_request.h"

namespace {

using llms::server::ApiError;

constexpr int32_t kVocab = 1000;

llms::server::ParseLimits limits() {
  llms::server::ParseLimits l;
  l.n_vocab = kVocab;
  return l;
}

void check(bool ok) {
  if (!ok) std::abort();
}

void check_refusal(const ApiError& e, bool names_a_field) {
  check(e.status() >= 400 && e.status() < 500);
  if (names_a_field && e.status() == 400) check(!e.param().empty());
}

void check_ids(const std::vector<int32_t>& ids) {
  for (int32_t id : ids) check(id >= 0 && id < kVocab);
}

void check_accepted(const llms::server::OpenAiRequest& r) {
  const llms::server::ParseLimits l = limits();
  check(r.n >= 1 && r.n <= l.max_n);
  check(static_cast<int32_t>(r.stop.size()) <= l.max_stop);
  for (const std::string& s : r.stop) check(!s.empty());
  if (r.max_tokens) check(*r.max_tokens >= 1 && *r.max_tokens <= l.max_tokens_cap);
  if (r.endpoint == llms::server::Endpoint::kCompletions) {
    check(!r.prompts.empty() && static_cast<int32_t>(r.prompts.size()) <= l.max_prompts);
    for (const auto& p : r.prompts) {
      if (p.is_ids) check_ids(p.ids);
    }
  } else {
    check(r.messages.is_array() && !r.messages.empty());
  }
  const auto& s = r.sampling;
  check(s.temperature >= 0.0f && s.temperature <= 2.0f);
  check(s.top_p > 0.0f && s.top_p <= 1.0f);
  check(s.min_p >= 0.0f && s.min_p <= 1.0f);
  check(s.presence_penalty >= -2.0f && s.presence_penalty <= 2.0f);
  check(s.frequency_penalty >= -2.0f && s.frequency_penalty <= 2.0f);
  check(s.repetition_penalty > 0.0f);
  check(s.n_top_logprobs >= 0 && s.n_top_logprobs <= l.max_top_logprobs);
  for (const auto& [token, bias] : s.logit_bias) {
    check(token >= 0 && token < kVocab);
    check(bias >= -100.0f && bias <= 100.0f);
  }
}

// Runs one field parser on a parsed body: a refusal must be a clean 4xx, naming the field when
// the body is an object (a body of another type is refused as a whole).
template <class Parse>
void parse_fields(const nlohmann::json& body, Parse&& parse) {
  try {
    parse();
  } catch (const ApiError& e) {
    check_refusal(e, /*names_a_field=*/body.is_object());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  std::string fast;
  llms::server::append_json_string(fast, text);
  check(fast == llms::server::dump_json(nlohmann::json(std::string(text))));

  nlohmann::json body;
  try {
    body = llms::server::parse_json_body(text);
  } catch (const ApiError& e) {
    check_refusal(e, /*names_a_field=*/false);
    return 0;
  }
  const llms::server::ParseLimits l = limits();
  parse_fields(body, [&] { check_accepted(llms::server::parse_completion_request(body, l)); });
  parse_fields(body, [&] { check_accepted(llms::server::parse_chat_request(body, l)); });
  parse_fields(body, [&] { (void)llms::server::parse_tokenize_request(body); });
  parse_fields(body, [&] { check_ids(llms::server::parse_detokenize_request(body, kVocab)); });
  return 0;
}
