#include "spec/draft_length_policy.h"

#include <algorithm>
#include <cmath>

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
  if (mean_.empty()) mean_.assign(static_cast<size_t>(kMaxTokens) + 1, -1.0);
  double& m = mean_[static_cast<size_t>(n_tokens)];
  m = m < 0.0 ? seconds : m * kForget + seconds * (1.0 - kForget);
  ++n_;
}

double StepCostModel::predict(int32_t n_tokens) const {
  const auto prior = [](double t) { return 1.0 + t / 32.0; };
  n_tokens = std::clamp(n_tokens, 1, kMaxTokens);
  if (n_ == 0) return prior(n_tokens);  // relative units until a step is measured
  if (mean_[static_cast<size_t>(n_tokens)] >= 0.0) return mean_[static_cast<size_t>(n_tokens)];
  int32_t below = n_tokens - 1;
  while (below >= 1 && mean_[static_cast<size_t>(below)] < 0.0) --below;
  int32_t above = n_tokens + 1;
  while (above <= kMaxTokens && mean_[static_cast<size_t>(above)] < 0.0) ++above;
  if (below >= 1 && above <= kMaxTokens) {
    const double lo = mean_[static_cast<size_t>(below)];
    const double hi = mean_[static_cast<size_t>(above)];
    return lo + (hi - lo) * (n_tokens - below) / static_cast<double>(above - below);
  }
  // Outside the measured sizes, guess low, so the size gets tried and measured: above them the
  // memory-bound shape, below them a cost proportional to the tokens (a guess too high would
  // never be corrected, since a size predicted too costly is never run).
  if (below >= 1) {
    return mean_[static_cast<size_t>(below)] * prior(n_tokens) / prior(below);
  }
  return mean_[static_cast<size_t>(above)] * n_tokens / static_cast<double>(above);
}

DraftLengthPolicy::DraftLengthPolicy(const SpeculativeConfig& config, bool drafting_costs)
    : config_(config), drafting_costs_(drafting_costs) {}

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

int32_t DraftLengthPolicy::choose(std::span<const int64_t> decoding) const {
  const int32_t k_max = config_.num_speculative_tokens;
  const auto n_seqs = static_cast<int32_t>(decoding.size());
  if (!config_.enabled() || n_seqs == 0) return 0;
  if (config_.disable_by_batch_size > 0 && n_seqs > config_.disable_by_batch_size) return 0;
  if (config_.fixed_length) return k_max;
  const auto rate = [&](int32_t k) {
    double tokens = 0.0;
    for (int64_t seq_id : decoding) {
      const double alpha = std::min(acceptance(seq_id), 0.999);
      tokens += (1.0 - std::pow(alpha, k + 1)) / (1.0 - alpha);
    }
    double cost = target_.predict(n_seqs * (1 + k));
    if (drafting_costs_ && k > 0) {
      // Before the draft's first pass is timed, take it as a third of a target step.
      const double pass = draft_.n_observations() > 0 ? draft_.predict(n_seqs)
                                                      : target_.predict(n_seqs) / 3.0;
      cost += k * pass;
    }
    return tokens / cost;
  };
  int32_t best_k = 0;
  double best_rate = rate(0);
  for (int32_t k = 1; k <= k_max; ++k) {
    // A longer draft must win by a margin: the costs are estimates, and a draft that only ties
    // spends its proposals for nothing.
    const double r = rate(k);
    if (r > best_rate * 1.02) {
      best_rate = r;
      best_k = k;
    }
  }
  return best_k;
}

}  // namespace llms::spec
