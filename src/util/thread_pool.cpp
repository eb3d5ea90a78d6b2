// util/thread_pool: persistent workers woken by a generation counter (see thread_pool.h).
//
// Protocol: the caller (holding call_mutex) writes the job fields, sets `pending` to the number
// of workers, then bumps `generation` with release order. A worker that sees a new generation
// (acquire) runs its chunk and decrements `pending`; the caller runs chunk 0, then waits for
// `pending` to reach 0 (acquire), which also publishes the workers' error slots. Waiting spins
// for a short while and then sleeps in std::atomic::wait (a futex on Linux).
#include "util/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "util/error.h"

namespace llms {
namespace {

// How long an idle thread spins before it sleeps. Long enough to bridge the gap between two
// matmuls of a decode step, short enough not to burn a core when the engine is idle.
constexpr auto kSpinTime = std::chrono::microseconds(200);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins, then sleeps, until `value` differs from `old`; returns the new value. The spin ends
// early once `resting` is set.
template <class T>
T wait_while_equal(const std::atomic<T>& value, T old, const std::atomic<bool>& resting) {
  T now = value.load(std::memory_order_acquire);
  if (now != old) return now;
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (int spins = 1;; ++spins) {
    cpu_relax();
    now = value.load(std::memory_order_acquire);
    if (now != old) return now;
    if (resting.load(std::memory_order_relaxed)) break;
    if (spins % 64 == 0 && std::chrono::steady_clock::now() >= deadline) break;
  }
  for (;;) {
    value.wait(old, std::memory_order_acquire);
    now = value.load(std::memory_order_acquire);
    if (now != old) return now;
  }
}

// The pool whose chunk the current thread is running (for nesting), and its index there.
thread_local const void* tls_pool = nullptr;
thread_local int tls_thread_index = 0;

bool read_int_file(const std::string& path, long* value) {
  std::ifstream in(path);
  return static_cast<bool>(in >> *value);
}

}  // namespace

int physical_core_count() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  std::set<std::pair<long, long>> cores;
  if (sched_getaffinity(0, sizeof(mask), &mask) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (!CPU_ISSET(cpu, &mask)) continue;
      const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
      long package = 0;
      long core = 0;
      if (!read_int_file(dir + "physical_package_id", &package) ||
          !read_int_file(dir + "core_id", &core)) {
        cores.clear();
        break;
      }
      cores.emplace(package, core);
    }
  }
  if (!cores.empty()) return static_cast<int>(cores.size());
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

struct ThreadPool::State {
  std::mutex call_mutex;
  std::vector<std::thread> workers;
  std::vector<std::exception_ptr> errors;  // one slot per thread index

  // The current job; written by the caller before the generation bump.
  RangeFn fn{};
  int64_t n = 0;
  int64_t grain = 1;
  int64_t n_units = 0;  // ceil(n / grain)
  bool stop = false;

  alignas(64) std::atomic<uint32_t> generation{0};
  // Set by rest(), cleared by the next job: idle workers skip their spin. Only a hint, so
  // relaxed order suffices; a worker that misses it spins its usual 200 µs.
  std::atomic<bool> resting{false};
  alignas(64) std::atomic<uint32_t> pending{0};
};

namespace {

// Chunk t of n_threads: units [t * q + min(t, r), ...) with q, r = divmod(n_units, n_threads).
void chunk_bounds(int64_t n, int64_t grain, int64_t n_units, int t, int n_threads, int64_t* begin,
                  int64_t* end) {
  const int64_t q = n_units / n_threads;
  const int64_t r = n_units % n_threads;
  const int64_t u0 = q * t + std::min<int64_t>(t, r);
  const int64_t u1 = u0 + q + (t < r ? 1 : 0);
  // u * grain <= n + grain - 1 never overflows for the n a caller can pass (< 2^62).
  *begin = std::min(n, u0 * grain);
  *end = std::min(n, u1 * grain);
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads), state_(std::make_unique<State>()) {
  if (n_threads < 1) {
    throw Error(Error::Kind::kInvalidArgument,
                "ThreadPool: n_threads must be >= 1, got " + std::to_string(n_threads));
  }
  state_->errors.resize(static_cast<size_t>(n_threads));
  state_->workers.reserve(static_cast<size_t>(n_threads - 1));
  for (int t = 1; t < n_threads; ++t) {
    try {
      state_->workers.emplace_back(&ThreadPool::worker_main, state_.get(), this, t);
    } catch (const std::system_error& e) {
      // The destructor does not run for a constructor that throws: stop the started workers
      // here (a joinable std::thread destroyed would terminate the process).
      stop_workers();
      throw Error(Error::Kind::kIo, "ThreadPool: could start only " + std::to_string(t) + " of " +
                                        std::to_string(n_threads) + " threads (" + e.what() + ")");
    }
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() noexcept {
  {
    std::lock_guard<std::mutex> lock(state_->call_mutex);
    state_->stop = true;
    state_->generation.fetch_add(1, std::memory_order_release);
    state_->generation.notify_all();
  }
  for (std::thread& worker : state_->workers) worker.join();
  state_->workers.clear();
}

void ThreadPool::worker_main(State* state, const ThreadPool* pool, int thread_index) {
  tls_pool = pool;
  tls_thread_index = thread_index;
  uint32_t seen = 0;
  for (;;) {
    seen = wait_while_equal(state->generation, seen, state->resting);
    if (state->stop) return;
    int64_t begin = 0;
    int64_t end = 0;
    chunk_bounds(state->n, state->grain, state->n_units, thread_index, pool->n_threads_, &begin,
                 &end);
    if (begin < end) {
      try {
        state->fn.call(state->fn.object, begin, end, thread_index);
      } catch (...) {
        state->errors[static_cast<size_t>(thread_index)] = std::current_exception();
      }
    }
    if (state->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) state->pending.notify_one();
  }
}

void ThreadPool::rest() { state_->resting.store(true, std::memory_order_relaxed); }

void ThreadPool::run(int64_t n, int64_t grain, RangeFn fn) {
  if (grain < 1) {
    throw Error(Error::Kind::kInvalidArgument,
                "ThreadPool::parallel_for: grain must be >= 1, got " + std::to_string(grain));
  }
  if (n <= 0) return;
  if (tls_pool == this) {  // nested call from inside one of our chunks
    fn.call(fn.object, 0, n, tls_thread_index);
    return;
  }
  const int64_t n_units = n / grain + (n % grain != 0 ? 1 : 0);
  if (n_threads_ == 1 || n_units == 1) {  // nothing to share: skip waking the workers
    const void* saved = tls_pool;
    tls_pool = this;
    tls_thread_index = 0;
    try {
      fn.call(fn.object, 0, n, 0);
    } catch (...) {
      tls_pool = saved;
      throw;
    }
    tls_pool = saved;
    return;
  }

  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.call_mutex);
  s.fn = fn;
  s.n = n;
  s.grain = grain;
  s.n_units = n_units;
  s.pending.store(static_cast<uint32_t>(n_threads_ - 1), std::memory_order_relaxed);
  s.resting.store(false, std::memory_order_relaxed);
  s.generation.fetch_add(1, std::memory_order_release);
  s.generation.notify_all();

  const void* saved = tls_pool;
  tls_pool = this;
  tls_thread_index = 0;
  int64_t begin = 0;
  int64_t end = 0;
  chunk_bounds(n, grain, n_units, 0, n_threads_, &begin, &end);
  if (begin < end) {
    try {
      fn.call(fn.object, begin, end, 0);
    } catch (...) {
      s.errors[0] = std::current_exception();
    }
  }
  tls_pool = saved;

  for (uint32_t left = s.pending.load(std::memory_order_acquire); left != 0;) {
    left = wait_while_equal(s.pending, left, s.resting);
  }

  std::exception_ptr first;
  for (std::exception_ptr& error : s.errors) {
    if (error && !first) first = error;
    error = nullptr;
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace llms
