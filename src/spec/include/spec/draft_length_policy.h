// spec/draft_length_policy: how many tokens to draft this step, from measured costs and
// measured acceptance (load-adaptive speculation).
//
// Speculation pays when a verification pass of 1 + k tokens per sequence costs little more than
// a plain decode step (memory-bound: the weights are read once either way) and enough drafts are
// kept. Neither is fixed: a step's cost grows with its tokens as the batch becomes compute-bound,
// and acceptance depends on the text. So both are measured:
// - step cost: t(T) seconds for a target step of T tokens. A size seen before predicts its running
//   mean. Any other size comes from a roofline fitted to the steps seen: t(T) = max(a, b T),
//   where a, the floor of reading the weights once, is the running mean of the smallest steps
//   (at most kFloorTokens tokens) and b, the arithmetic per token, the running mean of t / T over
//   steps of at least kSlopeTokens tokens (prompt chunks); until one of the two is measured it is
//   taken as the other times (or over) kPriorKnee, a knee at 8 tokens. A step of a few tokens then
//   costs what one token does, and one past the knee grows with its tokens, as on a CPU where a
//   decode step reads the weights once and a prompt chunk is bound by arithmetic. An unmeasured
//   size is never predicted below a smaller measured one, nor, among small steps, below the chord
//   between the measured sizes either side (costs that jump, as on a CPU whose 2-token step is
//   4x its 1-token one), nor, past the largest measured small size, below that size's cost plus
//   b per extra token (on a CPU a small step's extra arithmetic adds to its weight reads).
//   Likewise the draft's pass cost d(T).
// - acceptance: the chance that a draft at a reached position is kept (alpha), counted over all
//   recent verifications (the global rate, starting at 0.7) and per sequence, where the global
//   rate stands in for 4 drafts of evidence, so one early rejection does not stop a sequence from
//   speculating; counts decay, and a sequence that does not speculate drifts back to the global
//   rate.
// With B sequences decoding this step, k drafts each, and P other tokens in the step (prompt
// chunks), the expected tokens of sequence s are (1 - alpha_s^(k+1)) / (1 - alpha_s) (geometric
// acceptance), so the step's rate, a prompt token counting as much as a generated one, is
//   (sum_s E_s(k) + P) / (t(P + B (1 + k)) + k d(B)),
// and the policy takes the k in [1, k_max] that maximises it, if it beats k = 0 by 10 % (0 = no
// speculation: at high concurrency the step is compute-bound and every draft costs a full token).
// A draft model that is behind a sequence (its first drafts: the whole prompt) computes the
// missing tokens first; that catch-up is paid once and pays off over the tokens the sequence has
// left, so each sequence's share of the step's expected tokens carries its catch-up cost spread
// over half its remaining tokens (a sure cost against an estimated gain). A 1,500-token prompt
// with 8 tokens to generate never starts drafting; 4 sequences of 64-token prompts and 64 tokens
// each on the 1.5B had started, paid 0.75 s of catch-up, found the verification dearer than a
// plain step and stopped: 0.78x of plain.
// What k = 0 costs is measured, never guessed: when no step of B tokens was timed (or none for
// kReprobeSteps steps), a decode-only step of B sequences runs without drafts once. A guess can be
// far off either way, and one too high keeps a policy drafting forever, since it never runs the
// plain step that would correct it (an AVX2 CPU, where 2-7 token steps cost 4x a one-token step,
// saw speculation at 0.72x of plain that way). A fixed limit (disable_by_batch_size) and a fixed
// length (tests) are available too.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "spec/speculative_config.h"

namespace llms::spec {

// Seconds per step by step size (tokens): the running mean of each size seen, and a roofline
// max(a, b T) fitted to them for the others.
class StepCostModel {
 public:
  static constexpr int32_t kMaxTokens = 4096;
  // Steps this small measure the floor a. Only one-token steps: on a CPU without VNNI a step of
  // 2 tokens already runs the GEMM, padded to a group of 8 activation rows, and costs 3-4x a
  // one-token step (1.5B on an AVX2 EPYC: 39 ms vs 145 ms), so it is no floor.
  static constexpr int32_t kFloorTokens = 1;
  static constexpr int32_t kSlopeTokens = 64;  // steps this large measure the slope b
  static constexpr double kPriorKnee = 8.0;    // a = b kPriorKnee until both are measured
  void observe(int32_t n_tokens, double seconds);
  double predict(int32_t n_tokens) const;
  int64_t n_observations() const { return n_; }
  // Observations of any size since the last one of this size (the int64_t maximum if never).
  int64_t observations_since(int32_t n_tokens) const;

 private:
  std::vector<double> mean_;      // by size; < 0: not measured
  std::vector<int64_t> seen_at_;  // by size: n_ after its last observation; 0: never
  double floor_ = -1.0;           // a; < 0: not measured
  double slope_ = -1.0;           // b; < 0: not measured
  int64_t n_ = 0;
};

class DraftLengthPolicy {
 public:
  // Target steps after which a decode-only batch size's plain step is measured again.
  static constexpr int64_t kReprobeSteps = 200;

  // drafting_costs: the proposer runs a model (a draft), so each draft position costs a pass.
  DraftLengthPolicy(const SpeculativeConfig& config, bool drafting_costs);

  // Step and pass times. The first of each is not learned: a process's first forward pass pays
  // page faults on the mapped weights and cold caches (a 30-token prompt timed at 1 s where
  // later steps of 7 tokens take 25 ms), and a size's mean, or a chord through it, would carry
  // that until the size came up again, which a policy that stops drafting never lets happen.
  void observe_target_step(int32_t n_tokens, double seconds);
  void observe_draft_pass(int32_t n_tokens, double seconds);
  void observe_verification(int64_t seq_id, int32_t n_drafted, int32_t n_accepted);
  // These sequences decoded without drafts this step: their acceptance estimates drift back
  // toward the prior, so a sequence that once drafted badly is probed again later (its text may
  // have turned repetitive) instead of never speculating again.
  void observe_no_drafts(std::span<const int64_t> decoding);
  void remove(int64_t seq_id) { acceptance_.erase(seq_id); }

  // Per decoding sequence: the tokens the proposer would compute before drafting for it
  // (Proposer::backlog) and the tokens it may still generate.
  struct Outlook {
    int64_t backlog = 0;
    int64_t remaining = 0;
  };
  // The draft length for the next step, when these sequences decode in it beside about
  // n_other_tokens other tokens (prompt chunks); outlook is empty or one entry per sequence.
  int32_t choose(std::span<const int64_t> decoding, int32_t n_other_tokens = 0,
                 std::span<const Outlook> outlook = {}) const;

  double acceptance(int64_t seq_id) const;

 private:
  struct Acceptance {
    double kept = 0.0;
    double rejected = 0.0;
  };

  SpeculativeConfig config_;
  bool drafting_costs_;
  bool target_warm_ = false;  // the first target step has run (and was not learned)
  bool draft_warm_ = false;
  StepCostModel target_;
  StepCostModel draft_;
  Acceptance global_{2.8, 1.2};  // 0.7 until measured
  std::unordered_map<int64_t, Acceptance> acceptance_;
};

}  // namespace llms::spec
