// Gamma inter-arrival gaps: mean 1/rate whatever the burstiness, variance 1/(k rate^2).
#include "bench/arrivals.h"

#include <gtest/gtest.h>

#include <cmath>

#include "util/error.h"

namespace llms::bench {
namespace {

struct Moments {
  double mean = 0;
  double var = 0;
};

Moments sample(ArrivalProcess& p, int n) {
  double sum = 0, sq = 0;
  for (int i = 0; i < n; ++i) {
    const double g = p.next_gap_s();
    EXPECT_GE(g, 0);
    sum += g;
    sq += g * g;
  }
  Moments m;
  m.mean = sum / n;
  m.var = sq / n - m.mean * m.mean;
  return m;
}

TEST(Arrivals, MeanRateHoldsForEveryBurstiness) {
  constexpr int kN = 200000;
  for (double k : {0.25, 0.5, 1.0, 2.0, 8.0}) {
    ArrivalProcess p(20.0, k, 7);
    Moments m = sample(p, kN);
    // Relative standard error of the mean is sqrt(1/(k N)): under 0.5% even for k = 0.25.
    EXPECT_NEAR(m.mean, 1.0 / 20.0, 0.03 / 20.0) << "burstiness " << k;
    const double want_var = 1.0 / (k * 20.0 * 20.0);
    EXPECT_NEAR(m.var, want_var, 0.1 * want_var) << "burstiness " << k;
  }
}

TEST(Arrivals, PoissonGapsAreExponential) {
  // For an exponential distribution P(gap > mean) = 1/e.
  ArrivalProcess p(5.0, 1.0, 11);
  int above = 0;
  constexpr int kN = 100000;
  for (int i = 0; i < kN; ++i) above += p.next_gap_s() > 0.2;
  EXPECT_NEAR(static_cast<double>(above) / kN, std::exp(-1.0), 0.01);
}

TEST(Arrivals, SameSeedSameSequenceAndInfiniteRate) {
  ArrivalProcess a(3.0, 0.5, 42), b(3.0, 0.5, 42), c(3.0, 0.5, 43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const double x = a.next_gap_s();
    EXPECT_EQ(x, b.next_gap_s());
    differs |= x != c.next_gap_s();
  }
  EXPECT_TRUE(differs);
  ArrivalProcess inf(INFINITY, 1.0, 1);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(inf.next_gap_s(), 0.0);
}

TEST(Arrivals, RefusesBadParameters) {
  EXPECT_THROW(ArrivalProcess(0.0, 1.0, 1), Error);
  EXPECT_THROW(ArrivalProcess(-1.0, 1.0, 1), Error);
  EXPECT_THROW(ArrivalProcess(NAN, 1.0, 1), Error);
  EXPECT_THROW(ArrivalProcess(1.0, 0.0, 1), Error);
  EXPECT_THROW(ArrivalProcess(1.0, INFINITY, 1), Error);
}

}  // namespace
}  // namespace llms::bench
