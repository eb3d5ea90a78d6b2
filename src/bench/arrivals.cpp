// bench/arrivals: gamma inter-arrival gaps (see arrivals.h).
#include "bench/arrivals.h"

#include <cmath>
#include <string>

#include "util/error.h"

namespace llms::bench {

namespace {

double checked_shape(double burstiness) {
  if (!(burstiness > 0) || !std::isfinite(burstiness)) {
    throw Error(Error::Kind::kInvalidArgument,
                "burstiness must be a finite number > 0, got " + std::to_string(burstiness));
  }
  return burstiness;
}

}  // namespace

ArrivalProcess::ArrivalProcess(double rate, double burstiness, uint64_t seed)
    : rate_(rate),
      burstiness_(checked_shape(burstiness)),
      rng_(seed),
      gamma_(burstiness_, std::isinf(rate) || !(rate > 0) ? 1.0 : 1.0 / (rate * burstiness_)) {
  if (!(rate > 0)) {
    throw Error(Error::Kind::kInvalidArgument,
                "rate must be > 0 requests/s (or inf), got " + std::to_string(rate));
  }
}

double ArrivalProcess::next_gap_s() {
  if (std::isinf(rate_)) return 0.0;
  return gamma_(rng_);
}

}  // namespace llms::bench
