#include "spec/draft_length_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace llms::spec {

namespace {

// A size's running mean keeps this much of its past per new step of that size.
constexpr double kForget = 0.8;
// A sequence's acceptance counts keep this much per verification, so its rate follows its text;
// the global counts change more slowly; a sequence that does not speculate loses 3 % of its
// evidence a step, drifting back to the global rate.
constexpr double kAcceptanceDecay = 0.9;
constexpr double kGlobalDecay = 0.99;
constexpr double kIdleDecay = 0.97;
// How many drafts of evidence the global rate counts for in a sequence's estimate.
constexpr double kPriorTrials = 4.0;

}  // namespace

void StepCostModel::observe(int32_t n_tokens, double seconds) {
  if (!(seconds >= 0.0) || !std::isfinite(seconds) || n_tokens < 1 || n_tokens > kMaxTokens) {
    return;
  }
  if (mean_.empty()) {
    mean_.assign(static_cast<size_t>(kMaxTokens) + 1, -1.0);
    seen_at_.assign(static_cast<size_t>(kMaxTokens) + 1, 0);
  }
  const auto update = [](double& m, double x) {
    m = m < 0.0 ? x : m * kForget + x * (1.0 - kForget);
  };
  update(mean_[static_cast<size_t>(n_tokens)], seconds);
  if (n_tokens <= kFloorTokens) update(floor_, seconds);
  if (n_tokens >= kSlopeTokens) update(slope_, seconds / n_tokens);
  ++n_;
  seen_at_[static_cast<size_t>(n_tokens)] = n_;
}

int64_t StepCostModel::observations_since(int32_t n_tokens) const {
  if (n_tokens < 1 || n_tokens > kMaxTokens || seen_at_.empty() ||
      seen_at_[static_cast<size_t>(n_tokens)] == 0) {
    return std::numeric_limits<int64_t>::max();
  }
  return n_ - seen_at_[static_cast<size_t>(n_tokens)];
}

double StepCostModel::predict(int32_t n_tokens) const {
  n_tokens = std::clamp(n_tokens, 1, kMaxTokens);
  if (n_ == 0) return std::max(kPriorKnee, static_cast<double>(n_tokens));  // relative units
  if (mean_[static_cast<size_t>(n_tokens)] >= 0.0) return mean_[static_cast<size_t>(n_tokens)];
  double a = floor_;
  double b = slope_;
  if (a < 0.0 && b < 0.0) {
    // Only middle sizes seen: the roofline through the nearest one, knee at the prior's.
    int32_t near = 1;
    for (int32_t d = 1; d <= kMaxTokens; ++d) {
      if (n_tokens - d >= 1 && mean_[static_cast<size_t>(n_tokens - d)] >= 0.0) {
        near = n_tokens - d;
        break;
      }
      if (n_tokens + d <= kMaxTokens && mean_[static_cast<size_t>(n_tokens + d)] >= 0.0) {
        near = n_tokens + d;
        break;
      }
    }
    b = mean_[static_cast<size_t>(near)] / std::max(kPriorKnee, static_cast<double>(near));
    a = b * kPriorKnee;
  } else if (a < 0.0) {
    a = b * kPriorKnee;
  } else if (b < 0.0) {
    b = a / kPriorKnee;
  }
  const double roofline = std::max(a, b * n_tokens);
  // A step costs at least what a smaller one measured, and among small steps (below the
  // slope's sizes) at least the chord between the measured sizes either side: where the cost
  // jumps (a CPU's GEMM padded past one token) the roofline alone would call every unmeasured
  // size cheap and the policy would pay a slow probe for each of them.
  int32_t below = n_tokens - 1;
  while (below >= 1 && mean_[static_cast<size_t>(below)] < 0.0) --below;
  if (below < 1) return roofline;
  const double at_below = mean_[static_cast<size_t>(below)];
  int32_t above = n_tokens + 1;
  while (above < kSlopeTokens && mean_[static_cast<size_t>(above)] < 0.0) ++above;
  if (above >= kSlopeTokens) {
    // Past the largest measured small size: at least that size's cost plus b for each extra
    // token. On a CPU the arithmetic of a step's extra tokens does not hide under its weight
    // reads (Zen 4, 1.5B Q4_K_M: 1 / 4 / 8 tokens 27-31 / 35-38 / 47-59 ms, b = 2.7 ms from
    // prompt chunks); at_below alone priced a 4-sequence step with one draft each (8 tokens) as
    // a plain 4-token one. (Small steps only: a prompt chunk's own mean t / T is b.)
    const double marginal =
        slope_ > 0.0 && n_tokens < kSlopeTokens ? at_below + slope_ * (n_tokens - below) : at_below;
    return std::max(roofline, marginal);
  }
  const double at_above = mean_[static_cast<size_t>(above)];
  const double chord =
      at_below + (at_above - at_below) * (n_tokens - below) / static_cast<double>(above - below);
  return std::max({roofline, at_below, chord});
}

DraftLengthPolicy::DraftLengthPolicy(const SpeculativeConfig& config, bool drafting_costs)
    : config_(config), drafting_costs_(drafting_costs) {}

void DraftLengthPolicy::observe_target_step(int32_t n_tokens, double seconds) {
  if (!target_warm_) {
    target_warm_ = true;
    return;
  }
  target_.observe(n_tokens, seconds);
}

void DraftLengthPolicy::observe_draft_pass(int32_t n_tokens, double seconds) {
  if (!draft_warm_) {
    draft_warm_ = true;
    return;
  }
  draft_.observe(n_tokens, seconds);
}

void DraftLengthPolicy::observe_verification(int64_t seq_id, int32_t n_drafted,
                                             int32_t n_accepted) {
  if (n_drafted <= 0) return;
  const double rejected = n_accepted < n_drafted ? 1.0 : 0.0;
  Acceptance& a = acceptance_[seq_id];
  a.kept = a.kept * kAcceptanceDecay + n_accepted;
  a.rejected = a.rejected * kAcceptanceDecay + rejected;
  global_.kept = global_.kept * kGlobalDecay + n_accepted;
  global_.rejected = global_.rejected * kGlobalDecay + rejected;
}

void DraftLengthPolicy::observe_no_drafts(std::span<const int64_t> decoding) {
  for (int64_t seq_id : decoding) {
    auto it = acceptance_.find(seq_id);
    if (it == acceptance_.end()) continue;
    it->second.kept *= kIdleDecay;
    it->second.rejected *= kIdleDecay;
  }
}

double DraftLengthPolicy::acceptance(int64_t seq_id) const {
  const double global = global_.kept / (global_.kept + global_.rejected);
  auto it = acceptance_.find(seq_id);
  const Acceptance a = it == acceptance_.end() ? Acceptance{} : it->second;
  return (a.kept + kPriorTrials * global) / (a.kept + a.rejected + kPriorTrials);
}

int32_t DraftLengthPolicy::choose(std::span<const int64_t> decoding, int32_t n_other_tokens,
                                  std::span<const Outlook> outlook) const {
  const int32_t k_max = config_.num_speculative_tokens;
  const auto n_seqs = static_cast<int32_t>(decoding.size());
  if (!config_.enabled() || n_seqs == 0) return 0;
  if (config_.disable_by_batch_size > 0 && n_seqs > config_.disable_by_batch_size) return 0;
  if (config_.fixed_length) return k_max;
  const int32_t others = std::max(n_other_tokens, 0);
  // Measure the plain decode step of this batch size before comparing against a guess of it
  // (header comment). Steps with prompt chunks vary in size too much to probe each one; the
  // roofline's slope, from prompt chunks, is measured there.
  if (others == 0 && target_.observations_since(n_seqs) > kReprobeSteps) return 0;
  // Before the draft's passes are timed, take one as a third of a target step.
  const auto draft_pass = [&](int32_t n_tokens) {
    return draft_.n_observations() > 0 ? draft_.predict(n_tokens) : target_.predict(n_tokens) / 3.0;
  };
  // Catch-up beyond what a drafting step computes anyway (the accepted tokens and the bonus),
  // per token at the size of the whole catch-up pass.
  const bool with_outlook = drafting_costs_ && outlook.size() == decoding.size();
  const auto behind = [&](const Outlook& o) { return std::max<int64_t>(o.backlog - 1 - k_max, 0); };
  int64_t total_backlog = 0;
  if (with_outlook) {
    for (const Outlook& o : outlook) total_backlog += behind(o);
  }
  const auto catch_up_pass =
      static_cast<int32_t>(std::min<int64_t>(total_backlog, StepCostModel::kMaxTokens));
  const double catch_up_per_token =
      total_backlog > 0 ? draft_pass(catch_up_pass) / catch_up_pass : 0.0;
  const auto rate = [&](int32_t k) {
    double tokens = others;
    double catch_up = 0.0;  // the step's share of the sequences' catch-up, seconds
    for (size_t i = 0; i < decoding.size(); ++i) {
      const double alpha = std::min(acceptance(decoding[i]), 0.999);
      const double expected = (1.0 - std::pow(alpha, k + 1)) / (1.0 - alpha);
      tokens += expected;
      if (k > 0 && total_backlog > 0) {
        const Outlook& o = outlook[i];
        // Paid back within half the tokens left: the catch-up is a sure cost, the gain an
        // estimate (4 sequences on the 1.5B: with the whole remainder, noisy step times still
        // started drafting in 2 runs of 4 and lost 0.17-0.22 of the throughput).
        catch_up += static_cast<double>(behind(o)) * catch_up_per_token * expected /
                    (0.5 * static_cast<double>(std::max<int64_t>(o.remaining, 1)));
      }
    }
    double cost = target_.predict(others + n_seqs * (1 + k)) + catch_up;
    if (drafting_costs_ && k > 0) cost += k * draft_pass(n_seqs);
    return tokens / cost;
  };
  // A longer draft must beat a shorter one by 2 %, and speculating at all must beat not
  // speculating by 10 %: the costs are estimates (a step's cost moves by several per cent from
  // one to the next, and sizes between measured ones are interpolated), and a draft that only
  // ties spends its proposals for nothing. Near the point where steps turn compute-bound the
  // predicted gain is small, so this keeps batched throughput from paying for a guess.
  int32_t best_k = 0;
  double best_rate = 0.0;
  for (int32_t k = 1; k <= k_max; ++k) {
    const double r = rate(k);
    if (best_k == 0 || r > best_rate * 1.02) {
      best_rate = r;
      best_k = k;
    }
  }
  return best_rate > rate(0) * 1.10 ? best_k : 0;
}

}  // namespace llms::spec
