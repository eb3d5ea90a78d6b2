// bench/dataset: the prompts a benchmark sends.
//
// Three sources: random prompts of given token lengths, shared-prefix prompts (groups of questions
// that share one long prefix, to exercise prefix caching), and JSONL files of prompts or chat
// messages. Lengths are token-exact when a TokenCounter is given (the server's POST /tokenize):
// each prompt is grown word by word from a built-in word list until the counter reports the target
// (counts include whatever special tokens the server adds, so they match usage.prompt_tokens).
// Without a counter, one word is taken as one token, which is only approximate; Dataset says which.
// Everything depends only on the seed.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace llms::bench {

struct Prompt {
  std::string text;           // completion prompt; empty when `messages` is used
  nlohmann::json messages;    // chat messages (array), or null
  int64_t input_tokens = -1;  // token count known when built, -1 when unknown
  int64_t max_tokens = -1;    // output length to ask for, -1: the server's default
  bool is_chat() const { return messages.is_array(); }
};

struct Dataset {
  std::string kind;           // "random", "shared-prefix", "jsonl"
  std::string length_source;  // how input lengths were obtained (printed and stored in --json)
  bool token_exact = false;   // every prompt's input_tokens is the server's exact count
  std::vector<Prompt> prompts;
};

// Token count of a text as the server tokenizes a completion prompt; nullopt when it cannot tell.
using TokenCounter = std::function<std::optional<int64_t>(const std::string&)>;

// Lengths drawn uniformly from [round(mean*(1-range)), round(mean*(1+range))], at least 1.
struct LengthSpec {
  int64_t mean = 0;
  double range_ratio = 0;
};

struct RandomSpec {
  size_t n_prompts = 100;
  LengthSpec input{512, 0};
  LengthSpec output{128, 0};
  uint64_t seed = 0;
};

struct SharedPrefixSpec {
  size_t n_groups = 4;
  size_t n_questions = 8;  // per group
  int64_t prefix_tokens = 1024;
  int64_t question_tokens = 64;
  int64_t output_tokens = 128;
  uint64_t seed = 0;
};

// `counter` may be empty (approximate lengths). `counter_name` says where counts come from.
Dataset make_random_dataset(const RandomSpec& spec, const TokenCounter& counter,
                            std::string_view counter_name);

// Prompts are prefix + "\n" + question; groups interleave in a seeded shuffle.
Dataset make_shared_prefix_dataset(const SharedPrefixSpec& spec, const TokenCounter& counter,
                                   std::string_view counter_name);

// One JSON object per line: {"prompt": "..."} or {"messages": [...]} (also "text" for prompt),
// optional "max_tokens" (or "output_len"); blank lines are skipped. `default_max_tokens` applies
// when a line names none (-1: leave it to the server). Throws llms::Error naming file and line.
Dataset load_jsonl_dataset(const std::string& path, int64_t default_max_tokens);
Dataset parse_jsonl_dataset(std::string_view text, std::string_view name,
                            int64_t default_max_tokens);

// Appends random words to `base` (seeded by `rng_state`) until `counter(base)` == target tokens;
// returns the text and its count (the closest reached if the target cannot be hit exactly). With
// an empty counter, appends target - base_tokens words. Exposed for tests.
struct GrownText {
  std::string text;
  int64_t tokens = 0;
  bool exact = false;
  int n_counter_calls = 0;
};
GrownText grow_to_tokens(const std::string& base, int64_t target, uint64_t& rng_state,
                         const TokenCounter& counter);

// The built-in word list (common English words that are one token in typical BPE vocabularies).
const std::vector<std::string_view>& word_list();

}  // namespace llms::bench
