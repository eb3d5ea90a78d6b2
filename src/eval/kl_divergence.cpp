// eval/kl_divergence: see kl_divergence.h.
#include "eval/kl_divergence.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace llms::eval {

void KlDivergence::add(std::span<const float> base_log_probs, std::span<const float> log_probs,
                       int32_t base_top) {
  if (base_log_probs.size() != log_probs.size() || log_probs.empty()) {
    throw Error(Error::Kind::kInvalidArgument, "KL-divergence: rows of different sizes");
  }
  double kl = 0.0;
  size_t base_first_top = 0;
  size_t top = 0;
  for (size_t i = 0; i < log_probs.size(); ++i) {
    const double lp = base_log_probs[i];
    kl += std::exp(lp) * (lp - static_cast<double>(log_probs[i]));
    if (base_log_probs[i] > base_log_probs[base_first_top]) base_first_top = i;
    if (log_probs[i] > log_probs[top]) top = i;
  }
  // Rounding (the base row is stored in f16) can leave a tiny negative sum for equal rows.
  per_row_.push_back(std::max(0.0, kl));
  const size_t top_of_base = base_top >= 0 ? static_cast<size_t>(base_top) : base_first_top;
  same_top_ += top_of_base == top ? 1 : 0;
}

KlDivergenceSummary KlDivergence::summary() const {
  KlDivergenceSummary s;
  s.n_rows = static_cast<int64_t>(per_row_.size());
  if (per_row_.empty()) return s;
  std::vector<double> sorted = per_row_;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0.0;
  for (const double v : sorted) sum += v;
  const auto n = static_cast<double>(sorted.size());
  s.mean = sum / n;
  auto at = [&](double q) {
    return sorted[std::min(sorted.size() - 1, static_cast<size_t>(q * (n - 1.0) + 0.5))];
  };
  s.median = at(0.5);
  s.p99 = at(0.99);
  s.max = sorted.back();
  s.same_top = static_cast<double>(same_top_) / n;
  return s;
}

}  // namespace llms::eval
