// engine/engine: one step = schedule, copy-on-write, forward, sample, stop rules, outputs.
//
// Each of a request's n samples is one scheduler sequence. Sample 0 (the parent) computes the
// prompt; at its first sampling step the other samples are forked from it and every sample
// draws its first token from the same logits row with its own sampler (a seeded request gives
// sample i the seed + i), so the prompt is computed once and its blocks are shared.
#include "engine/engine.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <new>
#include <optional>
#include <unordered_map>

#include "kv/step_batch.h"
#include "model/kv_storage.h"
#include "model/transformer.h"
#include "sampling/sampler.h"
#include "tokenizer/detokenizer.h"
#include "util/error.h"
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
    case FinishReason::kNone:
      break;
  }
  return "";
}

namespace {

using Clock = std::chrono::steady_clock;

// A forward pass at least this long lets the pool rest afterwards (see Impl::step).
constexpr double kRestAfterForwardSeconds = 2e-3;

double now_seconds() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

// MemAvailable from /proc/meminfo in bytes, or 0 when unknown.
int64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t value = 0;
  std::string unit;
  while (in >> key >> value >> unit) {
    if (key == "MemAvailable:") return value * 1024;
  }
  return 0;
}

struct Sample {
  int64_t seq_id = 0;
  int32_t index = 0;
  std::unique_ptr<sampling::Sampler> sampler;
  std::unique_ptr<tokenizer::IncrementalDetokenizer> detok;
  int32_t n_generated = 0;
  bool finished = false;
  int32_t n_preemptions = 0;
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

}  // namespace

struct Engine::Impl {
  Impl(const gguf::GgufFile& file, const tokenizer::Tokenizer& tok, EngineConfig cfg);

  int32_t pool_blocks(const EngineConfig& cfg) const;
  Sample make_sample(const Request& request, int32_t index);
  void sample_row(Request& request, Sample& sample, std::span<const float> row);
  void finish_sample(Request& request, Sample& sample, FinishReason reason, std::string stop_reason,
                     RequestOutput& out);
  void emit(Request& request, RequestOutput& out);
  bool step();

  const tokenizer::Tokenizer& tok;
  EngineConfig config;
  model::Transformer model;
  std::unique_ptr<model::KvStorage> kv_storage;
  std::unique_ptr<kv::KvCacheManager> kv_cache;
  std::unique_ptr<sched::Scheduler> scheduler;
  KvPoolInfo pool_info;
  std::vector<int32_t> end_ids;

  int64_t next_request_id = 1;
  int64_t next_seq_id = 1;
  std::unordered_map<int64_t, std::unique_ptr<Request>> requests;
  struct SeqRef {
    Request* request;
    int32_t index;
  };
  std::unordered_map<int64_t, SeqRef> seqs;

  kv::StepBatch batch;
  std::vector<float> logits;
  std::vector<float> row_copy;
  EngineStats totals;
};

Engine::Impl::Impl(const gguf::GgufFile& file, const tokenizer::Tokenizer& tokenizer_ref,
                   EngineConfig cfg)
    : tok(tokenizer_ref),
      config(std::move(cfg)),
      model(file, config.n_threads > 0 ? config.n_threads : physical_core_count()) {
  if (tok.n_vocab() > model.n_vocab()) {
    throw Error(Error::Kind::kInvalidFile, "the tokenizer has more tokens than the model's output");
  }
  if (config.block_size < 1 || config.block_size > 1024) {
    throw Error(Error::Kind::kInvalidArgument, "block_size must be in [1, 1024]");
  }
  auto& sc = config.scheduler;
  const int64_t train_ctx = model.config().n_ctx_train > 0
                                ? static_cast<int64_t>(model.config().n_ctx_train)
                                : int64_t{4096};
  if (sc.max_model_len < 0) {
    throw Error(Error::Kind::kInvalidArgument, "max_model_len must be >= 0 (0: the model's)");
  }
  if (sc.max_model_len > train_ctx) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("max_model_len {} exceeds the model's context length {}",
                            sc.max_model_len, train_ctx));
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
  const int32_t n_blocks = pool_blocks(config);
  kv_storage = std::make_unique<model::KvStorage>(model.config(), config.block_size, n_blocks,
                                                  config.kv_cache_dtype);
  kv_cache = std::make_unique<kv::KvCacheManager>(n_blocks, config.block_size,
                                                  config.enable_prefix_caching);
  scheduler = std::make_unique<sched::Scheduler>(sc, *kv_cache);
  try {
    model.reserve(sc.max_num_batched_tokens, sc.max_num_seqs);
    logits.resize(static_cast<size_t>(sc.max_num_seqs) * model.n_vocab());
  } catch (const std::bad_alloc&) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("cannot allocate the step buffers for max_num_batched_tokens {} and "
                            "max_num_seqs {} (a vocabulary of {}): lower them",
                            sc.max_num_batched_tokens, sc.max_num_seqs, model.n_vocab()));
  }
  row_copy.resize(model.n_vocab());
  end_ids = tok.end_of_generation_ids();

  pool_info.n_blocks = n_blocks;
  pool_info.block_size = config.block_size;
  pool_info.bytes = static_cast<int64_t>(kv_storage->bytes());
  pool_info.max_model_len = sc.max_model_len;
  pool_info.max_seqs_at_model_len = n_blocks / kv_cache->blocks_for(sc.max_model_len);
  pool_info.max_seqs_at_2k =
      n_blocks / kv_cache->blocks_for(std::min<int64_t>(2048, sc.max_model_len));
}

int32_t Engine::Impl::pool_blocks(const EngineConfig& cfg) const {
  if (cfg.n_kv_blocks > 0) return cfg.n_kv_blocks;
  const int64_t per_block = static_cast<int64_t>(
      model::KvStorage::bytes_per_block(model.config(), cfg.block_size, cfg.kv_cache_dtype));
  int64_t budget = cfg.kv_cache_memory;
  // The pool's pages are touched as sequences grow, so a pool larger than the memory left would
  // be accepted here and end, under load, with the kernel's OOM killer taking the server and
  // every request in it: refuse it while nothing runs yet.
  const int64_t available = available_memory_bytes();
  if (budget > 0 && available > 0 && budget > available) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("kv cache memory {:.2f} GiB (--kv-cache-memory) exceeds the {:.2f} GiB "
                            "of memory available (MemAvailable in /proc/meminfo, model loaded)",
                            static_cast<double>(budget) / (1 << 30),
                            static_cast<double>(available) / (1 << 30)));
  }
  if (budget <= 0) {
    if (cfg.kv_memory_fraction <= 0.0 || cfg.kv_memory_fraction > 0.95) {
      throw Error(Error::Kind::kInvalidArgument, "kv memory fraction must be in (0, 0.95]");
    }
    budget = static_cast<int64_t>(
        static_cast<double>(available > 0 ? available : int64_t{4} << 30) * cfg.kv_memory_fraction);
    // No point holding more than max_num_seqs full-length sequences.
    const int64_t blocks_per_seq =
        (cfg.scheduler.max_model_len + cfg.block_size - 1) / cfg.block_size;
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
  s.sampler = std::make_unique<sampling::Sampler>(params, model.n_vocab());
  s.sampler->set_prompt(request.params.prompt);
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
  if (!sample.detok->stopped()) out.text += sample.detok->finish().text;
  sample.finished = true;
  out.finished = true;
  out.finish_reason = reason;
  out.stop_reason = std::move(stop_reason);
  if (scheduler->has_sequence(sample.seq_id)) {
    sample.n_preemptions = scheduler->info(sample.seq_id).n_preemptions;
    scheduler->remove(sample.seq_id);
  }
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

void Engine::Impl::sample_row(Request& request, Sample& sample, std::span<const float> row) {
  std::copy(row.begin(), row.end(), row_copy.begin());
  sampling::SampleResult r = sample.sampler->sample(row_copy);
  sample.sampler->accept(r.token);
  ++sample.n_generated;
  ++totals.generation_tokens_total;
  const double now = now_seconds();
  if (request.first_token < 0) {
    request.first_token = now;
    request.metrics.time_to_first_token = now - request.metrics.arrival_time;
    request.metrics.prefill_time = now - request.first_scheduled;
  }

  RequestOutput out;
  out.index = sample.index;
  TokenOutput t;
  t.id = r.token;
  t.logprob = r.logprob;
  t.top_logprobs = std::move(r.top_logprobs);
  out.tokens.push_back(std::move(t));

  const auto& p = request.params;
  const bool is_eos =
      !p.ignore_eos && std::find(end_ids.begin(), end_ids.end(), r.token) != end_ids.end();
  const bool is_stop_id = std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), r.token) !=
                          p.stop_token_ids.end();
  if (is_eos || is_stop_id) {
    finish_sample(request, sample, FinishReason::kStop,
                  is_stop_id ? std::string(tok.token_text(r.token)) : std::string(), out);
    emit(request, out);
    return;
  }
  tokenizer::DetokenizerOutput text = sample.detok->push(r.token);
  out.text = std::move(text.text);
  if (text.stop) {
    finish_sample(request, sample, FinishReason::kStop, p.stop[*text.stop], out);
  } else if (sample.n_generated >= p.max_tokens ||
             static_cast<int64_t>(p.prompt.size()) + sample.n_generated >=
                 config.scheduler.max_model_len) {
    finish_sample(request, sample, FinishReason::kLength, {}, out);
  } else {
    scheduler->append_token(sample.seq_id, r.token);
  }
  emit(request, out);
}

bool Engine::Impl::step() {
  sched::SchedulerOutput plan = scheduler->schedule();
  if (plan.empty()) return false;
  for (const kv::BlockCopy& c : plan.copies) kv_storage->copy_block(c.src, c.dst);

  batch.clear();
  const double now = now_seconds();
  bool gives_first_token = false;
  for (const sched::ScheduledSequence& s : plan.scheduled) {
    std::span<const int32_t> all = scheduler->tokens(s.seq_id);
    batch.add_sequence(s.seq_id, all.subspan(s.n_computed_before, s.n_new), s.n_computed_before,
                       kv_cache->block_table(s.seq_id), s.samples);
    Request& request = *seqs.at(s.seq_id).request;
    if (s.samples && request.first_token < 0) gives_first_token = true;
    if (request.first_scheduled < 0) {
      request.first_scheduled = now;
      request.metrics.queue_time = now - request.metrics.arrival_time;
      request.metrics.n_cached_tokens = scheduler->info(s.seq_id).n_cached_prefix;
    }
  }
  model.forward(batch, *kv_storage, logits.data());
  // Sampling and the hand-off of tokens run on this thread alone. After a long forward pass, or
  // one that gives a request its first token, the pool's workers sleep at once instead of
  // spinning, so a server's I/O thread gets their core for the hand-off (TTFT). Short decode
  // steps keep the spin: waking a sleeping worker costs tens of µs, a large share of them.
  if (gives_first_token || now_seconds() - now >= kRestAfterForwardSeconds) model.pool().rest();
  scheduler->on_step_done(plan);
  ++totals.n_steps;

  const size_t n_vocab = static_cast<size_t>(model.n_vocab());
  size_t row = 0;
  for (const sched::ScheduledSequence& s : plan.scheduled) {
    if (!s.samples) continue;
    std::span<const float> logits_row(logits.data() + row * n_vocab, n_vocab);
    ++row;
    auto it = seqs.find(s.seq_id);
    if (it == seqs.end()) continue;  // finished earlier in this loop (cannot happen today)
    Request& request = *it->second.request;
    const int32_t index = it->second.index;
    if (index == 0 && !request.forked) {
      request.forked = true;
      for (int32_t i = 1; i < request.params.n; ++i) {
        Sample child = make_sample(request, i);
        scheduler->fork(s.seq_id, child.seq_id);
        seqs[child.seq_id] = SeqRef{&request, i};
        request.samples.push_back(std::move(child));
      }
      // Every sample draws its first token from the prompt's logits. Iterate by index: a
      // sample may finish (and be erased from seqs) inside sample_row.
      for (size_t i = 0; i < request.samples.size(); ++i) {
        sample_row(request, request.samples[i], logits_row);
      }
    } else {
      sample_row(request, request.samples[static_cast<size_t>(index)], logits_row);
    }
    if (request.n_finished == request.params.n) requests.erase(request.id);
  }
  if (config.check_invariants) kv_cache->check_invariants();
  return true;
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
    if (id < 0 || id >= e.model.n_vocab()) {
      throw Error(Error::Kind::kInvalidArgument,
                  fmt::format("stop_token_ids: {} is outside the vocabulary", id));
    }
  }
  request.sampling.validate(e.model.n_vocab());
  const int64_t n_prompt = static_cast<int64_t>(request.prompt.size());
  const int64_t limit = e.config.scheduler.max_model_len;
  if (n_prompt + request.max_tokens > limit) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("context_length_exceeded: this model's maximum context length is {} "
                            "tokens, but {} were requested ({} in the prompt, {} to generate)",
                            limit, n_prompt + request.max_tokens, n_prompt, request.max_tokens));
  }
  const int64_t pool_tokens = static_cast<int64_t>(e.pool_info.n_blocks) * e.pool_info.block_size;
  if (n_prompt + request.max_tokens > pool_tokens) {
    throw Error(
        Error::Kind::kInvalidArgument,
        fmt::format("the KV cache holds {} tokens in all, but {} were requested ({} in the "
                    "prompt, {} to generate)",
                    pool_tokens, n_prompt + request.max_tokens, n_prompt, request.max_tokens));
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
  if (it == e.requests.end()) return;
  Request& request = *it->second;
  for (int32_t i = 0; i < request.params.n; ++i) {
    RequestOutput out;
    out.index = i;
    if (static_cast<size_t>(i) < request.samples.size()) {
      Sample& s = request.samples[static_cast<size_t>(i)];
      if (s.finished) continue;
      e.finish_sample(request, s, FinishReason::kAbort, {}, out);
    } else {
      // A sample not forked yet: it never started.
      out.finished = true;
      out.finish_reason = FinishReason::kAbort;
      if (++request.n_finished == request.params.n) {
        out.request_finished = true;
        request.metrics.e2e_time = now_seconds() - request.metrics.arrival_time;
      }
    }
    e.emit(request, out);
  }
  e.requests.erase(it);
}

bool Engine::step() { return impl_->step(); }
bool Engine::has_unfinished() const { return !impl_->requests.empty(); }
const KvPoolInfo& Engine::kv_pool() const { return impl_->pool_info; }
int64_t Engine::max_model_len() const { return impl_->config.scheduler.max_model_len; }
int32_t Engine::n_vocab() const { return impl_->model.n_vocab(); }
const kv::KvCacheManager& Engine::kv_cache() const { return *impl_->kv_cache; }

double Engine::kv_waste() const {
  int64_t allocated = 0;
  int64_t used = 0;
  for (const auto& [seq_id, ref] : impl_->seqs) {
    if (!impl_->scheduler->has_sequence(seq_id) || !impl_->kv_cache->has_sequence(seq_id)) continue;
    allocated += static_cast<int64_t>(impl_->kv_cache->block_table(seq_id).size()) *
                 impl_->config.block_size;
    used += impl_->scheduler->info(seq_id).n_computed;
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
  return s;
}

}  // namespace llms::engine
