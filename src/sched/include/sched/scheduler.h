// sched/scheduler: continuous batching as pure logic (no tensors, no model).
//
// Each sequence has its known tokens (prompt, then output appended by the engine) and
// n_computed, how many of them are in the KV cache. Every step closes part of that gap under a
// token budget: running sequences first (a decode token, or the next chunk of an unfinished
// prefill), then waiting ones in policy order, while max_num_batched_tokens and max_num_seqs
// allow. A long prompt is split into chunks (chunked prefill), so decoding keeps flowing.
// There is no prefill or decode mode: a prefix-cache hit, a recompute after preemption and a
// decode step are the same rule.
//
// Out of KV blocks while scheduling a running sequence: the lowest-priority, latest-arrived
// running sequence is preempted (its blocks freed, n_computed reset; its tokens, output
// included, are kept and recomputed later). A running request therefore never fails for lack
// of memory; one that could never fit (its prompt + max_new_tokens exceed the pool or
// max_model_len) is refused by add().
//
// Speculative tokens: after the engine appends a sampled token it may append draft tokens
// (append_draft). They are ordinary tokens to close the gap with, except that they come last: a
// step first gives every running sequence its non-draft tokens (preempting only for those), then
// hands the budget and free blocks left to the drafts, as many of each sequence's as fit, and
// drops the rest; preemption drops them all. Their blocks are not committed
// to the prefix cache until accept_draft() keeps them; the rejected ones are rolled back there.
//
// Policies: kFcfs (arrival order) or kPriority (lower value first, as vLLM; ties by arrival).
// Under kPriority a waiting sequence may preempt running ones of strictly lower priority.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace llms::sched {

enum class Policy { kFcfs, kPriority };

struct SchedulerConfig {
  int32_t max_num_batched_tokens = 2048;
  int32_t max_num_seqs = 64;
  int64_t max_model_len = 4096;
  Policy policy = Policy::kFcfs;
  // Largest prefill chunk one sequence may take in one step (0: only the budget limits it), so
  // one long prompt cannot take a whole step from other waiting prompts.
  int32_t long_prefill_token_threshold = 0;
};

struct ScheduledSequence {
  int64_t seq_id = 0;
  int32_t n_computed_before = 0;  // tokens already in the cache
  int32_t n_new = 0;              // tokens computed this step
  // The chunk reaches the last known token: the engine samples from its logits after the step.
  bool samples = false;
  // Of the chunk's last tokens, how many are drafts (samples is then set): the engine wants
  // logits for the last 1 + n_draft rows and verifies the drafts against them.
  int32_t n_draft = 0;
};

struct SchedulerOutput {
  std::vector<ScheduledSequence> scheduled;  // the step's order
  std::vector<int64_t> preempted;            // preempted during this schedule() call
  std::vector<kv::BlockCopy> copies;         // copy-on-write: do these before the forward pass
  int32_t n_tokens = 0;                      // sum of n_new
  bool empty() const { return scheduled.empty(); }
};

struct SequenceInfo {
  int32_t n_prompt = 0;
  int32_t n_computed = 0;
  int32_t n_cached_prefix = 0;  // tokens taken from the prefix cache at the latest admission
  int32_t n_preemptions = 0;
  int32_t n_draft = 0;  // trailing draft tokens not yet accepted
  bool is_running = false;
};

class Scheduler {
 public:
  Scheduler(SchedulerConfig config, kv::KvCacheManager& kv);

  const SchedulerConfig& config() const { return config_; }
  // The most tokens one sequence computes in a step (a prefill chunk: the budget, or
  // long_prefill_token_threshold when smaller).
  int32_t max_step_tokens() const;

  // Queues a new sequence. Throws llms::Error(kInvalidArgument) with the numbers when the prompt
  // is empty or prompt + max_new_tokens exceeds max_model_len or the whole KV pool.
  void add(int64_t seq_id, std::vector<int32_t> prompt, int32_t max_new_tokens,
           int32_t priority = 0, uint64_t extra_key = 0);

  // A running sequence `child` that shares all of `parent`'s tokens and KV blocks (the n > 1
  // samples of one prompt, forked once the prompt is computed).
  void fork(int64_t parent, int64_t child);

  // Decides the next step; allocates KV blocks for it. Empty when nothing can run.
  SchedulerOutput schedule();

  // After the forward pass of `output`: every scheduled sequence's n_computed advances by n_new
  // and completed blocks are committed to the prefix cache.
  void on_step_done(const SchedulerOutput& output);

  // The engine appends each sampled token (to sequences whose ScheduledSequence::samples was set).
  void append_token(int64_t seq_id, int32_t token);

  // Appends draft tokens after the last sampled one: the sequence is running, has every token but
  // that last one computed and no drafts, and prompt + output + drafts stay within
  // max_new_tokens (else llms::Error(kInvalidArgument)). Empty: nothing happens.
  void append_draft(int64_t seq_id, std::span<const int32_t> draft);

  // After the step that computed a sequence's drafts: keeps the first n_accepted of them, drops
  // the rest (their KV positions are rolled back in the KV manager) and commits the kept blocks.
  // The engine then appends the token it sampled after the last accepted one.
  // With a token tree the drafts are its nodes and the kept ones a branch: `kept` (n_accepted
  // tokens) replaces the first n_accepted drafts, whose KV slots the engine has already moved
  // the branch into.
  void accept_draft(int64_t seq_id, int32_t n_accepted, std::span<const int32_t> kept = {});

  // Removes a sequence in any state (finished or aborted) and frees its blocks. Unknown: ignored.
  void remove(int64_t seq_id);

  bool has_sequence(int64_t seq_id) const;
  std::span<const int32_t> tokens(int64_t seq_id) const;
  SequenceInfo info(int64_t seq_id) const;
  int32_t n_running() const;
  int32_t n_waiting() const;
  int64_t n_preemptions_total() const;

 private:
  struct State;
  SchedulerConfig config_;
  kv::KvCacheManager& kv_;
  std::shared_ptr<State> state_;
};

}  // namespace llms::sched
