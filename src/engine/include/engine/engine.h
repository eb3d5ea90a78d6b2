// engine/engine: the request lifecycle around one model, one KV pool and one scheduler.
//
// Contract: add_request() queues a request (validated and refused with llms::Error when it can
// never run); step() runs one scheduler step (one forward pass over a mixed batch), samples for
// every sequence that reached the end of its known tokens, applies stop rules (end-of-generation
// tokens, stop token ids, stop strings held back and never streamed, max_tokens, end of the
// context) and delivers RequestOutput events through the request's callback. abort() ends a
// request in any state and frees its KV blocks at once. The n samples of a request prefill its
// prompt once and then fork, sharing the prompt's blocks (copy-on-write).
//
// The model runs behind a model::ModelRunner (the CPU transformer today): the engine hands it one
// StepBatch per step and reads back the logits rows it asked for, several per sequence when
// speculating. With speculation on (config.speculative), sequences that decode get draft tokens
// from a proposer (spec/), which the scheduler schedules as ordinary query tokens; the verifier
// keeps exactly what the target model would have produced (greedy: the same tokens; sampling:
// the same distribution) and the rejected drafts are rolled back in the KV manager.
//
// Faults stay inside the requests they concern: an exception thrown while a step runs the model
// is traced to its sequences (each is re-run alone), and one thrown while sampling, verifying or
// delivering a request's tokens ends that request; either way the request ends with
// FinishReason::kError and a message, its blocks are freed and every other request goes on.
//
// Threading: an Engine is used from one thread (the engine thread); it holds no locks.
// Everything a step needs is allocated at construction or on the largest step seen.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/request.h"
#include "gguf/gguf_file.h"
#include "kv/kv_budget.h"
#include "kv/kv_cache_manager.h"
#include "sched/scheduler.h"
#include "spec/speculative_config.h"
#include "tokenizer/tokenizer.h"

namespace llms::engine {

inline constexpr int32_t kMaxNumSeqs = 16384;
inline constexpr int32_t kMaxSamplesPerRequest = 128;  // GenerationRequest::n
inline constexpr int32_t kMaxNumBatchedTokens = 1 << 20;
inline constexpr int64_t kMaxStreamingModelLen = int64_t{1} << 24;  // with streaming_window

// Where the model runs: the CPU transformer (model/cpu_runner.h) or an NVIDIA GPU
// (cuda/cuda_backend.h; refused with the reason where the build or the machine has none).
enum class Device { kCpu, kCuda };

struct EngineConfig {
  Device device = Device::kCpu;
  int cuda_device = 0;  // the GPU's index, with Device::kCuda
  // With Device::kCuda: the share of the card's memory the engine may take (weights, step
  // buffers, KV pool), as vLLM's --gpu-memory-utilization; the KV pool gets what is left.
  double gpu_memory_utilization = 0.9;
  bool enforce_eager = false;  // with Device::kCuda: no captured step graphs
  // With Device::kCuda: keep batch invariance (cuda::RunnerOptions::batch_invariant); the CPU
  // always keeps it.
  bool batch_invariant = false;
  int32_t block_size = 16;
  // KV pool size: n_kv_blocks when > 0, else kv_cache_memory bytes when > 0, else
  // kv_memory_fraction of the memory available at start (capped at what max_num_seqs full-length
  // sequences could use).
  int32_t n_kv_blocks = 0;
  int64_t kv_cache_memory = 0;
  double kv_memory_fraction = 0.25;
  bool enable_prefix_caching = true;
  // Sliding-window layers (Gemma 3) in cache groups of their own that give back the blocks that
  // fall out of their window, so a long sequence costs its window there, not its context
  // (kv/kv_groups.h). false: every layer keeps the whole context (vLLM's
  // --disable-hybrid-kv-cache-manager).
  bool hybrid_kv_cache = true;
  // Attention sinks plus a recent window (StreamingLLM; off while streaming_window is 0): every
  // full-attention layer attends to the first attention_sinks tokens and the last
  // streaming_window ones, so with the hybrid cache a sequence holds only those blocks and may
  // run past the model's context (max_model_len up to kMaxStreamingModelLen).
  int64_t streaming_window = 0;
  int64_t attention_sinks = 0;
  // H2O-style heavy-hitter eviction (off while h2o_budget is 0; kv/heavy_hitters.h): a sequence
  // holds at most h2o_budget tokens' blocks, its last h2o_recent tokens and the blocks that drew
  // the most attention so far; the rest is given back. Changes what later tokens compute.
  int64_t h2o_budget = 0;
  int64_t h2o_recent = 0;
  // KV element type (f32, f16, int8 or fp8): f16, like llama.cpp's default cache, halves what
  // attention reads per step against f32, and the 8-bit types halve it again.
  kv::KvCacheType kv_cache_dtype = kv::KvCacheType::kF16;
  // max_model_len 0: the model's training context; more than it is refused. max_num_seqs is at
  // most kMaxNumSeqs and max_num_batched_tokens at most kMaxNumBatchedTokens (the step buffers
  // are sized from them at start).
  sched::SchedulerConfig scheduler = {.max_model_len = 0};
  int n_threads = 0;  // 0: one per physical core
  // Check the KV invariants after every step (on in debug builds and tests).
  bool check_invariants = false;
  // Speculative decoding (off by default). Method kDraft needs draft_file: a model with the
  // same tokenizer (refused at start naming the first token that differs), which must outlive
  // the engine; its KV pool has as many blocks as the target's.
  spec::SpeculativeConfig speculative;
  const gguf::GgufFile* draft_file = nullptr;
  // Fault injection for tests: a step whose batch holds this token id throws inside the model
  // run, as a failing kernel would. -1: off.
  int32_t fault_token_id = -1;
  // Said once when something the caller should know happens while serving (a step-time target
  // no prompt chunk fits); null: nothing is said. Called on the engine thread.
  std::function<void(const std::string&)> on_warning;
};

struct EngineStats {
  int32_t n_running = 0;
  int32_t n_waiting = 0;
  double kv_usage = 0.0;  // fraction of blocks referenced
  int64_t prefix_queries = 0;
  int64_t prefix_hits = 0;
  int64_t n_preemptions = 0;
  int64_t prompt_tokens_total = 0;
  int64_t generation_tokens_total = 0;
  int64_t n_steps = 0;
  int64_t h2o_evictions = 0;  // blocks given back by heavy-hitter eviction
  // Speculative decoding, as vLLM counts it: verifications of at least one draft, drafted and
  // accepted tokens, and accepted drafts by position (index 0: the first draft of a step).
  int64_t spec_num_drafts = 0;
  int64_t spec_num_draft_tokens = 0;
  int64_t spec_num_accepted_tokens = 0;
  std::vector<int64_t> spec_accepted_per_pos;
  int64_t n_failed_requests = 0;  // ended by a fault (FinishReason::kError)
  // Stall-free batching: what the step-time model has learned (from each step's wall time,
  // drafting and evictions included: what a stream waits), the target the latest step with
  // decode work and prompts was sized for (before one, the base target; 0: none), and the steps
  // where even one prompt token was predicted to exceed it (they took one anyway).
  sched::StepTimeEstimate step_time;
  double step_time_target_s = 0.0;
  int64_t steps_target_unreachable = 0;
};

struct KvPoolInfo {
  std::string device = "cpu";  // where the pool lives: "cpu" or "cuda:N"
  int32_t n_blocks = 0;        // pages of block_size tokens of one cache group's layers
  int32_t block_size = 0;
  int32_t n_groups = 1;         // cache groups (kv/kv_groups.h)
  int32_t n_window_groups = 0;  // of them, sliding-window groups that give blocks back
  int64_t sliding_window = 0;   // their window in tokens (the largest)
  int64_t attention_sinks = 0;  // and the first tokens they keep (StreamingLLM)
  int64_t bytes = 0;
  int64_t max_model_len = 0;
  int64_t max_seqs_at_model_len = 0;
  int64_t max_seqs_at_2k = 0;
};

class Engine {
 public:
  // `file` and `tokenizer` must outlive the engine.
  Engine(const gguf::GgufFile& file, const tokenizer::Tokenizer& tokenizer, EngineConfig config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Returns the request id. Throws llms::Error(kInvalidArgument) naming the bad field: empty
  // prompt, token ids outside the vocabulary, max_tokens < 1, n < 1, bad sampling values, or a
  // prompt + max_tokens that exceeds the context or the KV pool (with both numbers).
  int64_t add_request(GenerationRequest request, OutputCallback on_output);
  // The checks of add_request without adding. Reads only state fixed at construction, so any
  // thread may call it while another runs step().
  void validate(const GenerationRequest& request) const;
  // Ends the request (finish reason abort) and frees its blocks. Unknown or finished: ignored.
  void abort(int64_t request_id);

  // Runs one step. Returns false when there was nothing to do.
  bool step();
  bool has_unfinished() const;

  const KvPoolInfo& kv_pool() const;
  // Allocated token slots not holding a computed token, over allocated slots (0 when none are
  // allocated). Exact when no blocks are shared; shared blocks count once per holder.
  double kv_waste() const;
  EngineStats stats() const;
  int64_t max_model_len() const;
  int32_t n_vocab() const;
  const kv::KvCacheManager& kv_cache() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace llms::engine
