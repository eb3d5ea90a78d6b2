// sched/scheduler: continuous batching as pure logic (no tensors, no model).
//
// Each sequence has its known tokens (prompt, then output appended by the engine) and
// n_computed, how many of them are in the KV cache. Every step closes part of that gap under a
// token budget, in three passes:
//  1. decode: every running sequence whose next token is all it lacks (its output has begun)
//     gets that token, in policy order;
//  2. prefill: running sequences with a prompt (or a recompute) still to compute, then waiting
//     ones in policy order, share the budget left max-min fairly (a prompt that needs less than
//     an equal share takes what it needs, the rest split the remainder evenly, the odd tokens to
//     the earliest): several long prompts advance together, so none waits behind another's
//     whole prefill, and a short one finishes in the step it arrives. At most
//     max_long_partial_prefills prompts longer than a quarter of the budget prefill at once (in
//     policy order; a short prompt may pass a long one held back by that limit, never one held
//     back for lack of blocks);
//  3. drafts (below).
// There is no prefill or decode mode: a prefix-cache hit, a recompute after preemption and a
// decode step are the same rule.
//
// Stall-free batching (Sarathi-Serve): a step that carries decode work must not keep the streams
// waiting for a long prefill chunk. With a step-time target (max_step_seconds, or one derived
// from the measured decode step), pass 2 takes only as many prompt tokens as the step-time model
// (sched/step_time_model.h, fitted by the engine's observe_step() calls) predicts fit under the
// target beside pass 1's work, and at least one (the step then says the target was out of
// reach), so prompts progress while blocks last. A step without decode work runs at the full
// budget. Drafts (pass 3) may claim up to half the budget ahead of the prompts.
//
// Out of KV blocks while scheduling a running sequence: the lowest-priority, latest-arrived
// running sequence is preempted (a running prompt that would be that sequence while later ones
// already decode in this step waits a step instead, see scheduler.cpp) (its blocks freed,
// n_computed reset; its tokens, output included, are kept and recomputed later). A running request
// therefore never fails for lack of memory; one that could never fit (its prompt + max_new_tokens
// exceed the pool or max_model_len) is refused by add().
//
// Speculative tokens: after the engine appends a sampled token it may append draft tokens
// (append_draft). They are ordinary tokens to close the gap with, except that they come last: a
// step first gives every running sequence its non-draft tokens (preempting only for those), then
// hands the budget and free blocks left to the drafts, as many of each sequence's as fit, and
// drops the rest; preemption drops them all. Their blocks are not committed
// to the prefix cache until accept_draft() keeps them; the rejected ones are rolled back there.
// Drafts are not held to the step-time target (the engine's draft-length policy weighs their
// cost itself).
//
// Policies: kFcfs (arrival order) or kPriority (lower value first, as vLLM; ties by arrival).
// Under kPriority a waiting sequence may preempt running ones of strictly lower priority that
// this step has not scheduled, never one that comes before a sequence it has.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "sched/step_time_model.h"

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
  // Prompts longer than a quarter of max_num_batched_tokens that may prefill at once (>= 1).
  int32_t max_long_partial_prefills = 4;
  // The step-time target of a step that carries decode work, in seconds (stall-free batching):
  // > 0 a fixed target; 0 none (only the token budget limits a step); < 0 derived from the
  // step-time model: itl_target_factor x a one-sequence decode step, but at least enough that
  // the step's decode work takes at most 1 - min_prefill_share of it, so a large decode batch
  // cannot starve the prompts.
  double max_step_seconds = 0.0;
  double itl_target_factor = 2.0;
  double min_prefill_share = 0.75;
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
  StepShape shape;                           // the step in the step-time model's terms
  double target_seconds = 0.0;  // the step-time target this step was sized for (0: none)
  // Even one prompt token beside the decode work was predicted to exceed the target; the step
  // took one anyway so prompts progress.
  bool target_unreachable = false;
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

  // The wall time of the step `output` described (scheduling to the hand-off of its tokens),
  // for the step-time model that sizes prefill chunks under the target.
  void observe_step(const SchedulerOutput& output, double seconds);
  const StepTimeModel& step_time_model() const;
  // The target a step with decode work is sized for now, in seconds (0: none, or not known yet).
  double step_time_target() const;

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
