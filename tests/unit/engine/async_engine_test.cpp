// AsyncEngine: submissions and aborts from other threads, outputs on the engine thread,
// metrics, and drain() with and without enough grace.
#include "engine/async_engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/tiny_model.h"
#include "temp_dir.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace llms::engine {
namespace {

struct Waiter {
  std::mutex m;
  std::condition_variable cv;
  int finished = 0;
  int tokens = 0;
  std::vector<FinishReason> reasons;

  OutputCallback callback() {
    return [this](const RequestOutput& o) {
      std::lock_guard<std::mutex> lock(m);
      tokens += static_cast<int>(o.tokens.size());
      if (o.request_finished) {
        ++finished;
        reasons.push_back(o.finish_reason);
        cv.notify_all();
      }
    };
  }
  bool wait_for(int n, std::chrono::seconds timeout = std::chrono::seconds(120)) {
    std::unique_lock<std::mutex> lock(m);
    return cv.wait_for(lock, timeout, [&] { return finished >= n; });
  }
};

class AsyncEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model::TinyModelSpec spec;
    spec.n_ctx = 1024;
    path_ = dir_.path() / "tiny.gguf";
    model::write_tiny_model(spec, path_);
    file_ = std::make_unique<gguf::GgufFile>(gguf::GgufFile::open(path_));
    tok_ = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_gguf(*file_));
    EngineConfig c;
    c.n_kv_blocks = 64;
    c.n_threads = 1;
    c.check_invariants = true;
    engine_ = std::make_unique<AsyncEngine>(std::make_unique<Engine>(*file_, *tok_, c));
  }

  static GenerationRequest request(int32_t max_tokens) {
    GenerationRequest r;
    r.prompt = {10, 20, 30, 40, 50};
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    r.sampling.temperature = 0.0f;
    return r;
  }

  testing::TempDir dir_;
  std::filesystem::path path_;
  std::unique_ptr<gguf::GgufFile> file_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  std::unique_ptr<AsyncEngine> engine_;
};

TEST_F(AsyncEngineTest, RequestsFromManyThreadsAllFinishAndAreCounted) {
  Waiter w;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) engine_->submit(request(6), w.callback());
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(w.wait_for(20));
  EXPECT_EQ(w.tokens, 20 * 6);
  // The engine thread updates metrics after the step whose callbacks we saw; give it a moment.
  for (int i = 0; i < 200 && engine_->n_in_flight() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(engine_->n_in_flight(), 0);
  EngineMetrics m;
  for (int i = 0; i < 200; ++i) {
    m = engine_->metrics();
    if (m.requests_finished_total == 20 && m.kv_blocks_free == 64) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(m.requests_finished_total, 20);
  EXPECT_EQ(m.generation_tokens_total, 120);
  EXPECT_EQ(m.prompt_tokens_total, 100);
  EXPECT_EQ(m.time_to_first_token.count, 20u);
  EXPECT_EQ(m.e2e_request_latency.count, 20u);
  EXPECT_EQ(m.inter_token_latency.count, 20u * 5);
  EXPECT_EQ(m.kv_blocks_free, 64);
  EXPECT_EQ(m.n_running, 0);
}

// A client that reads the metrics the moment its response ends must not see its request still
// running: the gauges are fresh when the final output is delivered, not one step later.
TEST_F(AsyncEngineTest, MetricsAreFreshWhenTheFinalOutputArrives) {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  EngineMetrics seen;
  engine_->submit(request(4), [&](const RequestOutput& o) {
    if (!o.request_finished) return;
    EngineMetrics now = engine_->metrics();
    std::lock_guard<std::mutex> lock(m);
    seen = now;
    done = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(m);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(120), [&] { return done; }));
  EXPECT_EQ(seen.n_running, 0);
  EXPECT_EQ(seen.n_waiting, 0);
  EXPECT_EQ(seen.requests_finished_total, 1);
  EXPECT_EQ(seen.generation_tokens_total, 4);
  EXPECT_EQ(seen.kv_blocks_free, 64);
}

TEST_F(AsyncEngineTest, AbortFromAnotherThreadEndsTheRequestAndFreesBlocks) {
  Waiter w;
  int64_t id = engine_->submit(request(900), w.callback());
  // Wait until it is generating.
  for (int i = 0; i < 2000; ++i) {
    {
      std::lock_guard<std::mutex> lock(w.m);
      if (w.tokens > 2) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  engine_->abort(id);
  ASSERT_TRUE(w.wait_for(1));
  EXPECT_EQ(w.reasons[0], FinishReason::kAbort);
  EXPECT_LT(w.tokens, 900);
  EngineMetrics m;
  for (int i = 0; i < 200; ++i) {
    m = engine_->metrics();
    if (m.kv_blocks_free == 64) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(m.kv_blocks_free, 64);
  engine_->abort(id);  // again: ignored
  engine_->abort(987654);
}

TEST_F(AsyncEngineTest, ValidateRefusesOnTheCallersThread) {
  auto r = request(4);
  r.prompt.clear();
  EXPECT_THROW(engine_->validate(r), Error);
  r = request(5000);
  try {
    engine_->validate(r);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context_length_exceeded"), std::string::npos);
  }
}

TEST_F(AsyncEngineTest, DrainFinishesInFlightWorkThenRefusesNewWork) {
  Waiter w;
  engine_->submit(request(8), w.callback());
  engine_->drain(60.0);
  ASSERT_TRUE(w.wait_for(1, std::chrono::seconds(1)));
  EXPECT_EQ(w.reasons[0], FinishReason::kLength);
  try {
    engine_->submit(request(4), nullptr);
    ADD_FAILURE() << "accepted after drain";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kUnavailable);
  }
}

TEST_F(AsyncEngineTest, DrainWithoutGraceAbortsWhatIsLeft) {
  Waiter w;
  engine_->submit(request(1000), w.callback());
  engine_->drain(0.0);
  ASSERT_TRUE(w.wait_for(1, std::chrono::seconds(1)));
  EXPECT_EQ(w.reasons[0], FinishReason::kAbort);
  EXPECT_EQ(engine_->n_in_flight(), 0);
}

TEST_F(AsyncEngineTest, DestructorAbortsQueuedAndRunningRequests) {
  Waiter w;
  for (int i = 0; i < 3; ++i) engine_->submit(request(1000), w.callback());
  engine_.reset();
  EXPECT_EQ(w.finished, 3);
  for (auto r : w.reasons) EXPECT_EQ(r, FinishReason::kAbort);
}

}  // namespace
}  // namespace llms::engine
