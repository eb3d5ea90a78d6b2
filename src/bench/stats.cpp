// bench/stats: linear-interpolation percentiles (see stats.h for the exact definition).
#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace llms::bench {

double percentile_sorted(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return std::numeric_limits<double>::quiet_NaN();
  p = std::clamp(p, 0.0, 100.0);
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + frac * (sorted[hi] - sorted[lo]);
}

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return percentile_sorted(values, p);
}

Dist summarize(std::vector<double> values) {
  Dist d;
  d.n = values.size();
  if (values.empty()) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    d.mean = d.stddev = d.min = d.median = d.p90 = d.p95 = d.p99 = d.max = nan;
    return d;
  }
  std::sort(values.begin(), values.end());
  const double n = static_cast<double>(values.size());
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / n;
  double sq = 0;
  for (double v : values) sq += (v - d.mean) * (v - d.mean);
  d.stddev = std::sqrt(sq / n);
  d.min = values.front();
  d.max = values.back();
  d.median = percentile_sorted(values, 50);
  d.p90 = percentile_sorted(values, 90);
  d.p95 = percentile_sorted(values, 95);
  d.p99 = percentile_sorted(values, 99);
  return d;
}

}  // namespace llms::bench
