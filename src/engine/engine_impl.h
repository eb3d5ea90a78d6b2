// engine/engine_impl: the Engine's state and helpers, shared by its source files (engine.cpp:
// the request lifecycle and the step; speculation.cpp: proposers and drafts). Internal to the
// module: not under include/.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"
#include "kv/heavy_hitters.h"
#include "kv/kv_cache_manager.h"
#include "kv/step_batch.h"
#include "model/model_runner.h"
#include "sampling/sampler.h"
#include "spec/draft_length_policy.h"
#include "spec/draft_model_proposer.h"
#include "spec/proposer.h"
#include "spec/verifier.h"
#include "tokenizer/detokenizer.h"
#include "util/thread_pool.h"

namespace llms::engine {
namespace detail {

using Clock = std::chrono::steady_clock;

// A forward pass at least this long lets the pool rest afterwards (see Impl::step).
inline constexpr double kRestAfterForwardSeconds = 2e-3;

inline double now_seconds() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

inline double gib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 30); }

struct Sample {
  int64_t seq_id = 0;
  int32_t index = 0;
  std::unique_ptr<sampling::Sampler> sampler;
  std::unique_ptr<tokenizer::IncrementalDetokenizer> detok;
  int32_t n_generated = 0;
  bool finished = false;
  int32_t n_preemptions = 0;
  // The token tree its pending drafts form, as a StepBatch tree region: [0] = -1 for the last
  // sampled token (the root), then draft i's parent at i + 1. Empty: the drafts are a chain.
  std::vector<int32_t> draft_tree;
};

struct Request {
  int64_t id = 0;
  GenerationRequest params;
  OutputCallback on_output;
  std::vector<Sample> samples;  // samples[0] is the parent; the rest appear at the fork
  bool forked = false;
  int32_t n_finished = 0;
  double first_scheduled = -1.0;
  double first_token = -1.0;
  RequestMetrics metrics;
};

}  // namespace detail

using detail::Request;
using detail::Sample;

struct Engine::Impl {
  Impl(const gguf::GgufFile& file, const tokenizer::Tokenizer& tok, EngineConfig cfg);

  int32_t pool_blocks(const EngineConfig& cfg) const;
  // The target model's runner on the configured device.
  std::unique_ptr<model::ModelRunner> make_runner(const gguf::GgufFile& file) const;
  void make_proposer(int32_t n_blocks);
  Sample make_sample(const Request& request, int32_t index);
  void deliver(Request& request, Sample& sample, const spec::Verification& v,
               const model::LogitsView& logits, int32_t first_row);
  void finish_sample(Request& request, Sample& sample, FinishReason reason, std::string stop_reason,
                     RequestOutput& out);
  void end_request(Request& request, FinishReason reason, const std::string& message);
  void emit(Request& request, RequestOutput& out);
  model::LogitsView execute(const kv::StepBatch& step_batch);
  model::LogitsView execute_isolating(const sched::SchedulerOutput& plan,
                                      std::unordered_map<int64_t, std::string>& failed);
  void process_rows(const sched::ScheduledSequence& s, const model::LogitsView& logits,
                    int32_t first_row);
  // The tree region of a scheduled sequence's step (empty for a chain or no drafts).
  std::span<const int32_t> draft_tree_of(const sched::ScheduledSequence& s) const;
  // Moves a verified tree's kept branch into the slots after its root and keeps it.
  void keep_branch(const sched::ScheduledSequence& s, const spec::Verification& v);
  void propose_drafts();
  bool step();

  const tokenizer::Tokenizer& tok;
  EngineConfig config;
  std::shared_ptr<ThreadPool> pool;
  std::unique_ptr<model::ModelRunner> runner;
  kv::KvGroupLayout kv_layout;
  // H2O-style eviction (kv/heavy_hitters.h): each sequence's blocks' accumulated attention.
  kv::HeavyHitterBudget h2o;
  std::unordered_map<int64_t, std::vector<double>> h2o_scores;
  void add_attention_mass(const sched::SchedulerOutput& plan);
  void evict_heavy_hitters(const sched::SchedulerOutput& plan);
  std::unique_ptr<kv::KvCacheManager> kv_cache;
  std::unique_ptr<sched::Scheduler> scheduler;
  KvPoolInfo pool_info;
  std::vector<int32_t> end_ids;

  // Speculation (proposer is null when off).
  std::unique_ptr<spec::Proposer> proposer;
  spec::DraftModelProposer* draft_proposer = nullptr;  // proposer, when it runs a draft model
  std::unique_ptr<spec::DraftLengthPolicy> draft_policy;
  spec::Verifier verifier;

  int64_t next_request_id = 1;
  int64_t next_seq_id = 1;
  std::unordered_map<int64_t, std::unique_ptr<Request>> requests;
  struct SeqRef {
    Request* request;
    int32_t index;
  };
  std::unordered_map<int64_t, SeqRef> seqs;

  kv::StepBatch batch;
  kv::StepBatch single;                // one sequence's part of a failed step
  std::vector<float> isolated_logits;  // rows of a step re-run sequence by sequence
  std::vector<int32_t> drafts_scratch;
  // propose_drafts()'s lists, kept so a step allocates nothing once they have grown.
  std::vector<int64_t> decoding_scratch;
  std::vector<spec::DraftLengthPolicy::Outlook> outlook_scratch;  // parallel to decoding_scratch
  std::vector<spec::ProposalRequest> asks_scratch;
  std::vector<std::vector<int32_t>> proposals_scratch;
  std::vector<std::vector<int32_t>> parents_scratch;
  std::vector<kv::SlotCopy> slot_copies_scratch;
  std::vector<int32_t> tree_depths_scratch;
  EngineStats totals;
  bool warned_target_unreachable = false;
  double last_target_seconds = 0.0;  // of the latest step sized for a step-time target
};

}  // namespace llms::engine
