// bench/stats: percentiles and distribution summaries of latency samples.
//
// Percentiles use linear interpolation between closest ranks (numpy's default, so numbers agree
// with vLLM's benchmark scripts): for sorted x[0..n-1] and p in [0, 100], rank = p/100 * (n-1),
// result = x[floor(rank)] + frac(rank) * (x[floor(rank)+1] - x[floor(rank)]). An empty sample has
// no percentiles: Dist::n == 0 and every statistic is NaN (rendered as "-" / null).
#pragma once

#include <cstddef>
#include <vector>

namespace llms::bench {

// The p-th percentile (0 <= p <= 100) of an ascending-sorted sample; NaN when empty.
double percentile_sorted(const std::vector<double>& sorted, double p);

// Same, sorting a copy first.
double percentile(std::vector<double> values, double p);

struct Dist {
  size_t n = 0;
  double mean = 0;
  double stddev = 0;  // population standard deviation
  double min = 0;
  double median = 0;
  double p90 = 0;
  double p95 = 0;
  double p99 = 0;
  double max = 0;
};

// Summary of a sample (order irrelevant). All fields NaN except n when the sample is empty.
Dist summarize(std::vector<double> values);

}  // namespace llms::bench
