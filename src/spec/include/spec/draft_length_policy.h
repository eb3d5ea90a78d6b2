// spec/draft_length_policy: how many tokens to draft this step, from measured costs and
// measured acceptance (load-adaptive speculation).
//
// Speculation pays when a verification pass of 1 + k tokens per sequence costs little more than
// a plain decode step (memory-bound: the weights are read once either way) and enough drafts are
// kept. Neither is fixed: a step's cost grows with its tokens as the batch becomes compute-bound,
// and acceptance depends on the text. So both are measured:
// - step cost: t(T) seconds for a target step of T tokens, a running mean per step size, read
//   between measured sizes by linear interpolation (the cost is flat while the weights' reads
//   dominate and grows with T once arithmetic does, so no single line fits both a 74-token
//   prefill and a 5-token verification); outside the measured sizes it guesses low (above them
//   the memory-bound shape 1 + T / 32, below them proportional to T), so that an unmeasured size
//   gets tried and measured rather than ruled out by a guess. Likewise the draft's pass cost d(T).
// - acceptance: the chance that a draft at a reached position is kept (alpha), counted over all
//   recent verifications (the global rate, starting at 0.7) and per sequence, where the global
//   rate stands in for 4 drafts of evidence, so one early rejection does not stop a sequence from
//   speculating; counts decay, and a sequence that does not speculate drifts back to the global
//   rate.
// With B sequences decoding this step, k drafts each, the expected tokens of sequence s are
// (1 - alpha_s^(k+1)) / (1 - alpha_s) (geometric acceptance), so the step's rate is
//   sum_s E_s(k) / (t(B (1 + k)) + k d(B)),
// and the policy takes the k in [0, k_max] that maximises it (0 = no speculation: at high
// concurrency the step is compute-bound and every draft costs a full token). A fixed limit
// (disable_by_batch_size) and a fixed length (tests) are available too.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "spec/speculative_config.h"

namespace llms::spec {

// Seconds per step by step size (tokens): a running mean per size up to kMaxTokens, linear
// interpolation between measured sizes, optimistic guesses outside them.
class StepCostModel {
 public:
  static constexpr int32_t kMaxTokens = 4096;
  void observe(int32_t n_tokens, double seconds);
  double predict(int32_t n_tokens) const;
  int64_t n_observations() const { return n_; }

 private:
  std::vector<double> mean_;  // by size; < 0: not measured
  int64_t n_ = 0;
};

class DraftLengthPolicy {
 public:
  // drafting_costs: the proposer runs a model (a draft), so each draft position costs a pass.
  DraftLengthPolicy(const SpeculativeConfig& config, bool drafting_costs);

  void observe_target_step(int32_t n_tokens, double seconds) { target_.observe(n_tokens, seconds); }
  void observe_draft_pass(int32_t n_tokens, double seconds) { draft_.observe(n_tokens, seconds); }
  void observe_verification(int64_t seq_id, int32_t n_drafted, int32_t n_accepted);
  // These sequences decoded without drafts this step: their acceptance estimates drift back
  // toward the prior, so a sequence that once drafted badly is probed again later (its text may
  // have turned repetitive) instead of never speculating again.
  void observe_no_drafts(std::span<const int64_t> decoding);
  void remove(int64_t seq_id) { acceptance_.erase(seq_id); }

  // The draft length for this step, when these sequences decode in it.
  int32_t choose(std::span<const int64_t> decoding) const;

  double acceptance(int64_t seq_id) const;

 private:
  struct Acceptance {
    double kept = 0.0;
    double rejected = 0.0;
  };

  SpeculativeConfig config_;
  bool drafting_costs_;
  StepCostModel target_;
  StepCostModel draft_;
  Acceptance global_{2.8, 1.2};  // 0.7 until measured
  std::unordered_map<int64_t, Acceptance> acceptance_;
};

}  // namespace llms::spec
