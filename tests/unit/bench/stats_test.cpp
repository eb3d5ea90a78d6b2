// Percentile math and run summaries on hand-made records (no clocks involved).
#include "bench/stats.h"

#include <gtest/gtest.h>

#include <cmath>

#include "bench/metrics.h"
#include "util/error.h"

namespace llms::bench {
namespace {

TEST(Percentile, LinearInterpolationBetweenClosestRanks) {
  std::vector<double> v = {10, 1, 9, 2, 8, 3, 7, 4, 6, 5};  // 1..10, unsorted
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 5.5);
  EXPECT_DOUBLE_EQ(percentile(v, 90), 9.1);   // rank 8.1
  EXPECT_DOUBLE_EQ(percentile(v, 95), 9.55);  // rank 8.55
  EXPECT_DOUBLE_EQ(percentile(v, 99), 9.91);  // rank 8.91
  EXPECT_DOUBLE_EQ(percentile(v, 100), 10);
}

TEST(Percentile, SmallAndEmptySamples) {
  EXPECT_DOUBLE_EQ(percentile({42}, 99), 42);
  EXPECT_DOUBLE_EQ(percentile({1, 3}, 50), 2);
  EXPECT_DOUBLE_EQ(percentile({1, 3}, 75), 2.5);
  EXPECT_TRUE(std::isnan(percentile({}, 50)));
}

TEST(Summarize, MeanStddevAndPercentiles) {
  Dist d = summarize({2, 4, 4, 4, 5, 5, 7, 9});
  EXPECT_EQ(d.n, 8u);
  EXPECT_DOUBLE_EQ(d.mean, 5);
  EXPECT_DOUBLE_EQ(d.stddev, 2);
  EXPECT_DOUBLE_EQ(d.min, 2);
  EXPECT_DOUBLE_EQ(d.max, 9);
  EXPECT_DOUBLE_EQ(d.median, 4.5);
  EXPECT_DOUBLE_EQ(d.p90, 7.6);  // rank 6.3: 7 + 0.3 * 2
  Dist e = summarize({});
  EXPECT_EQ(e.n, 0u);
  EXPECT_TRUE(std::isnan(e.mean));
  EXPECT_TRUE(std::isnan(e.p99));
}

// A request that streamed `n_out` tokens: first after `ttft`, then every `gap` ms.
RequestRecord streamed(double ttft, double gap, int64_t n_out) {
  RequestRecord r;
  r.ok = true;
  r.http_status = 200;
  r.ttft_ms = ttft;
  for (int64_t i = 1; i < n_out; ++i) r.itl_ms.push_back(gap);
  r.e2e_ms = ttft + gap * static_cast<double>(n_out - 1);
  r.output_tokens = n_out;
  r.input_tokens = 100;
  r.cached_tokens = 20;
  r.usage_reported = true;
  return r;
}

TEST(SummarizeRun, KnownScheduleGivesKnownPercentiles) {
  RunResult run;
  run.duration_s = 2.0;
  run.client_cpu_s = 0.001;
  // TTFT 10..100 ms, every request 11 tokens 5 ms apart.
  for (int i = 1; i <= 10; ++i) run.records.push_back(streamed(10.0 * i, 5, 11));
  RequestRecord warm = streamed(1000, 1000, 2);
  warm.warmup = true;
  run.records.push_back(warm);
  RequestRecord failed;
  failed.http_status = 429;
  failed.error_kind = "http";
  run.records.push_back(failed);

  Summary s = summarize_run(run, Slo{});
  EXPECT_EQ(s.n_requests, 11u);
  EXPECT_EQ(s.n_ok, 10u);
  EXPECT_EQ(s.n_failed, 1u);
  ASSERT_EQ(s.errors.size(), 1u);
  EXPECT_EQ(s.errors.at("HTTP 429"), 1u);
  EXPECT_DOUBLE_EQ(s.ttft.median, 55);
  EXPECT_DOUBLE_EQ(s.ttft.p90, 91);
  EXPECT_DOUBLE_EQ(s.ttft.p99, 99.1);
  EXPECT_EQ(s.itl.n, 100u);
  EXPECT_DOUBLE_EQ(s.itl.p99, 5);
  EXPECT_DOUBLE_EQ(s.tpot.mean, 5);  // (E2E - TTFT) / (11 - 1)
  EXPECT_DOUBLE_EQ(s.e2e.max, 150);
  EXPECT_EQ(s.total_output_tokens, 110);
  EXPECT_EQ(s.total_input_tokens, 1000);
  EXPECT_EQ(s.total_cached_tokens, 200);
  EXPECT_DOUBLE_EQ(s.request_throughput, 5);
  EXPECT_DOUBLE_EQ(s.output_token_throughput, 55);
  EXPECT_DOUBLE_EQ(s.total_token_throughput, 555);
  EXPECT_DOUBLE_EQ(s.client_us_per_token, 1000.0 / 110.0);
  EXPECT_FALSE(s.n_good.has_value());
}

TEST(Slo, ParsesBoundsAndUnits) {
  Slo slo = parse_slo("ttft=500,tpot=50ms,e2e=2s");
  EXPECT_DOUBLE_EQ(*slo.ttft_ms, 500);
  EXPECT_DOUBLE_EQ(*slo.tpot_ms, 50);
  EXPECT_DOUBLE_EQ(*slo.e2e_ms, 2000);
  EXPECT_EQ(describe_slo(slo), "TTFT <= 500 ms, TPOT <= 50 ms, E2E <= 2000 ms");
  EXPECT_FALSE(parse_slo("tpot=20").ttft_ms.has_value());
  for (const char* bad : {"", "ttft", "ttft=", "ttft=-1", "ttft=abc", "latency=5", "ttft=1x"}) {
    EXPECT_THROW(parse_slo(bad), Error) << bad;
  }
  try {
    parse_slo("speed=3");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("speed=3"), std::string::npos);
  }
}

TEST(Slo, GoodputCountsRequestsWithinEveryBound) {
  RunResult run;
  run.duration_s = 4;
  run.records.push_back(streamed(100, 10, 11));  // good
  run.records.push_back(streamed(300, 10, 11));  // TTFT too slow
  run.records.push_back(streamed(100, 40, 11));  // TPOT too slow
  run.records.push_back(streamed(150, 0, 1));    // one token: no TPOT, TTFT fine -> good
  RequestRecord failed;
  failed.error_kind = "connect";
  run.records.push_back(failed);
  Slo slo = parse_slo("ttft=200,tpot=20");
  Summary s = summarize_run(run, slo);
  ASSERT_TRUE(s.n_good.has_value());
  EXPECT_EQ(*s.n_good, 2u);
  EXPECT_DOUBLE_EQ(s.goodput, 0.5);
  EXPECT_EQ(s.errors.at("connect"), 1u);

  RequestRecord whole;  // non-streamed: E2E stands in for TTFT
  whole.ok = true;
  whole.e2e_ms = 250;
  whole.output_tokens = 5;
  EXPECT_FALSE(meets_slo(whole, slo));
  whole.e2e_ms = 150;
  EXPECT_TRUE(meets_slo(whole, slo));
}

TEST(RequestRecord, TpotNeedsTwoTokensAndTtft) {
  RequestRecord r = streamed(50, 10, 10);
  EXPECT_DOUBLE_EQ(*r.tpot_ms(), 10);
  r.output_tokens = 1;
  EXPECT_FALSE(r.tpot_ms());
  r.output_tokens = 10;
  r.ttft_ms.reset();
  EXPECT_FALSE(r.tpot_ms());
}

}  // namespace
}  // namespace llms::bench
