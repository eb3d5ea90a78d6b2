// engine/engine: one step = schedule, copy-on-write, forward, sample or verify, stop rules,
// outputs, then drafts for the next step.
//
// Each of a request's n samples is one scheduler sequence. Sample 0 (the parent) computes the
// prompt; at its first sampling step the other samples are forked from it and every sample
// draws its first token from the same logits row with its own sampler (a seeded request gives
// sample i the seed + i), so the prompt is computed once and its blocks are shared.
//
// Speculation: after a step, every sequence that just got a token and decodes on may get up to
// k drafts (k from spec::DraftLengthPolicy, capped by what max_tokens leaves), appended to the
// scheduler as tokens to compute. The next step computes them with the rest and returns 1 + k
// rows for the sequence; spec::Verifier keeps a prefix of the drafts plus one token, the
// scheduler rolls the rest back, and the kept tokens go through the stop rules one by one as
// if each had been sampled alone. Without drafts a step is the plain decode step. The proposer
// and the drafts are in speculation.cpp; the state both files share in engine_impl.h.
#include "engine/engine.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <new>
#include <unordered_map>

#include "cuda/cuda_backend.h"
#include "engine_impl.h"
#include "kv/step_batch.h"
#include "model/cpu_runner.h"
#include "sampling/sampler.h"
#include "spec/verifier.h"
#include "tokenizer/detokenizer.h"
#include "util/error.h"
#include "util/system_memory.h"
#include "util/thread_pool.h"

namespace llms::engine {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kError:
      return "error";
    case FinishReason::kNone:
      break;
  }
  return "";
}

using detail::gib;
using detail::kRestAfterForwardSeconds;
using detail::now_seconds;

Engine::Impl::Impl(const gguf::GgufFile& file, const tokenizer::Tokenizer& tokenizer_ref,
                   EngineConfig cfg)
    : tok(tokenizer_ref),
      config(std::move(cfg)),
      pool(std::make_shared<ThreadPool>(config.n_threads > 0 ? config.n_threads
                                                             : physical_core_count())) {
  config.speculative.validate();
  if (config.speculative.method == spec::Method::kDraft && config.draft_file == nullptr) {
    throw Error(Error::Kind::kInvalidArgument,
                "--speculative-method draft needs --draft-model (a model file or name)");
  }
  if (config.device == Device::kCuda && config.speculative.method == spec::Method::kDraft) {
    // The draft runs beside the target on the CPU only (its pool is sized after the target's,
    // which on a GPU takes what the utilization leaves).
    throw Error(Error::Kind::kUnsupported,
                "--speculative-method draft is not implemented with --device cuda yet (ngram is)");
  }
  runner = make_runner(file);
  const model::ModelConfig& model_config = runner->config();
  if (tok.n_vocab() > runner->n_vocab()) {
    throw Error(Error::Kind::kInvalidFile, "the tokenizer has more tokens than the model's output");
  }
  if (config.block_size < 1 || config.block_size > 1024) {
    throw Error(Error::Kind::kInvalidArgument, "block_size must be in [1, 1024]");
  }
  auto& sc = config.scheduler;
  const int64_t train_ctx =
      model_config.n_ctx_train > 0 ? static_cast<int64_t>(model_config.n_ctx_train) : int64_t{4096};
  if (sc.max_model_len < 0) {
    throw Error(Error::Kind::kInvalidArgument, "max_model_len must be >= 0 (0: the model's)");
  }
  if (config.streaming_window != 0 || config.attention_sinks != 0) {
    runner->set_streaming_attention(config.streaming_window, config.attention_sinks);
  }
  const bool streaming = config.streaming_window > 0;
  h2o = kv::HeavyHitterBudget{config.h2o_budget, config.h2o_recent};
  h2o.validate(config.block_size);
  if (h2o.enabled()) {
    if (streaming || model_config.windowed_kv_layout().has_window()) {
      throw Error(Error::Kind::kInvalidArgument,
                  "h2o_budget: heavy-hitter eviction needs a model without sliding-window layers "
                  "and no streaming_window");
    }
    runner->track_attention_mass(true);
  }
  if (streaming && config.speculative.method == spec::Method::kDraft) {
    // The draft model's own pool holds whole contexts and its positions stop at its context.
    throw Error(Error::Kind::kInvalidArgument,
                "streaming_window: a draft model cannot follow a stream (use prompt-lookup "
                "speculation, or none)");
  }
  if (!streaming && sc.max_model_len > train_ctx) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("max_model_len {} exceeds the model's context length {} (only a "
                            "streaming_window lets a sequence run past it)",
                            sc.max_model_len, train_ctx));
  }
  if (streaming && sc.max_model_len > kMaxStreamingModelLen) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("max_model_len {} exceeds {} (the most a streaming sequence may hold)",
                            sc.max_model_len, kMaxStreamingModelLen));
  }
  if (sc.max_model_len == 0) sc.max_model_len = train_ctx;
  if (sc.max_num_seqs < 1 || sc.max_num_seqs > kMaxNumSeqs) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("max_num_seqs must be in [1, {}]", kMaxNumSeqs));
  }
  if (sc.max_num_batched_tokens < 1 || sc.max_num_batched_tokens > kMaxNumBatchedTokens) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("max_num_batched_tokens must be in [1, {}]", kMaxNumBatchedTokens));
  }
  // Sliding-window layers get cache groups of their own, which give back the blocks that fall
  // out of their window (kv/kv_groups.h).
  kv_layout =
      config.hybrid_kv_cache ? model_config.windowed_kv_layout() : model_config.single_kv_layout();
  // Step buffers first: a runner with its own device memory gives its KV pool what is left.
  try {
    // Logits rows: one per sequence, 1 + k when speculating; more grow on demand.
    const int32_t rows_per_seq = 1 + config.speculative.num_speculative_tokens;
    runner->reserve(sc.max_num_batched_tokens,
                    std::min(sc.max_num_seqs * rows_per_seq, sc.max_num_batched_tokens));
  } catch (const std::bad_alloc&) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("cannot allocate the step buffers for max_num_batched_tokens {} and "
                            "max_num_seqs {} (a vocabulary of {}): lower them",
                            sc.max_num_batched_tokens, sc.max_num_seqs, runner->n_vocab()));
  }
  const int32_t n_blocks = pool_blocks(config);
  runner->allocate_kv(config.block_size, n_blocks, config.kv_cache_dtype, kv_layout);
  kv_cache = std::make_unique<kv::KvCacheManager>(n_blocks, config.block_size,
                                                  config.enable_prefix_caching, kv_layout.windows(),
                                                  kv_layout.sinks());
  batch.n_kv_groups = kv_layout.n_groups();
  scheduler = std::make_unique<sched::Scheduler>(sc, *kv_cache);
  end_ids = tok.end_of_generation_ids();
  if (config.speculative.enabled()) make_proposer(n_blocks);

  pool_info.device =
      config.device == Device::kCuda ? fmt::format("cuda:{}", config.cuda_device) : "cpu";
  pool_info.n_blocks = n_blocks;
  pool_info.block_size = config.block_size;
  pool_info.n_groups = kv_layout.n_groups();
  for (int64_t w : kv_layout.windows()) {
    if (w > 0) ++pool_info.n_window_groups;
    pool_info.sliding_window = std::max(pool_info.sliding_window, w);
  }
  for (int64_t s : kv_layout.sinks()) {
    pool_info.attention_sinks = std::max(pool_info.attention_sinks, s);
  }
  pool_info.bytes = static_cast<int64_t>(runner->kv_bytes());
  pool_info.max_model_len = sc.max_model_len;
  // Sequences that fit while decoding (windowed groups hold their window, not the context).
  pool_info.max_seqs_at_model_len = n_blocks / kv_cache->blocks_for_sequence(sc.max_model_len, 1);
  pool_info.max_seqs_at_2k =
      n_blocks / kv_cache->blocks_for_sequence(std::min<int64_t>(2048, sc.max_model_len), 1);
}

std::unique_ptr<model::ModelRunner> Engine::Impl::make_runner(const gguf::GgufFile& file) const {
  if (config.device == Device::kCuda) {
    return cuda::make_runner(file,
                             cuda::RunnerOptions{config.cuda_device, config.gpu_memory_utilization,
                                                 !config.enforce_eager, config.batch_invariant});
  }
  return std::make_unique<model::CpuRunner>(file, pool);
}

int32_t Engine::Impl::pool_blocks(const EngineConfig& cfg) const {
  if (cfg.n_kv_blocks > 0) return cfg.n_kv_blocks;
  const auto per_block = static_cast<int64_t>(
      runner->kv_bytes_per_block(cfg.block_size, cfg.kv_cache_dtype, kv_layout));
  int64_t budget = cfg.kv_cache_memory;
  // The pool's pages are touched as sequences grow, so a pool larger than the memory left would
  // be accepted here and end, under load, with the kernel's OOM killer taking the server and
  // every request in it: refuse it while nothing runs yet. A runner with its own device memory
  // (a GPU) says what it has left.
  const int64_t device_available = runner->kv_memory_available();
  const bool on_device = device_available >= 0;
  const int64_t available = on_device ? device_available : available_memory_bytes();
  if (budget > 0 && (available > 0 || on_device) && budget > available) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("kv cache memory {:.2f} GiB (--kv-cache-memory) exceeds the {:.2f} GiB "
                            "of {} available{}",
                            gib(budget), gib(available), on_device ? "device memory" : "memory",
                            on_device ? " (--gpu-memory-utilization of the card, model loaded)"
                                      : " (MemAvailable in /proc/meminfo, model loaded)"));
  }
  if (budget <= 0) {
    if (cfg.kv_memory_fraction <= 0.0 || cfg.kv_memory_fraction > 0.95) {
      throw Error(Error::Kind::kInvalidArgument, "kv memory fraction must be in (0, 0.95]");
    }
    // On a device the utilization already bounds the pool: all of what is left is its.
    budget = on_device ? available
                       : static_cast<int64_t>(
                             static_cast<double>(available > 0 ? available : int64_t{4} << 30) *
                             cfg.kv_memory_fraction);
    // No point holding more than max_num_seqs full-length sequences.
    const int64_t blocks_per_seq =
        kv::blocks_for_sequence(kv_layout.windows(), kv_layout.sinks(), cfg.block_size,
                                cfg.scheduler.max_model_len, cfg.scheduler.max_num_batched_tokens);
    budget = std::min(budget, blocks_per_seq * cfg.scheduler.max_num_seqs * per_block);
  }
  const int64_t n = budget / per_block;
  if (n < 1) {
    throw Error(
        Error::Kind::kInvalidArgument,
        fmt::format("kv cache memory {} B holds no block ({} B per block)", budget, per_block));
  }
  return static_cast<int32_t>(std::min<int64_t>(n, 1 << 30));
}

Sample Engine::Impl::make_sample(const Request& request, int32_t index) {
  Sample s;
  s.seq_id = next_seq_id++;
  s.index = index;
  sampling::SamplingParams params = request.params.sampling;
  if (params.seed && index > 0) params.seed = *params.seed + static_cast<uint64_t>(index);
  s.sampler = std::make_unique<sampling::Sampler>(params, runner->n_vocab());
  s.sampler->set_prompt(request.params.prompt);
  if (request.params.constraint) s.sampler->set_constraint(request.params.constraint->make());
  s.detok = std::make_unique<tokenizer::IncrementalDetokenizer>(
      tok, tokenizer::DetokenizerOptions{.stop_strings = request.params.stop,
                                         .skip_special = request.params.skip_special_tokens});
  return s;
}

void Engine::Impl::emit(Request& request, RequestOutput& out) {
  out.request_id = request.id;
  if (out.request_finished) out.metrics = request.metrics;
  if (request.on_output) request.on_output(out);
}

void Engine::Impl::finish_sample(Request& request, Sample& sample, FinishReason reason,
                                 std::string stop_reason, RequestOutput& out) {
  // Release text held back for a stop string that can no longer complete.
  if (reason != FinishReason::kError && !sample.detok->stopped()) {
    out.text += sample.detok->finish().text;
  }
  sample.finished = true;
  out.finished = true;
  out.finish_reason = reason;
  out.stop_reason = std::move(stop_reason);
  if (scheduler->has_sequence(sample.seq_id)) {
    sample.n_preemptions = scheduler->info(sample.seq_id).n_preemptions;
    scheduler->remove(sample.seq_id);
  }
  if (proposer) proposer->remove(sample.seq_id);
  if (draft_policy) draft_policy->remove(sample.seq_id);
  h2o_scores.erase(sample.seq_id);
  seqs.erase(sample.seq_id);
  ++request.n_finished;
  const double now = now_seconds();
  RequestMetrics& m = request.metrics;
  m.n_generated_tokens += sample.n_generated;
  m.n_preemptions += sample.n_preemptions;
  if (request.n_finished == request.params.n) {
    out.request_finished = true;
    m.e2e_time = now - m.arrival_time;
    if (request.first_token >= 0) m.decode_time = now - request.first_token;
  }
}

// Ends every unfinished sample of the request with `reason` (abort; error, with `message` as
// the error; stop, with `message` as the stop reason) and forgets the request. The callback may
// throw (it is the caller's code); that cannot stop the engine.
void Engine::Impl::end_request(Request& request, FinishReason reason, const std::string& message) {
  if (reason == FinishReason::kError) ++totals.n_failed_requests;
  const int64_t id = request.id;
  for (int32_t i = 0; i < request.params.n; ++i) {
    RequestOutput out;
    out.index = i;
    if (reason == FinishReason::kError) out.error = message;
    const std::string stop_reason = reason == FinishReason::kStop ? message : std::string();
    if (static_cast<size_t>(i) < request.samples.size()) {
      Sample& s = request.samples[static_cast<size_t>(i)];
      if (s.finished) continue;
      finish_sample(request, s, reason, stop_reason, out);
    } else {
      // A sample not forked yet: it never started.
      out.finished = true;
      out.finish_reason = reason;
      out.stop_reason = stop_reason;
      if (++request.n_finished == request.params.n) {
        out.request_finished = true;
        request.metrics.e2e_time = now_seconds() - request.metrics.arrival_time;
      }
    }
    try {
      emit(request, out);
    } catch (const std::exception&) {  // nothing more to tell a caller whose callback fails
    }
  }
  requests.erase(id);
}

// Delivers a verification's tokens (kept drafts, then one sampled token) as if each had been
// sampled alone: logprobs from its own row, stop rules after each, so a stop inside an accepted
// run ends the sample right there. One output event carries them all.
void Engine::Impl::deliver(Request& request, Sample& sample, const spec::Verification& v,
                           const model::LogitsView& logits, int32_t first_row) {
  const double now = now_seconds();
  if (request.first_token < 0) {
    request.first_token = now;
    request.metrics.time_to_first_token = now - request.metrics.arrival_time;
    request.metrics.prefill_time = now - request.first_scheduled;
  }
  const auto& p = request.params;
  RequestOutput out;
  out.index = sample.index;
  const auto n_tokens = static_cast<int32_t>(v.tokens.size());
  for (int32_t j = 0; j < n_tokens; ++j) {
    const int32_t token = v.tokens[static_cast<size_t>(j)];
    ++sample.n_generated;
    ++totals.generation_tokens_total;
    TokenOutput t;
    t.id = token;
    if (sample.sampler->wants_logprobs()) {
      sampling::SampleResult r;
      sample.sampler->fill_logprobs(logits.row(first_row + v.rows[static_cast<size_t>(j)]), r,
                                    token);
      t.logprob = r.logprob;
      t.top_logprobs = std::move(r.top_logprobs);
    }
    out.tokens.push_back(std::move(t));

    const bool is_eos =
        !p.ignore_eos && std::find(end_ids.begin(), end_ids.end(), token) != end_ids.end();
    const bool is_stop_id = std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) !=
                            p.stop_token_ids.end();
    if (is_eos || is_stop_id) {
      finish_sample(request, sample, FinishReason::kStop,
                    is_stop_id ? std::string(tok.token_text(token)) : std::string(), out);
      break;
    }
    tokenizer::DetokenizerOutput text = sample.detok->push(token);
    out.text += text.text;
    if (text.stop) {
      finish_sample(request, sample, FinishReason::kStop, p.stop[*text.stop], out);
      break;
    }
    if (sample.n_generated >= p.max_tokens ||
        static_cast<int64_t>(p.prompt.size()) + sample.n_generated >=
            config.scheduler.max_model_len) {
      finish_sample(request, sample, FinishReason::kLength, {}, out);
      break;
    }
    // Kept drafts are in the scheduler's tokens already; the last token is new.
    if (j == n_tokens - 1) scheduler->append_token(sample.seq_id, token);
  }
  emit(request, out);
}

model::LogitsView Engine::Impl::execute(const kv::StepBatch& step_batch) {
  if (config.fault_token_id >= 0 && std::find(step_batch.tokens.begin(), step_batch.tokens.end(),
                                              config.fault_token_id) != step_batch.tokens.end()) {
    throw Error(Error::Kind::kInternal,
                fmt::format("injected fault: token {} reached the model", config.fault_token_id));
  }
  return runner->execute(step_batch);
}

// A step's forward pass failed: run each of its sequences alone to find the ones that fail
// (recorded with the message) and gather the others' logits rows in the step's order. Each
// sequence rewrites its own positions only, so the rerun leaves the KV state as a good step
// would.
model::LogitsView Engine::Impl::execute_isolating(
    const sched::SchedulerOutput& plan, std::unordered_map<int64_t, std::string>& failed) {
  const auto n_vocab = static_cast<size_t>(runner->n_vocab());  // the target's rows are whole
  isolated_logits.assign(batch.logits_rows.size() * n_vocab, 0.0f);
  size_t row = 0;
  for (const sched::ScheduledSequence& s : plan.scheduled) {
    const int32_t n_rows = s.samples ? 1 + s.n_draft : 0;
    single.clear();
    std::span<const int32_t> all = scheduler->tokens(s.seq_id);
    single.add_sequence(s.seq_id, all.subspan(s.n_computed_before, s.n_new), s.n_computed_before,
                        kv_cache->block_table(s.seq_id), n_rows, draft_tree_of(s));
    try {
      const model::LogitsView one = execute(single);
      if (static_cast<size_t>(one.n_vocab) != n_vocab) {
        throw Error(Error::Kind::kInternal, "the target's logits rows are not the vocabulary wide");
      }
      std::memcpy(isolated_logits.data() + row * n_vocab, one.data,
                  static_cast<size_t>(n_rows) * n_vocab * sizeof(float));
    } catch (const std::exception& e) {
      failed[s.seq_id] = e.what();
    }
    row += static_cast<size_t>(n_rows);
  }
  return model::LogitsView{isolated_logits.data(), static_cast<int32_t>(row),
                           static_cast<int32_t>(n_vocab)};
}

// Samples (or verifies drafts) from a scheduled sequence's rows and delivers the tokens.
void Engine::Impl::process_rows(const sched::ScheduledSequence& s, const model::LogitsView& logits,
                                int32_t first_row) {
  auto it = seqs.find(s.seq_id);
  if (it == seqs.end()) return;  // its request ended earlier in this step
  Request& request = *it->second.request;
  const int32_t index = it->second.index;
  if (index == 0 && !request.forked) {
    request.forked = true;
    for (int32_t i = 1; i < request.params.n; ++i) {
      Sample child = make_sample(request, i);
      scheduler->fork(s.seq_id, child.seq_id);
      if (auto scores = h2o_scores.find(s.seq_id); scores != h2o_scores.end()) {
        h2o_scores[child.seq_id] = scores->second;  // the shared prompt's attention so far
      }
      seqs[child.seq_id] = SeqRef{&request, i};
      request.samples.push_back(std::move(child));
    }
    // Every sample draws its first token from the prompt's logits. Iterate by index: a sample
    // may finish (and be erased from seqs) while delivering.
    for (size_t i = 0; i < request.samples.size(); ++i) {
      Sample& sample = request.samples[i];
      const spec::Verification v = verifier.verify(*sample.sampler, logits, first_row, {});
      deliver(request, sample, v, logits, first_row);
    }
    return;
  }
  Sample& sample = request.samples[static_cast<size_t>(index)];
  std::span<const int32_t> drafts;
  if (s.n_draft > 0) {
    const std::span<const int32_t> all = scheduler->tokens(s.seq_id);
    drafts_scratch.assign(all.end() - s.n_draft, all.end());
    drafts = drafts_scratch;
  }
  const std::span<const int32_t> tree = draft_tree_of(s);
  const spec::Verification v =
      tree.empty() ? verifier.verify(*sample.sampler, logits, first_row, drafts)
                   : verifier.verify_tree(*sample.sampler, logits, first_row, drafts, tree);
  if (s.n_draft > 0) {
    int32_t depth = s.n_draft;  // a chain's; a tree's is its deepest node's
    if (!tree.empty()) {
      keep_branch(s, v);
      depth = 0;
      std::vector<int32_t>& depths = tree_depths_scratch;
      depths.assign(tree.size(), 0);
      for (size_t r = 1; r < tree.size(); ++r) {
        depths[r] = depths[static_cast<size_t>(tree[r])] + 1;
        depth = std::max(depth, depths[r]);
      }
    } else {
      scheduler->accept_draft(s.seq_id, v.n_accepted);
    }
    sample.draft_tree.clear();
    ++totals.spec_num_drafts;
    totals.spec_num_draft_tokens += s.n_draft;
    totals.spec_num_accepted_tokens += v.n_accepted;
    for (int32_t j = 0; j < v.n_accepted; ++j) {
      ++totals.spec_accepted_per_pos[static_cast<size_t>(j)];
    }
    // The policy models a chain: a tree counts as one as deep as its deepest branch.
    draft_policy->observe_verification(s.seq_id, depth, v.n_accepted);
  }
  deliver(request, sample, v, logits, first_row);
}

std::span<const int32_t> Engine::Impl::draft_tree_of(const sched::ScheduledSequence& s) const {
  if (s.n_draft == 0) return {};
  const SeqRef& ref = seqs.at(s.seq_id);
  const std::vector<int32_t>& tree =
      ref.request->samples[static_cast<size_t>(ref.index)].draft_tree;
  if (tree.empty()) return {};
  // The scheduler may have taken only the first drafts: parents precede children, so they are
  // a tree too.
  return std::span<const int32_t>(tree).first(static_cast<size_t>(1 + s.n_draft));
}

void Engine::Impl::keep_branch(const sched::ScheduledSequence& s, const spec::Verification& v) {
  const std::span<const kv::BlockId> table = kv_cache->block_table(s.seq_id);
  const int32_t bs = config.block_size;
  const int32_t n_groups = kv_cache->n_groups();
  const int32_t root = s.n_computed_before + s.n_new - 1 - s.n_draft;  // the root's slot
  std::vector<kv::SlotCopy>& copies = slot_copies_scratch;
  copies.clear();
  for (int32_t e = 1; e <= v.n_accepted; ++e) {
    // Kept nodes ascend (parents precede children), so no copy overwrites a later source.
    const int32_t from = root + v.rows[static_cast<size_t>(e)];
    const int32_t to = root + e;
    if (from == to) continue;
    // Each cache group holds the token in a block of its own (the tree is recent: inside every
    // window).
    for (int32_t g = 0; g < n_groups; ++g) {
      copies.push_back(kv::SlotCopy{table[static_cast<size_t>(from / bs * n_groups + g)], from % bs,
                                    table[static_cast<size_t>(to / bs * n_groups + g)], to % bs});
    }
  }
  runner->copy_slots(copies);
  scheduler->accept_draft(
      s.seq_id, v.n_accepted,
      std::span<const int32_t>(v.tokens).first(static_cast<size_t>(v.n_accepted)));
}

bool Engine::Impl::step() {
  const double step_start = now_seconds();
  sched::SchedulerOutput plan = scheduler->schedule();
  if (plan.empty()) return false;
  if (plan.target_seconds > 0.0) last_target_seconds = plan.target_seconds;
  if (plan.target_unreachable) {
    ++totals.steps_target_unreachable;
    if (!warned_target_unreachable && config.on_warning) {
      warned_target_unreachable = true;
      config.on_warning(fmt::format(
          "the step-time target ({:.1f} ms) leaves no room for a prompt token beside this step's "
          "decode work (predicted {:.1f} ms): steps take one prompt token each, so prompts "
          "progress slowly; raise --max-itl-ms (said once)",
          plan.target_seconds * 1e3, scheduler->step_time_model().predict(plan.shape) * 1e3));
    }
  }
  runner->copy_blocks(plan.copies);

  batch.clear();
  const double now = now_seconds();
  bool gives_first_token = false;
  for (const sched::ScheduledSequence& s : plan.scheduled) {
    std::span<const int32_t> all = scheduler->tokens(s.seq_id);
    batch.add_sequence(s.seq_id, all.subspan(s.n_computed_before, s.n_new), s.n_computed_before,
                       kv_cache->block_table(s.seq_id), s.samples ? 1 + s.n_draft : 0,
                       draft_tree_of(s));
    Request& request = *seqs.at(s.seq_id).request;
    if (s.samples && request.first_token < 0) gives_first_token = true;
    if (request.first_scheduled < 0) {
      request.first_scheduled = now;
      request.metrics.queue_time = now - request.metrics.arrival_time;
      request.metrics.n_cached_tokens = scheduler->info(s.seq_id).n_cached_prefix;
    }
  }
  std::unordered_map<int64_t, std::string> failed;
  model::LogitsView logits;
  try {
    logits = execute(batch);
    if (h2o.enabled()) add_attention_mass(plan);
  } catch (const std::exception&) {
    logits = execute_isolating(plan, failed);
  }
  const double forward_seconds = now_seconds() - now;
  if (draft_policy && failed.empty()) {
    draft_policy->observe_target_step(plan.n_tokens, forward_seconds);
  }
  // Sampling and the hand-off of tokens run on this thread alone. After a long forward pass, or
  // one that gives a request its first token, the pool's workers sleep at once instead of
  // spinning, so a server's I/O thread gets their core for the hand-off (TTFT). Short decode
  // steps keep the spin: waking a sleeping worker costs tens of µs, a large share of them.
  // With a draft model its passes follow at once, so the workers keep spinning for them.
  if ((gives_first_token || forward_seconds >= kRestAfterForwardSeconds) && !draft_proposer) {
    runner->rest();
  }
  scheduler->on_step_done(plan);
  ++totals.n_steps;

  int32_t row = 0;
  for (const sched::ScheduledSequence& s : plan.scheduled) {
    const int32_t first_row = row;
    row += s.samples ? 1 + s.n_draft : 0;
    auto it = seqs.find(s.seq_id);
    if (it == seqs.end()) continue;  // its request ended earlier in this loop
    Request& request = *it->second.request;
    if (auto f = failed.find(s.seq_id); f != failed.end()) {
      end_request(request, FinishReason::kError, "the model failed on this request: " + f->second);
      continue;
    }
    if (!s.samples) continue;
    try {
      process_rows(s, logits, first_row);
    } catch (const sampling::ConstraintDeadEnd& e) {
      // The request's grammar allows no next token: it ends, as a stop, saying so.
      end_request(request, FinishReason::kStop, e.what());
      continue;
    } catch (const std::exception& e) {
      end_request(request, FinishReason::kError,
                  std::string("generating this request failed: ") + e.what());
      continue;
    }
    if (request.n_finished == request.params.n) requests.erase(request.id);
  }
  if (h2o.enabled()) evict_heavy_hitters(plan);
  if (proposer) propose_drafts();
  if (draft_proposer) runner->rest();
  if (config.check_invariants) kv_cache->check_invariants();
  // A step re-run sequence by sequence measures the fault, not the machine.
  if (failed.empty()) scheduler->observe_step(plan, now_seconds() - step_start);
  return true;
}

void Engine::Impl::add_attention_mass(const sched::SchedulerOutput& plan) {
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    const std::span<const float> mass = runner->attention_mass(i);
    std::vector<double>& scores = h2o_scores[plan.scheduled[i].seq_id];
    if (scores.size() < mass.size()) scores.resize(mass.size(), 0.0);
    for (size_t b = 0; b < mass.size(); ++b) scores[b] += mass[b];
  }
}

void Engine::Impl::evict_heavy_hitters(const sched::SchedulerOutput& plan) {
  for (const int64_t seq_id : plan.preempted) h2o_scores.erase(seq_id);  // recomputed whole
  for (const sched::ScheduledSequence& s : plan.scheduled) {
    if (!scheduler->has_sequence(s.seq_id) || !kv_cache->has_sequence(s.seq_id)) {
      h2o_scores.erase(s.seq_id);
      continue;
    }
    std::vector<double>& scores = h2o_scores[s.seq_id];
    const int32_t n_computed = scheduler->info(s.seq_id).n_computed;
    for (;;) {
      const std::span<const kv::BlockId> table = kv_cache->block_table(s.seq_id);
      if (scores.size() < table.size()) scores.resize(table.size(), 0.0);
      const int64_t b = kv::block_to_evict(table, scores, n_computed, config.block_size, h2o);
      if (b < 0) break;
      kv_cache->evict_block(s.seq_id, b);
      ++totals.h2o_evictions;
    }
  }
}

Engine::Engine(const gguf::GgufFile& file, const tokenizer::Tokenizer& tokenizer,
               EngineConfig config)
    : impl_(std::make_unique<Impl>(file, tokenizer, std::move(config))) {}

Engine::~Engine() = default;

void Engine::validate(const GenerationRequest& request) const {
  const Impl& e = *impl_;
  if (request.prompt.empty()) throw Error(Error::Kind::kInvalidArgument, "prompt: is empty");
  for (int32_t id : request.prompt) {
    if (id < 0 || id >= e.tok.n_vocab()) {
      throw Error(Error::Kind::kInvalidArgument,
                  fmt::format("prompt: token id {} is outside the vocabulary [0, {})", id,
                              e.tok.n_vocab()));
    }
  }
  if (request.max_tokens < 1) {
    throw Error(Error::Kind::kInvalidArgument, "max_tokens: must be >= 1");
  }
  if (request.n < 1 || request.n > kMaxSamplesPerRequest) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("n: must be in [1, {}]", kMaxSamplesPerRequest));
  }
  for (int32_t id : request.stop_token_ids) {
    if (id < 0 || id >= e.runner->n_vocab()) {
      throw Error(Error::Kind::kInvalidArgument,
                  fmt::format("stop_token_ids: {} is outside the vocabulary", id));
    }
  }
  if (request.num_speculative_tokens < -1 ||
      request.num_speculative_tokens > spec::kMaxSpeculativeTokens) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("num_speculative_tokens: must be in [0, {}] (or absent)",
                            spec::kMaxSpeculativeTokens));
  }
  request.sampling.validate(e.runner->n_vocab());
  const int64_t n_prompt = static_cast<int64_t>(request.prompt.size());
  const int64_t limit = e.config.scheduler.max_model_len;
  if (n_prompt + request.max_tokens > limit) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("context_length_exceeded: this model's maximum context length is {} "
                            "tokens, but {} were requested ({} in the prompt, {} to generate)",
                            limit, n_prompt + request.max_tokens, n_prompt, request.max_tokens));
  }
  const int64_t n_blocks_needed = e.kv_cache->blocks_for_sequence(n_prompt + request.max_tokens,
                                                                  e.scheduler->max_step_tokens());
  if (n_blocks_needed > e.pool_info.n_blocks) {
    throw Error(
        Error::Kind::kInvalidArgument,
        fmt::format("the KV cache holds {} blocks of {} tokens in all, but {} tokens were "
                    "requested ({} in the prompt, {} to generate), which need {} blocks",
                    e.pool_info.n_blocks, e.pool_info.block_size, n_prompt + request.max_tokens,
                    n_prompt, request.max_tokens, n_blocks_needed));
  }
}

int64_t Engine::add_request(GenerationRequest request, OutputCallback on_output) {
  Impl& e = *impl_;
  validate(request);
  const int64_t n_prompt = static_cast<int64_t>(request.prompt.size());

  auto r = std::make_unique<Request>();
  r->id = e.next_request_id++;
  r->metrics.arrival_time = now_seconds();
  r->metrics.n_prompt_tokens = static_cast<int32_t>(n_prompt);
  r->params = std::move(request);
  r->on_output = std::move(on_output);
  r->samples.push_back(e.make_sample(*r, 0));
  const Sample& parent = r->samples[0];
  // Throws (and nothing is kept) when the pool could never hold this request.
  e.scheduler->add(parent.seq_id, r->params.prompt, r->params.max_tokens, r->params.priority);
  e.seqs[parent.seq_id] = Impl::SeqRef{r.get(), 0};
  e.totals.prompt_tokens_total += n_prompt;
  const int64_t id = r->id;
  e.requests[id] = std::move(r);
  return id;
}

void Engine::abort(int64_t request_id) {
  Impl& e = *impl_;
  auto it = e.requests.find(request_id);
  if (it != e.requests.end()) e.end_request(*it->second, FinishReason::kAbort, {});
}

bool Engine::step() {
  try {
    return impl_->step();
  } catch (const std::exception& e) {
    // Not traced to a request (the scheduler or the KV manager refused something): end every
    // request, which frees every block, rather than the process.
    Impl& im = *impl_;
    std::vector<int64_t> ids;
    for (const auto& [id, request] : im.requests) ids.push_back(id);
    for (int64_t id : ids) {
      auto it = im.requests.find(id);
      if (it == im.requests.end()) continue;
      im.end_request(*it->second, FinishReason::kError,
                     std::string("engine step failed: ") + e.what());
    }
    return true;
  }
}
bool Engine::has_unfinished() const { return !impl_->requests.empty(); }
const KvPoolInfo& Engine::kv_pool() const { return impl_->pool_info; }
int64_t Engine::max_model_len() const { return impl_->config.scheduler.max_model_len; }
int32_t Engine::n_vocab() const { return impl_->runner->n_vocab(); }
const kv::KvCacheManager& Engine::kv_cache() const { return *impl_->kv_cache; }

double Engine::kv_waste() const {
  int64_t allocated = 0;
  int64_t used = 0;
  for (const auto& [seq_id, ref] : impl_->seqs) {
    if (!impl_->scheduler->has_sequence(seq_id) || !impl_->kv_cache->has_sequence(seq_id)) continue;
    // Per held block (any group): its slots against the computed tokens in them. Blocks a
    // window or an eviction gave back are neither.
    const std::span<const kv::BlockId> table = impl_->kv_cache->block_table(seq_id);
    const int64_t bs = impl_->config.block_size;
    const int64_t n_groups = impl_->kv_cache->n_groups();
    const int32_t n_computed = impl_->scheduler->info(seq_id).n_computed;
    for (size_t i = 0; i < table.size(); ++i) {
      if (table[i] == kv::kNoBlock) continue;
      const int64_t first = static_cast<int64_t>(i) / n_groups * bs;
      allocated += bs;
      used += std::clamp<int64_t>(n_computed - first, 0, bs);
    }
  }
  return allocated > 0 ? static_cast<double>(allocated - used) / static_cast<double>(allocated)
                       : 0.0;
}

EngineStats Engine::stats() const {
  EngineStats s = impl_->totals;
  s.n_running = impl_->scheduler->n_running();
  s.n_waiting = impl_->scheduler->n_waiting();
  s.kv_usage = impl_->kv_cache->usage();
  s.prefix_queries = impl_->kv_cache->stats().prefix_queries;
  s.prefix_hits = impl_->kv_cache->stats().prefix_hits;
  s.n_preemptions = impl_->scheduler->n_preemptions_total();
  s.step_time = impl_->scheduler->step_time_model().estimate();
  // The target the latest step with decode work and prompts was sized for (it grows with the
  // decode work under a derived target), else the base target.
  s.step_time_target_s = impl_->last_target_seconds > 0.0 ? impl_->last_target_seconds
                                                          : impl_->scheduler->step_time_target();
  return s;
}

}  // namespace llms::engine
