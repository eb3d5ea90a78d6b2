// The load runner against the stand-in server (127.0.0.1, a free port, bounded work).
//
// No assertion here depends on how fast the machine is: a busy machine only makes everything
// later, so the tests assert what happened (counts, order, errors, connections) and only
// measurements that causality bounds from below:
// - the server's timers never fire early, so a TTFT is >= the server's first_token_ms and an E2E
//   >= its whole schedule; a client timeout never fires before it is due;
// - a client span contains the server's span of the same request (the client sends before the
//   server reads, and reads after the server writes), so every order statistic does too;
// - the client's own figures agree with each other (TTFT plus the inter-token gaps is the time
//   to the last token, which E2E contains).
// There is no upper bound on a latency: scheduling delay on a loaded machine has none. Timeouts
// (LoadConfig::timeout_s) are generous and only keep a broken run from hanging.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <map>
#include <vector>

#include "bench/client.h"
#include "bench/openai.h"
#include "bench/server_info.h"
#include "bench/stats.h"
#include "sse_test_server.h"
#include "util/error.h"

namespace llms::bench {
namespace {

using testing::StandInConfig;
using testing::StandInServer;

// Rounding slack when sums of durations are compared (the values are in ms).
constexpr double kEpsMs = 1e-6;

std::vector<PreparedRequest> prepare(const std::vector<std::string>& prompts, int64_t max_tokens,
                                     Api api = Api::kCompletions, bool stream = true) {
  RequestOptions o;
  o.api = api;
  o.model = "stand-in";
  o.stream = stream;
  std::vector<PreparedRequest> out;
  for (const auto& text : prompts) {
    Prompt p;
    p.text = text;
    p.max_tokens = max_tokens;
    out.push_back({build_request_body(o, p), StandInServer::count_tokens(text)});
  }
  return out;
}

LoadConfig config_for(const StandInServer& server, size_t concurrency, size_t n_requests,
                      Api api = Api::kCompletions) {
  LoadConfig c;
  c.target.host = "127.0.0.1";
  c.target.port = server.port();
  c.path = api_path(api);
  c.level.concurrency = concurrency;
  c.n_requests = n_requests;
  c.timeout_s = 60;  // a hang guard only: no test here waits for it
  return c;
}

std::vector<const RequestRecord*> measured(const RunResult& run) {
  std::vector<const RequestRecord*> out;
  for (const auto& r : run.records) {
    if (!r.warmup) out.push_back(&r);
  }
  return out;
}

TEST(LoadRunner, MeasuredTimesContainTheServersSchedule) {
  StandInConfig sc;
  sc.first_token_ms = 50;
  sc.token_gap_ms = 10;
  StandInServer server(sc);
  const int64_t kTokens = 10;
  const double kScheduleMs = sc.first_token_ms + sc.token_gap_ms * (kTokens - 1);
  auto requests = prepare({"alpha beta", "gamma delta epsilon", "zeta"}, kTokens);
  RunResult run = run_load(config_for(server, 4, 12), requests);
  Summary s = summarize_run(run, Slo{});
  ASSERT_EQ(s.n_ok, 12u) << (run.records.empty() ? "" : run.records[0].error);
  EXPECT_EQ(s.max_in_flight, 4u);
  ASSERT_EQ(server.served().size(), 12u);

  // What the server did, from its own clock.
  std::vector<double> server_ttft, server_gaps, server_e2e;
  for (const auto& served : server.served()) {
    ASSERT_EQ(served.t_token_ms.size(), static_cast<size_t>(kTokens));
    server_ttft.push_back(served.t_token_ms[0] - served.t_received_ms);
    server_e2e.push_back(served.t_token_ms.back() - served.t_received_ms);
    for (size_t i = 1; i < served.t_token_ms.size(); ++i) {
      server_gaps.push_back(served.t_token_ms[i] - served.t_token_ms[i - 1]);
    }
  }
  Dist st = summarize(server_ttft), sg = summarize(server_gaps), se = summarize(server_e2e);
  // For the reader only: how far the client's figures sit above the server's on this machine.
  std::printf(
      "client vs server: TTFT p50 %.3f / %.3f, p99 %.3f / %.3f; ITL p50 %.3f / %.3f, "
      "p99 %.3f / %.3f; E2E p50 %.3f / %.3f ms\n",
      s.ttft.median, st.median, s.ttft.p99, st.p99, s.itl.median, sg.median, s.itl.p99, sg.p99,
      s.e2e.median, se.median);

  for (const RequestRecord* r : measured(run)) {
    EXPECT_EQ(r->output_tokens, kTokens);
    EXPECT_EQ(r->n_content_chunks, kTokens);
    EXPECT_TRUE(r->usage_reported);
    ASSERT_EQ(r->itl_ms.size(), static_cast<size_t>(kTokens - 1));
    EXPECT_EQ(r->input_tokens, r->expected_input_tokens);
    ASSERT_TRUE(r->ttft_ms.has_value());
    EXPECT_GE(*r->ttft_ms, sc.first_token_ms);  // timers never fire early
    EXPECT_GE(r->e2e_ms, kScheduleMs);
    double to_last_token = *r->ttft_ms;
    for (double gap : r->itl_ms) {
      EXPECT_GE(gap, 0);
      to_last_token += gap;
    }
    // TTFT plus the gaps is the time to the last token: no earlier than the server wrote it,
    // and inside the E2E, which ends at [DONE].
    EXPECT_GE(to_last_token, kScheduleMs - kEpsMs);
    EXPECT_LE(to_last_token, r->e2e_ms + kEpsMs);
    ASSERT_TRUE(r->tpot_ms().has_value());
    EXPECT_NEAR(*r->tpot_ms(), (r->e2e_ms - *r->ttft_ms) / static_cast<double>(kTokens - 1),
                kEpsMs);
  }
  // Against the server's record: each client TTFT (E2E) contains the server's span from reading
  // the request to writing the first (last) token, so every order statistic does too. What comes
  // on top (the client's write, the wake-ups of both threads) has no bound on a loaded machine.
  EXPECT_GE(s.ttft.median, st.median - kEpsMs);
  EXPECT_GE(s.ttft.p99, st.p99 - kEpsMs);
  EXPECT_GE(s.e2e.median, se.median - kEpsMs);
  EXPECT_GE(s.e2e.p99, se.p99 - kEpsMs);
  // Against the nominal schedule.
  EXPECT_GE(s.ttft.median, sc.first_token_ms);
  EXPECT_GE(s.e2e.median, kScheduleMs);
  EXPECT_EQ(s.itl.n, static_cast<size_t>(12 * (kTokens - 1)));
  EXPECT_EQ(s.total_output_tokens, 12 * kTokens);
}

TEST(LoadRunner, KeepsConnectionsAliveAndCountsWarmupApart) {
  StandInConfig sc;
  sc.first_token_ms = 2;
  sc.token_gap_ms = 1;
  sc.cached_tokens = 7;
  StandInServer server(sc);
  auto requests = prepare({"a", "b"}, 3);
  LoadConfig c = config_for(server, 2, 10);
  c.n_warmup = 4;
  std::vector<Progress> progress;
  c.on_progress = [&](const Progress& p) { progress.push_back(p); };
  c.progress_interval_s = 0.001;
  RunResult run = run_load(c, requests);
  ASSERT_EQ(run.records.size(), 14u);
  size_t n_warm = 0, n_new = 0;
  for (const auto& r : run.records) {
    EXPECT_TRUE(r.ok) << r.error;
    n_warm += r.warmup;
    n_new += r.new_connection;
    EXPECT_EQ(r.cached_tokens, 7);
  }
  EXPECT_EQ(n_warm, 4u);
  EXPECT_EQ(n_new, 2u);  // two streams, each on one kept-alive connection
  EXPECT_EQ(server.n_accepted(), 2u);
  Summary s = summarize_run(run, Slo{});
  EXPECT_EQ(s.n_requests, 10u);
  EXPECT_EQ(s.total_cached_tokens, 70);
  ASSERT_FALSE(progress.empty());
  EXPECT_TRUE(progress.back().finished);
  EXPECT_FALSE(progress.back().warmup);
  EXPECT_EQ(progress.back().n_done, 10u);
  EXPECT_TRUE(std::any_of(progress.begin(), progress.end(),
                          [](const Progress& p) { return p.warmup && p.finished; }));
}

TEST(LoadRunner, ChatRoleChunkDoesNotCountAsFirstToken) {
  StandInConfig sc;
  sc.first_token_ms = 40;
  sc.token_gap_ms = 2;
  StandInServer server(sc);
  auto requests = prepare({"hello there"}, 4, Api::kChat);
  RunResult run = run_load(config_for(server, 2, 4, Api::kChat), requests);
  for (const auto& r : run.records) {
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_TRUE(r.ttft_ms);
    EXPECT_GE(*r.ttft_ms, 40);  // the role chunk came at ~0 ms
    EXPECT_EQ(r.n_content_chunks, 4);
    EXPECT_EQ(r.output_tokens, 4);
  }
  EXPECT_EQ(server.served()[0].path, "/v1/chat/completions");
}

TEST(LoadRunner, FragmentedCrLfStreamParsesCompletely) {
  StandInConfig sc;
  sc.first_token_ms = 1;
  sc.token_gap_ms = 1;
  sc.fragment = true;
  StandInServer server(sc);
  auto requests = prepare({"split me"}, 6);
  RunResult run = run_load(config_for(server, 3, 6), requests);
  for (const auto& r : run.records) {
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.n_content_chunks, 6);
    EXPECT_EQ(r.content_bytes, 6 * 4);  // " tok"
    EXPECT_TRUE(r.usage_reported);
    EXPECT_EQ(r.input_tokens, StandInServer::count_tokens("split me"));
  }
}

TEST(LoadRunner, NonStreamedRequestsHaveNoTtft) {
  StandInConfig sc;
  sc.first_token_ms = 20;
  sc.token_gap_ms = 5;
  StandInServer server(sc);
  auto requests = prepare({"whole"}, 5, Api::kCompletions, /*stream=*/false);
  RunResult run = run_load(config_for(server, 1, 2), requests);
  for (const auto& r : run.records) {
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_FALSE(r.ttft_ms);
    EXPECT_TRUE(r.itl_ms.empty());
    EXPECT_EQ(r.output_tokens, 5);
    EXPECT_GE(r.e2e_ms, 20 + 5 * 4);
  }
}

TEST(LoadRunner, ErrorsAreCountedByKind) {
  StandInConfig sc;
  sc.first_token_ms = 1;
  sc.token_gap_ms = 1;
  StandInServer server(sc);
  auto requests = prepare(
      {"fine", "please-429", "please-500", "please-drop", "please-error-event", "fine too"}, 4);
  RunResult run = run_load(config_for(server, 2, 6), requests);
  Summary s = summarize_run(run, Slo{});
  EXPECT_EQ(s.n_ok, 2u);
  EXPECT_EQ(s.n_failed, 4u);
  EXPECT_EQ(s.errors, (std::map<std::string, size_t>{
                          {"HTTP 429", 1}, {"HTTP 500", 1}, {"protocol", 1}, {"stream", 1}}));
  for (const auto& r : run.records) {
    if (r.http_status == 429) {
      EXPECT_EQ(r.error, "rate limited");
    }
    if (r.error_kind == "stream") {
      EXPECT_EQ(r.error, "boom");
    }
  }
}

TEST(LoadRunner, SilentServerTimesOut) {
  StandInServer server(StandInConfig{});
  auto requests = prepare({"please-stall"}, 4);
  LoadConfig c = config_for(server, 1, 1);
  c.timeout_s = 0.3;
  RunResult run = run_load(c, requests);
  ASSERT_EQ(run.records.size(), 1u);
  EXPECT_FALSE(run.records[0].ok);
  EXPECT_EQ(run.records[0].error_kind, "timeout");
  EXPECT_GE(run.records[0].e2e_ms, 300);  // the timeout never fires early
}

// The timeout bounds silence, not the whole stream: a stream longer than the timeout whose
// tokens keep coming is not cut (the silence watchdog is pushed back by every read). The gaps
// are a twentieth of the timeout, so only a stall of the machine near a second could cut it.
TEST(LoadRunner, LongStreamWithShortGapsDoesNotTimeOut) {
  StandInConfig sc;
  sc.first_token_ms = 50;
  sc.token_gap_ms = 50;
  StandInServer server(sc);
  const int64_t kTokens = 24;
  auto requests = prepare({"steady"}, kTokens);
  LoadConfig c = config_for(server, 1, 1);
  c.timeout_s = 1.0;
  RunResult run = run_load(c, requests);
  ASSERT_EQ(run.records.size(), 1u);
  EXPECT_TRUE(run.records[0].ok) << run.records[0].error;
  EXPECT_EQ(run.records[0].n_content_chunks, kTokens);
  // Longer than the timeout as a whole: a lower bound the server's schedule guarantees (1.2 s).
  EXPECT_GT(run.records[0].e2e_ms, 1000 * c.timeout_s);
}

TEST(LoadRunner, RefusedConnectionsAreErrorsNotExceptions) {
  uint16_t dead_port = 0;
  {
    StandInServer server(StandInConfig{});
    dead_port = server.port();
  }  // closed: nothing listens there now
  LoadConfig c;
  c.target.port = dead_port;
  c.level.concurrency = 2;
  c.n_requests = 5;
  c.timeout_s = 5;
  RunResult run = run_load(c, prepare({"x"}, 1));
  Summary s = summarize_run(run, Slo{});
  EXPECT_EQ(s.n_failed, 5u);
  EXPECT_EQ(s.errors.at("connect"), 5u);
}

TEST(LoadRunner, OpenLoopRateRespectsTheCapAndTheSchedule) {
  StandInConfig sc;
  sc.first_token_ms = 5;
  sc.token_gap_ms = 2;
  StandInServer server(sc);
  auto requests = prepare({"p"}, 3);
  LoadConfig c = config_for(server, 3, 30);
  c.level.rate = 300;
  c.level.burstiness = 0.5;
  c.seed = 5;
  RunResult run = run_load(c, requests);
  ASSERT_EQ(run.records.size(), 30u);
  EXPECT_LE(run.max_in_flight, 3u);
  std::vector<double> scheduled;
  for (const auto& r : run.records) {
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_GE(r.start_ms + 1e-9, r.scheduled_ms);
    scheduled.push_back(r.scheduled_ms);
  }
  std::sort(scheduled.begin(), scheduled.end());
  EXPECT_EQ(scheduled.front(), 0);  // the first arrival is at the start

  // Uncapped and infinite: everything at once.
  c.level.concurrency = 0;
  c.level.rate = INFINITY;
  c.n_requests = 8;
  RunResult burst = run_load(c, requests);
  EXPECT_EQ(burst.max_in_flight, 8u);
}

TEST(LoadRunner, DurationBoundsTheRun) {
  StandInConfig sc;
  sc.first_token_ms = 5;
  sc.token_gap_ms = 5;
  StandInServer server(sc);
  LoadConfig c = config_for(server, 2, 0);
  c.duration_s = 0.3;
  RunResult run = run_load(c, prepare({"d"}, 3));
  // The two streams start together; after that a request is issued only when one ends while the
  // duration still runs. So beyond the first two, every request follows one that ended within
  // the 300 ms, however slow the machine.
  EXPECT_GE(run.records.size(), 2u);
  size_t ended_in_time = 0;
  double last_end_ms = 0;
  for (const auto& r : run.records) {
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_GE(r.e2e_ms, 15);  // 5 ms to the first token, two gaps of 5 ms
    const double end_ms = r.start_ms + r.e2e_ms;
    ended_in_time += end_ms < 1000 * c.duration_s;
    last_end_ms = std::max(last_end_ms, end_ms);
  }
  EXPECT_LE(run.records.size(), 2 + ended_in_time);
  // Every issued request is recorded once.
  std::vector<uint64_t> indices;
  for (const auto& r : run.records) indices.push_back(r.index);
  std::sort(indices.begin(), indices.end());
  for (size_t i = 0; i < indices.size(); ++i) EXPECT_EQ(indices[i], i);
  // The run lasts until its last request ended.
  EXPECT_GE(1000 * run.duration_s, last_end_ms - kEpsMs);
}

// The stand-in's barrier, which OneThreadHoldsAThousandStreams relies on: nothing is answered
// before hold_until_received requests were read, then every held answer goes.
TEST(LoadRunner, StandInHoldsAnswersUntilEnoughRequestsWereRead) {
  StandInConfig sc;
  sc.first_token_ms = 1;
  sc.token_gap_ms = 1;
  sc.hold_until_received = 3;
  StandInServer short_of_it(sc);
  LoadConfig c = config_for(short_of_it, 2, 2);
  c.timeout_s = 0.3;
  RunResult held = run_load(c, prepare({"wait"}, 2));
  ASSERT_EQ(held.records.size(), 2u);
  for (const auto& r : held.records) {
    EXPECT_EQ(r.error_kind, "timeout");
    EXPECT_EQ(r.n_content_chunks, 0);
  }
  for (const auto& served : short_of_it.served()) EXPECT_TRUE(served.t_token_ms.empty());

  sc.hold_until_received = 2;
  StandInServer enough(sc);
  RunResult released = run_load(config_for(enough, 2, 2), prepare({"go"}, 2));
  ASSERT_EQ(released.records.size(), 2u);
  for (const auto& r : released.records) {
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.n_content_chunks, 2);
  }
}

TEST(LoadRunner, RefusesImpossibleConfigurations) {
  StandInServer server(StandInConfig{});
  auto requests = prepare({"x"}, 1);
  LoadConfig c = config_for(server, 1, 0);
  EXPECT_THROW(run_load(c, requests), Error);  // neither count nor duration
  c = config_for(server, 0, 1);
  EXPECT_THROW(run_load(c, requests), Error);  // closed loop with no streams
  c = config_for(server, 1, 1);
  EXPECT_THROW(run_load(c, {}), Error);
  c.target.host = "no-such-host.invalid";
  EXPECT_THROW(run_load(c, requests), Error);
}

TEST(LoadRunner, OneThreadHoldsAThousandStreams) {
  constexpr size_t kStreams = 1000;
  if (raise_open_file_limit(2 * kStreams + 256) < 2 * kStreams + 64) {
    GTEST_SKIP() << "the open-file limit cannot hold " << kStreams << " streams on both ends";
  }
  // The server answers none before it has read all of them, so every stream is open at once
  // however long the connections take on a loaded machine (timeout_s is the hang guard).
  StandInConfig sc;
  sc.first_token_ms = 10;
  sc.token_gap_ms = 10;
  sc.hold_until_received = kStreams;
  StandInServer server(sc);
  auto requests = prepare({"many"}, 4);
  LoadConfig c = config_for(server, kStreams, kStreams);
  RunResult run = run_load(c, requests);
  Summary s = summarize_run(run, Slo{});
  EXPECT_EQ(s.n_ok, kStreams);
  EXPECT_EQ(s.max_in_flight, kStreams);
  EXPECT_EQ(server.max_open(), kStreams);  // the server saw them all open at once
  EXPECT_EQ(s.total_output_tokens, static_cast<int64_t>(4 * kStreams));
  EXPECT_GT(s.client_cpu_s, 0);
  std::printf("1000 streams: client %.2f us CPU per token, %.1f%% busy, TTFT p50 %.1f ms\n",
              s.client_us_per_token, 100 * s.client_busy, s.ttft.median);
}

TEST(ServerInfo, ModelsAndTokenize) {
  StandInServer server(StandInConfig{});
  Target t;
  t.port = server.port();
  SyncHttpClient client(t, "", 5);
  std::string why;
  EXPECT_EQ(first_model_id(client, &why).value_or("?"), "stand-in");
  EXPECT_FALSE(first_model_id_of(R"({"data":[]})"));
  EXPECT_FALSE(first_model_id_of("not json"));
  EXPECT_EQ(first_model_id_of(R"({"data":[{"object":"model"},{"id":"b"}]})").value_or("?"), "b");
  ServerTokenizer tok(client, "stand-in");
  ASSERT_TRUE(tok.probe(&why)) << why;
  EXPECT_STREQ(tok.dialect(), "vllm");
  EXPECT_EQ(tok.count("one two threeeeeeeee"), 1 + 1 + 1 + 2);

  RandomSpec spec;
  spec.n_prompts = 5;
  spec.input = {40, 0.5};
  Dataset ds = make_random_dataset(spec, tok.counter(), "server");
  EXPECT_TRUE(ds.token_exact);
  for (const auto& p : ds.prompts) EXPECT_EQ(StandInServer::count_tokens(p.text), p.input_tokens);
  EXPECT_LE(server.n_accepted(), 2u);  // set-up calls share one kept-alive connection

  StandInConfig no_tok;
  no_tok.serve_tokenize = false;
  StandInServer bare(no_tok);
  t.port = bare.port();
  SyncHttpClient bare_client(t, "", 5);
  ServerTokenizer none(bare_client, "stand-in");
  EXPECT_FALSE(none.probe(&why));
  EXPECT_NE(why.find("HTTP 404"), std::string::npos) << why;
  EXPECT_FALSE(none.count("x"));
}

TEST(ServerInfo, BaseUrls) {
  Target t = parse_base_url("http://localhost:8080/v1");
  EXPECT_EQ(t.host, "localhost");
  EXPECT_EQ(t.port, 8080);
  EXPECT_EQ(t.base_path, "");
  t = parse_base_url("10.0.0.2/proxy/");
  EXPECT_EQ(t.port, 80);
  EXPECT_EQ(t.base_path, "/proxy");
  EXPECT_EQ(t.url(), "http://10.0.0.2:80/proxy");
  t = parse_base_url("http://[::1]:9000");
  EXPECT_EQ(t.host, "::1");
  EXPECT_EQ(t.port, 9000);
  EXPECT_THROW(parse_base_url("https://x"), Error);
  EXPECT_THROW(parse_base_url("http://x:0"), Error);
  EXPECT_THROW(parse_base_url("http://x:99999"), Error);
  EXPECT_THROW(parse_base_url("http://:80"), Error);
  EXPECT_THROW(parse_base_url("ftp://x"), Error);
}

}  // namespace
}  // namespace llms::bench
