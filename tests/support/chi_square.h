// tests/support/chi_square: Pearson's chi-square goodness-of-fit test for the statistical tests
// of samplers and speculative verification (header only, no gtest dependency).
//
// chi_square() merges the cells whose expected count is below 5 (the usual validity rule) into
// one cell, or into the smallest regular cell when even the merged cell stays below 5, and
// returns the statistic with its degrees of freedom (cells - 1). The critical value is the
// p = 0.001 upper quantile by the Wilson-Hilferty approximation: (X / df)^(1/3) is close to
// normal with mean 1 - 2 / (9 df) and variance 2 / (9 df), so the quantile is
// df * (1 - 2 / (9 df) + z sqrt(2 / (9 df)))^3 with z = 3.0902 (the standard normal's 0.999
// quantile); within about 1 % of the exact value for df >= 3 (df 4: 18.50 vs 18.47, df 9: 27.90
// vs 27.88) and slightly above it for df 1-2 (df 1: 11.0 vs 10.83). A correct sampler fails such
// a test once in about a thousand seeds; the tests use fixed seeds, so a pass is reproducible.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

namespace llms::testing {

inline double chi_square_critical_p001(int df) {
  const double z = 3.090232306;
  const double v = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - v + z * std::sqrt(v), 3.0);
}

struct ChiSquare {
  double statistic = 0;
  int df = 0;
  double merged_observed = 0;  // what fell in the cells merged for their small expectation
  double merged_expected = 0;
  bool passes() const { return df >= 1 && statistic < chi_square_critical_p001(df); }
};

inline ChiSquare chi_square(std::span<const double> observed, std::span<const double> expected) {
  std::vector<double> obs, exp;
  ChiSquare r;
  for (size_t i = 0; i < observed.size(); ++i) {
    if (expected[i] < 5.0) {
      r.merged_observed += observed[i];
      r.merged_expected += expected[i];
    } else {
      obs.push_back(observed[i]);
      exp.push_back(expected[i]);
    }
  }
  if (r.merged_expected >= 5.0) {
    obs.push_back(r.merged_observed);
    exp.push_back(r.merged_expected);
  } else if (!exp.empty() && (r.merged_expected > 0 || r.merged_observed > 0)) {
    const size_t smallest =
        static_cast<size_t>(std::min_element(exp.begin(), exp.end()) - exp.begin());
    obs[smallest] += r.merged_observed;
    exp[smallest] += r.merged_expected;
  }
  for (size_t i = 0; i < obs.size(); ++i) {
    r.statistic += (obs[i] - exp[i]) * (obs[i] - exp[i]) / exp[i];
  }
  r.df = static_cast<int>(obs.size()) - 1;
  return r;
}

}  // namespace llms::testing
