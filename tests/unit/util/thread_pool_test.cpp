// ThreadPool: every index covered exactly once with balanced contiguous chunks, grains honoured,
// exceptions rethrown on the caller, nesting runs inline, many short calls, rest() between
// calls, pools of size 1.
#include "util/thread_pool.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "sanitizer.h"
#include "util/error.h"

namespace llms {
namespace {

TEST(ThreadPool, CoversEveryIndexOnce) {
  for (int n_threads : {1, 2, 3, 4, 7}) {
    ThreadPool pool(n_threads);
    EXPECT_EQ(pool.size(), n_threads);
    for (int64_t n : {0, 1, 2, 3, 5, 6, 7, 100, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::vector<std::atomic<int>> calls_per_thread(static_cast<size_t>(n_threads));
      pool.parallel_for(n, [&](int64_t begin, int64_t end, int thread) {
        EXPECT_LT(begin, end);
        ASSERT_GE(thread, 0);
        ASSERT_LT(thread, n_threads);
        calls_per_thread[static_cast<size_t>(thread)]++;
        for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n " << n << ", index " << i;
      }
      for (auto& calls : calls_per_thread) EXPECT_LE(calls.load(), 1);
    }
  }
}

TEST(ThreadPool, ChunksAreBalancedAndOrderedByThread) {
  ThreadPool pool(3);
  std::vector<std::pair<int64_t, int64_t>> ranges(3, {-1, -1});
  pool.parallel_for(10, [&](int64_t begin, int64_t end, int thread) {
    ranges[static_cast<size_t>(thread)] = {begin, end};
  });
  EXPECT_EQ(ranges[0], std::make_pair(int64_t{0}, int64_t{4}));
  EXPECT_EQ(ranges[1], std::make_pair(int64_t{4}, int64_t{7}));
  EXPECT_EQ(ranges[2], std::make_pair(int64_t{7}, int64_t{10}));
}

TEST(ThreadPool, GrainAlignsChunkBoundaries) {
  ThreadPool pool(4);
  for (int64_t n : {1, 4, 9, 37, 64, 65}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(n, 4, [&](int64_t begin, int64_t end, int) {
      EXPECT_EQ(begin % 4, 0);
      EXPECT_TRUE(end == n || end % 4 == 0) << end;
      for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)]++;
    });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
  EXPECT_THROW(pool.parallel_for(5, 0, [](int64_t, int64_t, int) {}), Error);
}

TEST(ThreadPool, WorkersRunOnOtherThreads) {
  ThreadPool pool(2);
  std::thread::id ids[2];
  pool.parallel_for(
      2, [&](int64_t, int64_t, int thread) { ids[thread] = std::this_thread::get_id(); });
  EXPECT_EQ(ids[0], std::this_thread::get_id());  // the caller is worker 0
  EXPECT_NE(ids[1], std::this_thread::get_id());
}

TEST(ThreadPool, ExceptionsPropagateToTheCaller) {
  for (int thrower : {0, 1, 2}) {
    ThreadPool pool(3);
    EXPECT_THROW(pool.parallel_for(3,
                                   [&](int64_t, int64_t, int thread) {
                                     if (thread == thrower) throw std::runtime_error("boom");
                                   }),
                 std::runtime_error);
    // The pool stays usable and the error does not resurface.
    std::atomic<int64_t> sum{0};
    pool.parallel_for(100, [&](int64_t begin, int64_t end, int) {
      for (int64_t i = begin; i < end; ++i) sum += i;
    });
    EXPECT_EQ(sum.load(), 4950);
  }
  ThreadPool pool(2);
  try {
    pool.parallel_for(2, [](int64_t, int64_t, int thread) {
      throw std::runtime_error("from " + std::to_string(thread));
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "from 0");  // the lowest thread index wins
  }
}

TEST(ThreadPool, ManyShortCalls) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  for (int call = 0; call < 3000; ++call) {
    pool.parallel_for(4, [&](int64_t begin, int64_t end, int) { total += end - begin; });
  }
  EXPECT_EQ(total.load(), 12000);
}

// rest() only shortens the workers' idle spin: calls before, between and after it (including
// rest() with no job in flight, twice in a row, and right before a job) still cover every index
// on every thread, whether the workers are spinning or asleep when the job arrives.
TEST(ThreadPool, RestBetweenCallsKeepsEveryCallComplete) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  std::atomic<int> worker_chunks{0};
  pool.rest();
  for (int call = 0; call < 2000; ++call) {
    pool.parallel_for(9, [&](int64_t begin, int64_t end, int thread_index) {
      total += end - begin;
      if (thread_index != 0) ++worker_chunks;
    });
    if (call % 3 != 0) pool.rest();
    if (call % 7 == 0) pool.rest();
    if (call % 50 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  EXPECT_EQ(total.load(), 18000);
  EXPECT_EQ(worker_chunks.load(), 4000);
}

TEST(ThreadPool, NestedCallsRunInline) {
  ThreadPool pool(2);
  std::atomic<int> inner{0};
  pool.parallel_for(2, [&](int64_t, int64_t, int outer_thread) {
    pool.parallel_for(10, [&](int64_t begin, int64_t end, int thread) {
      EXPECT_EQ(thread, outer_thread);
      inner += static_cast<int>(end - begin);
    });
  });
  EXPECT_EQ(inner.load(), 20);
}

TEST(ThreadPool, ConcurrentCallersAreSerialised) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c) {
    callers.emplace_back([&] {
      for (int k = 0; k < 200; ++k) {
        pool.parallel_for(10, [&](int64_t begin, int64_t end, int) { total += end - begin; });
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 3 * 200 * 10);
}

TEST(ThreadPool, SizeOneRunsInlineAndRejectsZero) {
  ThreadPool pool(1);
  int calls = 0;
  pool.parallel_for(50, [&](int64_t begin, int64_t end, int thread) {
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 50);
    EXPECT_EQ(thread, 0);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_THROW(ThreadPool(0), Error);
}

TEST(ThreadPool, PhysicalCoreCountIsPlausible) {
  const int cores = physical_core_count();
  EXPECT_GE(cores, 1);
  EXPECT_LE(cores, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

// A pool whose threads the system cannot start refuses with Error(kIo) and leaves no worker
// running: a joinable std::thread destroyed in the failed constructor would terminate the
// process (`llmserve run --threads 100000` once aborted so). Run in a child process with 1 GiB of
// address space, where 4,000 thread stacks (8 MiB each) cannot be reserved.
TEST(ThreadPool, RefusesWhenTheSystemCannotStartItsThreads) {
#ifdef LLMS_TEST_UNDER_ASAN
  // ASan reserves terabytes of shadow address space.
  GTEST_SKIP() << "an address-space limit does not work under ASan";
#else
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const rlimit limit{rlim_t{1} << 30, rlim_t{1} << 30};
    if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(5);
    try {
      ThreadPool pool(4000);
      _exit(2);  // the limit did not bite: no verdict
    } catch (const Error& e) {
      _exit(e.kind() == Error::Kind::kIo ? 0 : 3);
    } catch (...) {
      _exit(4);
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
#endif
}

}  // namespace
}  // namespace llms
