// Test support for the scheduler: a fake engine loop with no model.
//
// step() calls schedule(), checks the step against the scheduler's and the KV manager's
// contracts (budgets, state of every scheduled sequence, block tables covering the step, write
// ranges exclusively owned, a valid StepBatch, KV invariants), "computes" it with on_step_done(),
// and for every sequence that samples appends the fake token fake_token(seq_id, length), which
// depends only on the sequence and its length: any correct schedule (batched, chunked,
// preempted, prefix-cached) yields the same token stream. A sequence that reaches its
// max_new_tokens is removed and its stream recorded in finished().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "sched/scheduler.h"

namespace llms::sched::testing {

inline int32_t fake_token(int64_t seq_id, size_t length) {
  return static_cast<int32_t>(seq_id * 1000 + static_cast<int64_t>(length));
}

// prompt + the outputs fake_token() gives: what a sequence must end as.
std::vector<int32_t> expected_stream(int64_t seq_id, std::vector<int32_t> prompt,
                                     int32_t max_new_tokens);

// n tokens starting at `first`, counting up (distinct prompts for distinct `first`).
std::vector<int32_t> iota_tokens(int32_t n, int32_t first);

class FakeEngine {
 public:
  FakeEngine(Scheduler& sched, kv::KvCacheManager& kv) : sched_(sched), kv_(kv) {}

  void add(int64_t seq_id, std::vector<int32_t> prompt, int32_t max_new_tokens,
           int32_t priority = 0, uint64_t extra_key = 0);
  // Forks a running `parent` whose tokens are all computed (the engine's n > 1 case).
  void fork(int64_t parent, int64_t child);
  void abort(int64_t seq_id);

  // One engine step (see the file comment); returns what schedule() returned.
  SchedulerOutput step();
  // Steps until no sequence is left; returns the number of steps. Fails the test (and stops)
  // if that takes more than max_steps or a step is empty while sequences remain.
  int run_to_completion(int max_steps);

  // Called for each sequence that sampled, after on_step_done() and before its token is
  // appended (the one moment fork() is allowed); returns the children it made with fork(),
  // which then get their own fake token too.
  void set_fork_hook(std::function<std::vector<int64_t>(int64_t seq_id)> hook) {
    fork_hook_ = std::move(hook);
  }

  bool idle() const { return live_.empty(); }
  const std::map<int64_t, std::vector<int32_t>>& finished() const { return finished_; }
  const std::vector<SchedulerOutput>& history() const { return history_; }

 private:
  struct Live {
    std::vector<int32_t> tokens;  // what the scheduler must hold for it
    int32_t n_prompt = 0;
    int32_t max_new_tokens = 0;
  };
  void check_step(const SchedulerOutput& out);

  Scheduler& sched_;
  kv::KvCacheManager& kv_;
  std::map<int64_t, Live> live_;
  std::map<int64_t, std::vector<int32_t>> finished_;
  std::vector<SchedulerOutput> history_;
  std::function<std::vector<int64_t>(int64_t)> fork_hook_;
};

}  // namespace llms::sched::testing
