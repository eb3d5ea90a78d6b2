// bench/arrivals: request inter-arrival times for open-loop load.
//
// Gaps are gamma-distributed with shape k = burstiness and scale 1 / (rate * k), so the mean gap is
// always 1 / rate. k = 1 is a Poisson process (exponential gaps); k < 1 is burstier (more short
// gaps and a few long ones, variance 1 / (k rate^2)); k > 1 is smoother, approaching a fixed
// interval. An infinite rate sends everything at once (every gap 0). The sequence depends only on
// the seed, so a run is reproducible.
#pragma once

#include <cstdint>
#include <random>

namespace llms::bench {

class ArrivalProcess {
 public:
  // rate: requests per second (> 0, may be +infinity); burstiness: gamma shape (> 0).
  // Throws llms::Error(kInvalidArgument) naming the parameter when out of range.
  ArrivalProcess(double rate, double burstiness, uint64_t seed);

  // The next gap in seconds (>= 0).
  double next_gap_s();

  double rate() const { return rate_; }
  double burstiness() const { return burstiness_; }

 private:
  double rate_;
  double burstiness_;
  std::mt19937_64 rng_;
  std::gamma_distribution<double> gamma_;
};

}  // namespace llms::bench
