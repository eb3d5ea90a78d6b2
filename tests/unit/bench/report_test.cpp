// The --json document's shape, the text table and the progress line.
#include "bench/report.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace llms::bench {
namespace {

RunResult sample_run() {
  RunResult run;
  run.level.concurrency = 4;
  run.duration_s = 1.5;
  run.client_cpu_s = 0.002;
  run.max_in_flight = 4;
  for (int i = 0; i < 3; ++i) {
    RequestRecord r;
    r.index = static_cast<uint64_t>(i);
    r.ok = true;
    r.http_status = 200;
    r.ttft_ms = 50.0 + i;
    r.itl_ms = {10.0, 10.5};
    r.e2e_ms = 71.0 + i;
    r.input_tokens = 12;
    r.output_tokens = 3;
    r.usage_reported = true;
    run.records.push_back(r);
  }
  RequestRecord bad;
  bad.index = 3;
  bad.http_status = 503;
  bad.error_kind = "http";
  bad.error = "overloaded";
  run.records.push_back(bad);
  return run;
}

TEST(BenchJson, ShapeAndValues) {
  BenchInfo info;
  info.url = "http://127.0.0.1:8000";
  info.endpoint = "/v1/completions";
  info.model = "m";
  info.dataset_kind = "random";
  info.n_prompts = 3;
  info.slo = parse_slo("ttft=51");
  info.config["seed"] = 1;
  RunResult run = sample_run();
  Summary s = summarize_run(run, info.slo);
  auto j = bench_to_json(info, {run}, {s});
  EXPECT_EQ(j["format"], "llmserve-bench/1");
  EXPECT_EQ(j["config"]["seed"], 1);
  EXPECT_EQ(j["server"]["model"], "m");
  EXPECT_EQ(j["dataset"]["kind"], "random");
  EXPECT_EQ(j["slo"]["ttft_ms"], 51.0);
  ASSERT_EQ(j["runs"].size(), 1u);
  const auto& r = j["runs"][0];
  EXPECT_EQ(r["level"]["concurrency"], 4);
  EXPECT_TRUE(r["level"]["rate"].is_null());
  ASSERT_EQ(r["requests"].size(), 4u);
  const auto& first = r["requests"][0];
  for (const char* key :
       {"index", "prompt_index", "ok", "http_status", "scheduled_ms", "start_ms", "new_connection",
        "ttft_ms", "tpot_ms", "e2e_ms", "itl_ms", "expected_input_tokens", "input_tokens",
        "output_tokens", "cached_tokens", "usage_reported", "content_chunks", "content_bytes"}) {
    EXPECT_TRUE(first.contains(key)) << key;
  }
  EXPECT_EQ(first["ttft_ms"], 50.0);
  EXPECT_EQ(first["tpot_ms"], 10.5);  // (71 - 50) / 2
  EXPECT_EQ(first["itl_ms"], nlohmann::ordered_json::array({10.0, 10.5}));
  EXPECT_TRUE(first["cached_tokens"].is_null());
  EXPECT_FALSE(first.contains("error"));
  const auto& failed = r["requests"][3];
  EXPECT_EQ(failed["ok"], false);
  EXPECT_EQ(failed["error_kind"], "http");
  EXPECT_EQ(failed["error"], "overloaded");
  const auto& sum = r["summary"];
  EXPECT_EQ(sum["n_ok"], 3);
  EXPECT_EQ(sum["n_failed"], 1);
  EXPECT_EQ(sum["errors"]["HTTP 503"], 1);
  EXPECT_EQ(sum["n_good"], 2);  // TTFT 50 and 51 are within 51 ms
  EXPECT_DOUBLE_EQ(sum["goodput"].get<double>(), 2 / 1.5);
  EXPECT_EQ(sum["ttft_ms"]["median"], 51.0);
  EXPECT_EQ(sum["ttft_ms"]["n"], 3);
  EXPECT_EQ(sum["itl_ms"]["n"], 6);
  EXPECT_TRUE(sum["total_cached_tokens"].is_null());
  EXPECT_EQ(sum["client"]["threads"], 1);
  // A round trip through text keeps everything (no NaN or infinity sneaks in).
  auto again = nlohmann::json::parse(j.dump());
  EXPECT_EQ(again["runs"][0]["requests"].size(), 4u);
}

TEST(BenchJson, EmptyDistributionsAreNull) {
  RunResult run;
  run.duration_s = 1;
  Summary s = summarize_run(run, Slo{});
  auto j = summary_to_json(s);
  EXPECT_TRUE(j["ttft_ms"]["median"].is_null());
  EXPECT_EQ(j["ttft_ms"]["n"], 0);
  EXPECT_TRUE(j["goodput"].is_null());
}

TEST(Table, NamesEveryMetricAndTheErrors) {
  BenchInfo info;
  info.url = "http://h:1";
  info.endpoint = "/v1/completions";
  RunResult run = sample_run();
  Summary s = summarize_run(run, Slo{});
  std::string t = format_run_table(info, run, s);
  for (const char* needle : {"concurrency 4", "TTFT", "TPOT", "ITL", "E2E", "HTTP 503 x1",
                             "3 ok, 1 failed", "req/s", "tok/s", "us CPU per output token"}) {
    EXPECT_NE(t.find(needle), std::string::npos) << needle << "\n" << t;
  }
  std::string sweep = format_sweep_table({run, run}, {s, s}, Slo{});
  EXPECT_NE(sweep.find("concurrency 4"), std::string::npos);
}

TEST(Level, Descriptions) {
  EXPECT_EQ(describe_level({16, 0, 1}), "concurrency 16");
  EXPECT_EQ(describe_level({0, 8, 0.5}), "rate 8 req/s (burstiness 0.5)");
  EXPECT_EQ(describe_level({64, 2.5, 1}), "rate 2.5 req/s (burstiness 1, at most 64 in flight)");
}

TEST(ProgressLine, FitsTheWidthAndShowsCounts) {
  Progress p;
  p.n_done = 25;
  p.n_target = 100;
  p.n_in_flight = 8;
  p.elapsed_s = 3.25;
  std::string line = render_progress(p, "c=8", 80);
  EXPECT_LE(line.size(), 80u);
  EXPECT_NE(line.find("25/100"), std::string::npos);
  EXPECT_NE(line.find("8 in flight"), std::string::npos);
  const size_t hashes = static_cast<size_t>(std::count(line.begin(), line.end(), '#'));
  const size_t dots = line.find(']') - line.find('[') - 1 - hashes;
  EXPECT_NEAR(static_cast<double>(hashes) / static_cast<double>(hashes + dots), 0.25, 0.05);
  p.finished = true;
  line = render_progress(p, "c=8", 80);
  const std::string bar = line.substr(line.find('[') + 1, line.find(']') - line.find('[') - 1);
  EXPECT_EQ(bar.find('.'), std::string::npos) << line;
}

}  // namespace
}  // namespace llms::bench
