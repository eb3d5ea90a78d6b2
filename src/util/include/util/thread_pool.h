// util/thread_pool: a persistent pool of compute threads for data-parallel loops.
//
// Contract:
//   - ThreadPool(n) owns n - 1 worker threads that live as long as the pool; the thread that
//     calls parallel_for is worker 0 and does its share of the work, so a pool of size 1 runs
//     everything inline and starts no thread.
//   - parallel_for(n, fn) calls fn(begin, end, thread_index) on disjoint contiguous ranges that
//     cover [0, n) exactly once; chunk t (t < size()) goes to thread t and chunks are balanced
//     to within one grain. With a grain, every chunk boundary except n is a multiple of the
//     grain. Empty chunks are not called. It returns when every chunk has finished.
//   - No heap allocation per call: the callable is passed by reference through a two-pointer
//     wrapper, not copied into a std::function.
//   - An exception thrown by fn in any thread is captured; once all chunks have finished, the
//     one from the lowest thread index is rethrown on the caller (the others are dropped).
//   - Calls from several threads are serialised. A parallel_for issued from inside fn on the
//     same pool (nesting) runs inline on the calling worker as one range, with that worker's
//     index, instead of deadlocking.
//   - Idle workers spin briefly after each job (the next matmul usually follows within
//     microseconds in a decode step), then sleep on a futex until the next job. rest() tells
//     them that no job follows soon (a forward pass has ended), so they sleep at once and leave
//     the core to other threads (the server's I/O thread, a client) until the next job.
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

namespace llms {

// Number of physical cores this process may run on: distinct (package, core) pairs among the
// CPUs of its affinity mask, read from /sys; falls back to std::thread::hardware_concurrency()
// (and to 1) when the topology cannot be read.
int physical_core_count();

class ThreadPool {
 public:
  // n_threads >= 1, else llms::Error(kInvalidArgument); a worker the system cannot start
  // (thread limit, memory) gives llms::Error(kIo) naming how many started, with none left
  // running.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Idle workers stop spinning and sleep until the next parallel_for. Cheap (one store); call it
  // when the caller's next parallel_for is far off, e.g. after a forward pass.
  void rest();

  template <class F>
  void parallel_for(int64_t n, F&& fn) {
    parallel_for(n, 1, std::forward<F>(fn));
  }

  // grain >= 1: chunks are whole multiples of grain (the last one may be shorter).
  template <class F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    using Fn = std::remove_reference_t<F>;
    RangeFn ref{const_cast<void*>(static_cast<const void*>(std::addressof(fn))),
                [](void* object, int64_t begin, int64_t end, int thread_index) {
                  (*static_cast<Fn*>(object))(begin, end, thread_index);
                }};
    run(n, grain, ref);
  }

 private:
  // A non-owning reference to a callable(int64_t, int64_t, int).
  struct RangeFn {
    void* object;
    void (*call)(void* object, int64_t begin, int64_t end, int thread_index);
  };
  struct State;

  void run(int64_t n, int64_t grain, RangeFn fn);
  void stop_workers() noexcept;  // wakes every worker to return, and joins it
  static void worker_main(State* state, const ThreadPool* pool, int thread_index);

  int n_threads_;
  std::unique_ptr<State> state_;
};

}  // namespace llms
