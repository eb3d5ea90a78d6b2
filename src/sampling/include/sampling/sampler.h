// sampling/sampler: turns one row of logits into the next token, per request.
//
// The chain, in order: repetition penalty (prompt and output tokens), presence and frequency
// penalties (output tokens), logit bias, then temperature; temperature 0 is greedy (argmax, the
// lowest id on a tie). Then top-k, top-p (nucleus) and min-p filter the distribution and a draw
// from the request's own generator picks the token: the same seed and the same logits give the
// same tokens. Logprobs are those of the model's raw distribution (log-softmax of the logits
// before any stage), as vLLM reports them.
//
// For speculative decoding the chain's result is also exposed as a Distribution (the candidates
// that survive it and their normalized probabilities), so a verifier can accept or reject a
// drafted token against exactly what sample() would have drawn from; accept() is called only for
// tokens that are kept, so the penalties see the output and nothing else.
//
// A constraint (sampling/token_constraint.h) masks every row first, before the penalties; a row
// it leaves without any token throws ConstraintDeadEnd.
//
// A Sampler owns scratch space sized for the vocabulary at construction; sample() allocates
// nothing except the returned top-logprob list when asked for one.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "sampling/token_constraint.h"

namespace llms::sampling {

struct SamplingParams {
  float temperature = 1.0f;         // 0: greedy
  int32_t top_k = 0;                // 0 or negative: off
  float top_p = 1.0f;               // (0, 1]
  float min_p = 0.0f;               // [0, 1]
  float repetition_penalty = 1.0f;  // > 0; 1: off
  float presence_penalty = 0.0f;    // [-2, 2]
  float frequency_penalty = 0.0f;   // [-2, 2]
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::optional<uint64_t> seed;  // none: a random seed
  int32_t n_top_logprobs = 0;    // how many alternatives to report (0..20)
  bool logprobs = false;         // report the chosen token's logprob

  // Throws llms::Error(kInvalidArgument) naming the parameter that is out of range.
  void validate(int32_t n_vocab) const;
};

struct TokenLogprob {
  int32_t token;
  float logprob;
};

struct SampleResult {
  int32_t token = -1;
  float logprob = 0.0f;                    // of the chosen token, when asked
  std::vector<TokenLogprob> top_logprobs;  // best first, when asked
};

// The processed distribution of one logits row: candidate ids and probabilities summing to 1
// (up to rounding). Greedy (temperature 0): the argmax alone, with probability 1.
struct Distribution {
  std::vector<int32_t> ids;
  std::vector<float> probs;
  // 0 for an id that is not a candidate (a linear scan: candidate lists are short or rare).
  float prob_of(int32_t id) const;
  void clear() {
    ids.clear();
    probs.clear();
  }
};

// The index of the greatest value, the lowest index among equal ones (std::max_element's
// answer for inputs without NaN), with 16 SSE2 lanes in one pass: greedy decode takes one per
// sequence per step over the whole vocabulary. -1 for an empty span.
int32_t argmax(std::span<const float> values);

class Sampler {
 public:
  Sampler(const SamplingParams& params, int32_t n_vocab);

  // Tokens of the prompt, for the repetition penalty.
  void set_prompt(std::span<const int32_t> prompt);
  // Records a generated token, for the penalties (and moves the constraint past it).
  void accept(int32_t token);
  // Structured output: every row is masked by `constraint` from now on (null: none).
  void set_constraint(std::unique_ptr<TokenConstraint> constraint) {
    constraint_ = std::move(constraint);
  }
  bool constrained() const { return constraint_ != nullptr; }

  // Samples from `logits` (n_vocab values; modified in place by the chain).
  SampleResult sample(std::span<float> logits);

  // The distribution sample() draws from, for the current penalty state (`logits` is modified
  // in place, as by sample()).
  void distribution(std::span<float> logits, Distribution& out);
  // A draw from `dist` with this sampler's generator; -1 when it is empty.
  int32_t draw_from(const Distribution& dist);
  // A uniform draw in [0, 1) from this sampler's generator.
  double uniform01();
  // The logprob of `token` (and the top alternatives when asked) in the raw row, as sample()
  // reports them.
  void fill_logprobs(std::span<const float> raw, SampleResult& result, int32_t chosen);
  bool is_greedy() const { return params_.temperature == 0.0f; }
  bool wants_logprobs() const { return params_.logprobs || params_.n_top_logprobs > 0; }

  const SamplingParams& params() const { return params_; }

 private:
  void apply_penalties(std::span<float> logits) const;
  // The constraint's mask, when there is one; throws ConstraintDeadEnd when it allows nothing.
  void apply_constraint(std::span<float> logits);
  int32_t draw(std::span<float> logits);
  // The non-greedy chain after the penalties: leaves the candidates in order_[0, n) with their
  // unnormalized probabilities in probs_ and returns n; `total` gets their sum.
  size_t candidates(std::span<const float> logits, double& total);

  SamplingParams params_;
  int32_t n_vocab_;
  std::mt19937_64 rng_;
  std::vector<uint8_t> in_prompt_;  // per token id: appears in the prompt
  std::vector<int32_t> out_count_;  // per token id: times generated
  std::vector<int32_t> seen_;  // ids with in_prompt_ or out_count_ set (penalties visit only these)
  std::vector<int32_t> order_;         // scratch: candidate ids
  std::vector<float> probs_;           // scratch: candidate probabilities
  std::vector<float> raw_;             // scratch: logits before the chain
  std::vector<size_t> nucleus_index_;  // scratch for top-p
  std::vector<int32_t> reorder_ids_;
  std::vector<float> reorder_probs_;
  std::unique_ptr<TokenConstraint> constraint_;
};

}  // namespace llms::sampling
