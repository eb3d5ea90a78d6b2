// sched/scheduler: continuous batching over kv::KvCacheManager (contract in scheduler.h).
//
// State: every sequence lives in `seqs` and in exactly one of two ordered sets, `running` or
// `waiting`, keyed by its policy order: (priority, arrival, order) under kPriority, (arrival,
// order) under kFcfs. `arrival` is the add() count (a fork child copies its parent's), `order`
// is unique, so the order is total and never changes for a sequence. Keeping `waiting` sorted
// is what puts a preempted sequence back at the front: it arrived before everything admitted
// after it.
//
// KV: a waiting sequence holds no KV state at all (not registered with the manager); a running
// one is registered and its table covers at least n_computed positions. Preemption frees the
// table and resets n_computed; the tokens (output included) are kept, so readmission recomputes
// them, cheaply where the prefix cache still holds its earlier blocks.
//
// A step in which a running sequence had to be preempted admits no waiting sequence: memory is
// short, and admitting would at best re-admit the victim just freed (thrash) or take blocks the
// running sequences need next step.
//
// fork() is not refused for max_num_seqs (the engine's n samples of one request belong
// together); while forks keep more than max_num_seqs running, each step runs at most
// max_num_seqs of them (decoding ones first, in policy order) and admits nothing.
//
// A running prompt (or recompute) short of blocks in the prefill pass preempts the latest
// running sequences not scheduled yet, as the decode pass does, but never one that comes before
// a sequence already decoding in this step: then it waits a step, and the latest sequence
// preempts itself when it next needs a block it cannot get. So no step preempts a sequence and
// runs a later one.
#include "sched/scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "util/error.h"

namespace llms::sched {

namespace {

struct OrderKey {
  int64_t priority = 0;  // 0 for every sequence under kFcfs
  uint64_t arrival = 0;
  uint64_t order = 0;  // unique
  int64_t seq_id = 0;  // not compared: carried so a set walk yields ids

  friend bool operator<(const OrderKey& a, const OrderKey& b) {
    if (a.priority != b.priority) return a.priority < b.priority;
    if (a.arrival != b.arrival) return a.arrival < b.arrival;
    return a.order < b.order;
  }
};

struct Sequence {
  std::vector<int32_t> tokens;
  int32_t n_prompt = 0;
  int32_t max_new_tokens = 0;
  int32_t priority = 0;
  uint64_t extra_key = 0;
  OrderKey key;
  int32_t n_computed = 0;
  int32_t n_cached_prefix = 0;
  int32_t n_preemptions = 0;
  int32_t n_draft = 0;
  bool is_running = false;

  // Drops the last n of the draft tokens.
  void drop_drafts(int32_t n) {
    n = std::min(n, n_draft);
    tokens.resize(tokens.size() - static_cast<size_t>(n));
    n_draft -= n;
  }
};

[[noreturn]] void fail(Error::Kind kind, const std::string& message) {
  throw Error(kind, "scheduler: " + message);
}

std::string id_str(int64_t seq_id) { return "sequence " + std::to_string(seq_id); }

}  // namespace

struct Scheduler::State {
  std::unordered_map<int64_t, Sequence> seqs;
  std::set<OrderKey> running;
  std::set<OrderKey> waiting;
  uint64_t n_arrivals = 0;
  uint64_t n_orders = 0;
  int64_t n_preemptions_total = 0;
  StepTimeModel step_time;

  Sequence& get(int64_t seq_id) {
    auto it = seqs.find(seq_id);
    if (it == seqs.end()) fail(Error::Kind::kNotFound, id_str(seq_id) + " is unknown");
    return it->second;
  }
  const Sequence& get(int64_t seq_id) const {
    auto it = seqs.find(seq_id);
    if (it == seqs.end()) fail(Error::Kind::kNotFound, id_str(seq_id) + " is unknown");
    return it->second;
  }
};

Scheduler::Scheduler(SchedulerConfig config, kv::KvCacheManager& kv)
    : config_(config), kv_(kv), state_(std::make_shared<State>()) {
  if (config_.max_num_batched_tokens < 1) {
    fail(Error::Kind::kInvalidArgument, "max_num_batched_tokens must be >= 1, got " +
                                            std::to_string(config_.max_num_batched_tokens));
  }
  if (config_.max_num_seqs < 1) {
    fail(Error::Kind::kInvalidArgument,
         "max_num_seqs must be >= 1, got " + std::to_string(config_.max_num_seqs));
  }
  if (config_.max_model_len < 1 || config_.max_model_len > std::numeric_limits<int32_t>::max()) {
    fail(Error::Kind::kInvalidArgument,
         "max_model_len must be in [1, 2^31), got " + std::to_string(config_.max_model_len));
  }
  if (config_.max_long_partial_prefills < 1) {
    fail(Error::Kind::kInvalidArgument, "max_long_partial_prefills must be >= 1, got " +
                                            std::to_string(config_.max_long_partial_prefills));
  }
  if (!std::isfinite(config_.max_step_seconds) || config_.max_step_seconds > 3600.0) {
    fail(Error::Kind::kInvalidArgument, "max_step_seconds must be finite and at most 3600, got " +
                                            std::to_string(config_.max_step_seconds));
  }
  if (!(config_.itl_target_factor >= 1.0 && config_.itl_target_factor <= 1000.0)) {
    fail(Error::Kind::kInvalidArgument, "itl_target_factor must be in [1, 1000], got " +
                                            std::to_string(config_.itl_target_factor));
  }
  if (!(config_.min_prefill_share >= 0.0 && config_.min_prefill_share < 1.0)) {
    fail(Error::Kind::kInvalidArgument,
         "min_prefill_share must be in [0, 1), got " + std::to_string(config_.min_prefill_share));
  }
  if (config_.long_prefill_token_threshold < 0) {
    fail(Error::Kind::kInvalidArgument, "long_prefill_token_threshold must be >= 0, got " +
                                            std::to_string(config_.long_prefill_token_threshold));
  }
}

void Scheduler::add(int64_t seq_id, std::vector<int32_t> prompt, int32_t max_new_tokens,
                    int32_t priority, uint64_t extra_key) {
  State& st = *state_;
  if (st.seqs.count(seq_id) != 0) {
    fail(Error::Kind::kInvalidArgument, id_str(seq_id) + " already exists");
  }
  if (prompt.empty()) fail(Error::Kind::kInvalidArgument, id_str(seq_id) + ": the prompt is empty");
  if (max_new_tokens < 0) {
    fail(Error::Kind::kInvalidArgument,
         id_str(seq_id) + ": max_new_tokens must be >= 0, got " + std::to_string(max_new_tokens));
  }
  // Both terms are below 2^63 (a vector size and an int32), so the sum cannot overflow.
  const int64_t n_prompt = static_cast<int64_t>(prompt.size());
  const int64_t n_total = n_prompt + max_new_tokens;
  if (n_total > config_.max_model_len) {
    fail(Error::Kind::kInvalidArgument,
         id_str(seq_id) + ": prompt (" + std::to_string(n_prompt) + " tokens) + max_new_tokens (" +
             std::to_string(max_new_tokens) + ") = " + std::to_string(n_total) +
             " exceeds max_model_len " + std::to_string(config_.max_model_len));
  }
  // Windowed cache groups hold one step beyond their window while it runs.
  const int32_t n_blocks_needed = kv_.blocks_for_sequence(n_total, max_step_tokens());
  if (n_blocks_needed > kv_.n_blocks()) {
    fail(Error::Kind::kInvalidArgument,
         id_str(seq_id) + ": prompt (" + std::to_string(n_prompt) + " tokens) + max_new_tokens (" +
             std::to_string(max_new_tokens) + ") = " + std::to_string(n_total) + " tokens need " +
             std::to_string(n_blocks_needed) + " KV blocks but the pool has " +
             std::to_string(kv_.n_blocks()));
  }
  Sequence s;
  s.tokens = std::move(prompt);
  s.n_prompt = static_cast<int32_t>(n_prompt);  // <= max_model_len < 2^31
  s.max_new_tokens = max_new_tokens;
  s.priority = priority;
  s.extra_key = extra_key;
  s.key.priority = config_.policy == Policy::kPriority ? priority : 0;
  s.key.arrival = st.n_arrivals++;
  s.key.order = st.n_orders++;
  s.key.seq_id = seq_id;
  st.waiting.insert(s.key);
  st.seqs.emplace(seq_id, std::move(s));
}

void Scheduler::fork(int64_t parent, int64_t child) {
  State& st = *state_;
  const Sequence& p = st.get(parent);
  if (!p.is_running)
    fail(Error::Kind::kInvalidArgument, "fork: parent " + id_str(parent) + " is not running");
  if (p.n_computed != static_cast<int32_t>(p.tokens.size())) {
    fail(Error::Kind::kInvalidArgument,
         "fork: parent " + id_str(parent) + " has computed " + std::to_string(p.n_computed) +
             " of its " + std::to_string(p.tokens.size()) + " tokens; fork needs all of them");
  }
  if (st.seqs.count(child) != 0) {
    fail(Error::Kind::kInvalidArgument, "fork: child " + id_str(child) + " already exists");
  }
  if (p.n_draft != 0) {
    fail(Error::Kind::kInvalidArgument,
         "fork: parent " + id_str(parent) + " has drafts not yet accepted or rejected");
  }
  Sequence c;
  c.tokens = p.tokens;
  c.n_prompt = p.n_prompt;
  c.max_new_tokens = p.max_new_tokens;
  c.priority = p.priority;
  c.extra_key = p.extra_key;
  c.key = p.key;
  c.key.order = st.n_orders++;
  c.key.seq_id = child;
  c.n_computed = p.n_computed;
  c.n_cached_prefix = p.n_cached_prefix;
  c.is_running = true;
  kv_.fork(parent, child);
  st.running.insert(c.key);
  st.seqs.emplace(child, std::move(c));
}

int32_t Scheduler::max_step_tokens() const {
  const int32_t step =
      config_.long_prefill_token_threshold > 0
          ? std::min(config_.long_prefill_token_threshold, config_.max_num_batched_tokens)
          : config_.max_num_batched_tokens;
  return std::max(step, 1);
}

namespace {

// Max-min fair shares of `total` tokens over `demands` (each >= 1): a demand below an equal
// share is met whole, the others split the rest evenly, the odd tokens going to the earliest.
std::vector<int32_t> fair_shares(const std::vector<int32_t>& demands, int32_t total) {
  const size_t n = demands.size();
  std::vector<int32_t> shares(n, 0);
  std::vector<size_t> by_demand(n);
  for (size_t i = 0; i < n; ++i) by_demand[i] = i;
  std::stable_sort(by_demand.begin(), by_demand.end(),
                   [&](size_t a, size_t b) { return demands[a] < demands[b]; });
  int64_t left = total;
  size_t k = 0;
  for (; k < n; ++k) {
    const size_t i = by_demand[k];
    if (static_cast<int64_t>(demands[i]) * static_cast<int64_t>(n - k) > left) break;
    shares[i] = demands[i];
    left -= demands[i];
  }
  if (k == n) return shares;
  // Every demand from by_demand[k] on exceeds the level: each gets the level, and the earliest
  // (in the given order) one token more while the remainder lasts.
  const auto n_capped = static_cast<int64_t>(n - k);
  const auto level = static_cast<int32_t>(left / n_capped);
  int64_t extra = left - level * n_capped;
  std::vector<bool> capped(n, false);
  for (size_t j = k; j < n; ++j) capped[by_demand[j]] = true;
  for (size_t i = 0; i < n; ++i) {
    if (!capped[i]) continue;
    shares[i] = level + (extra > 0 ? 1 : 0);
    if (extra > 0) --extra;
  }
  return shares;
}

}  // namespace

const StepTimeModel& Scheduler::step_time_model() const { return state_->step_time; }

double Scheduler::step_time_target() const {
  if (config_.max_step_seconds >= 0.0) return config_.max_step_seconds;
  const StepTimeModel& m = state_->step_time;
  if (!m.known()) return 0.0;
  return config_.itl_target_factor * m.predict(StepShape{0, 1, 1});
}

void Scheduler::observe_step(const SchedulerOutput& output, double seconds) {
  state_->step_time.observe(output.shape, seconds);
}

SchedulerOutput Scheduler::schedule() {
  State& st = *state_;
  SchedulerOutput out;
  int32_t budget = config_.max_num_batched_tokens;
  std::unordered_set<int64_t> scheduled;
  std::unordered_set<int64_t> preempted_now;
  bool running_were_short = false;  // a running sequence preempted another (or itself)

  // What a sequence may compute in one step, before the budget: the rest of its known tokens,
  // capped by long_prefill_token_threshold.
  const auto wanted = [&](const Sequence& s) {
    int32_t n = static_cast<int32_t>(s.tokens.size()) - s.n_computed;
    if (config_.long_prefill_token_threshold > 0)
      n = std::min(n, config_.long_prefill_token_threshold);
    return n;
  };
  const auto preempt = [&](Sequence& s) {
    s.drop_drafts(s.n_draft);
    kv_.free(s.key.seq_id);
    s.n_computed = 0;
    s.n_cached_prefix = 0;
    s.is_running = false;
    ++s.n_preemptions;
    ++st.n_preemptions_total;
    st.running.erase(s.key);
    st.waiting.insert(s.key);
    out.preempted.push_back(s.key.seq_id);
    preempted_now.insert(s.key.seq_id);
  };
  // The last running sequence in policy order that this step has not scheduled and that
  // `eligible` accepts; nullptr when there is none.
  const auto pick_victim = [&](auto eligible) -> Sequence* {
    for (auto it = st.running.rbegin(); it != st.running.rend(); ++it) {
      if (scheduled.count(it->seq_id) != 0) continue;
      Sequence& v = st.seqs.at(it->seq_id);
      if (eligible(v)) return &v;
    }
    return nullptr;
  };
  // Allocates the blocks of a running sequence's next n_new tokens, preempting the latest
  // running sequences as needed; false when `s` itself had to go.
  const auto allocate_running = [&](Sequence& s, int32_t n_new) {
    for (;;) {
      if (kv_.allocate(s.key.seq_id, s.n_computed, int64_t{s.n_computed} + n_new, out.copies)) {
        return true;
      }
      // `s` itself is running and unscheduled, so a victim always exists.
      Sequence* victim = pick_victim([](const Sequence&) { return true; });
      preempt(*victim);
      running_were_short = true;
      if (victim == &s) return false;
    }
  };
  // Whether a running sequence later than `s` in policy order is scheduled in this step.
  const auto later_scheduled = [&](const Sequence& s) {
    for (auto it = st.running.rbegin(); it != st.running.rend() && s.key < *it; ++it) {
      if (scheduled.count(it->seq_id) != 0) return true;
    }
    return false;
  };
  // allocate_running for pass 2: where the victim would come before a sequence that decodes
  // in this step (the prompt itself, or another unfinished one), the prompt waits instead
  // (false, nothing preempted): the latest sequence gives way first.
  const auto allocate_prefill = [&](Sequence& s, int32_t n_new) {
    for (;;) {
      if (kv_.allocate(s.key.seq_id, s.n_computed, int64_t{s.n_computed} + n_new, out.copies)) {
        return true;
      }
      running_were_short = true;
      Sequence* victim = pick_victim([](const Sequence&) { return true; });
      if (later_scheduled(*victim)) return false;
      preempt(*victim);
      if (victim == &s) return false;
    }
  };
  const auto emit = [&](Sequence& s, int32_t n_new, bool decodes) {
    ScheduledSequence ss;
    ss.seq_id = s.key.seq_id;
    ss.n_computed_before = s.n_computed;
    ss.n_new = n_new;
    ss.samples = s.n_computed + n_new == static_cast<int32_t>(s.tokens.size());
    ss.n_draft = ss.samples ? s.n_draft : 0;
    out.scheduled.push_back(ss);
    out.n_tokens += n_new;
    budget -= n_new;
    scheduled.insert(s.key.seq_id);
    // A prompt chunk that samples also pays the output head and a sampler, as a decode row.
    if (decodes || ss.samples) ++out.shape.decode_sequences;
    if (!decodes) out.shape.prompt_tokens += n_new;
    out.shape.attended += attended_by_chunk(s.n_computed, n_new);
  };
  const auto n_scheduled = [&] { return static_cast<int32_t>(out.scheduled.size()); };

  // 1. Decode: running sequences whose output has begun and lacks only its next token, in
  // policy order, without their drafts (set aside). The others (prefill or recompute left) wait
  // for pass 2. Walk a snapshot: preemption edits the set.
  struct SetAside {
    size_t scheduled_index;
    std::vector<int32_t> drafts;
  };
  std::vector<SetAside> set_aside;
  std::vector<int64_t> running_prefills;
  const std::vector<OrderKey> running_now(st.running.begin(), st.running.end());
  for (const OrderKey& key : running_now) {
    Sequence& s = st.seqs.at(key.seq_id);
    if (!s.is_running) continue;  // preempted earlier in this step
    const int32_t remaining = static_cast<int32_t>(s.tokens.size()) - s.n_draft - s.n_computed;
    if (remaining > 1 || s.n_computed < s.n_prompt) {
      running_prefills.push_back(key.seq_id);
      continue;
    }
    if (budget <= 0 || n_scheduled() >= config_.max_num_seqs) continue;
    std::vector<int32_t> drafts(s.tokens.end() - s.n_draft, s.tokens.end());
    s.drop_drafts(s.n_draft);
    if (remaining <= 0) continue;  // waiting for the engine to append its sampled token
    if (!allocate_running(s, 1)) continue;
    if (!drafts.empty()) set_aside.push_back({out.scheduled.size(), std::move(drafts)});
    emit(s, 1, true);
  }

  // 2. Prefill: running sequences with tokens left to compute, then waiting ones, share what the
  // budget (and the step-time target) leaves, max-min fairly within each priority level.
  // A waiting sequence's demand is taken before its cached prefix is looked up (the lookup
  // registers it with the KV manager and pins its cached blocks, which must stay evictable while
  // the running ones allocate); what its share exceeds its uncached tokens by passes on to the
  // waiting sequences after it.
  struct Candidate {
    Sequence* seq;
    bool waiting;
    int32_t demand;
  };
  std::vector<Candidate> candidates;
  const int32_t long_prompt = std::max(1, config_.max_num_batched_tokens / 4);
  // The priorities of the long prompts prefilling (a waiting long prompt counts those of its
  // priority or higher against max_long_partial_prefills, so lower ones never hold it back).
  std::vector<int64_t> long_priorities;
  for (const int64_t id : running_prefills) {
    Sequence& s = st.seqs.at(id);
    if (!s.is_running) continue;
    candidates.push_back({&s, false, wanted(s)});
    if (static_cast<int32_t>(s.tokens.size()) - s.n_computed > long_prompt) {
      long_priorities.push_back(s.key.priority);
    }
  }
  if (!running_were_short) {
    int32_t slots = config_.max_num_seqs - static_cast<int32_t>(st.running.size());
    for (const OrderKey& key : st.waiting) {
      if (slots <= 0 || static_cast<int32_t>(candidates.size()) >= budget) break;
      if (preempted_now.count(key.seq_id) != 0) break;  // freed this step: not back this step
      Sequence& s = st.seqs.at(key.seq_id);
      const bool is_long = static_cast<int32_t>(s.tokens.size()) > long_prompt;
      if (is_long) {
        const auto n_ahead = std::count_if(long_priorities.begin(), long_priorities.end(),
                                           [&](int64_t p) { return p <= s.key.priority; });
        if (n_ahead >= config_.max_long_partial_prefills) continue;
        long_priorities.push_back(s.key.priority);
      }
      candidates.push_back({&s, true, wanted(s)});
      --slots;
    }
  }
  // Max-min fair shares of `total` prompt tokens, level by level under kPriority.
  const auto shares_of = [&](int32_t total) {
    std::vector<int32_t> shares(candidates.size(), 0);
    std::vector<size_t> order(candidates.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
      return candidates[x].seq->key.priority < candidates[y].seq->key.priority;
    });
    int32_t left = total;
    for (size_t g = 0; g < order.size();) {
      size_t end = g;
      while (end < order.size() &&
             candidates[order[end]].seq->key.priority == candidates[order[g]].seq->key.priority) {
        ++end;
      }
      std::vector<int32_t> demands;
      for (size_t k = g; k < end; ++k) demands.push_back(candidates[order[k]].demand);
      const std::vector<int32_t> level = fair_shares(demands, left);
      for (size_t k = g; k < end; ++k) {
        shares[order[k]] = level[k - g];
        left -= level[k - g];
      }
      g = end;
    }
    return shares;
  };
  // Drafts come last but may claim up to half the budget ahead of the prompts (the draft-length
  // policy sized them for the budget beside the decode tokens).
  int32_t drafts_pending = 0;
  for (const SetAside& a : set_aside) drafts_pending += static_cast<int32_t>(a.drafts.size());
  int32_t prefill_tokens = std::max(
      std::min(1, budget), budget - std::min(drafts_pending, config_.max_num_batched_tokens / 2));
  if (!candidates.empty() && out.shape.decode_sequences > 0) {
    const double target = step_time_target();
    const StepTimeModel& model = st.step_time;
    if (target > 0.0 && model.known()) {
      double limit = target;
      if (config_.max_step_seconds < 0.0) {
        // Derived targets leave the prompts at least min_prefill_share of a step.
        limit = std::max(limit, model.predict(out.shape) / (1.0 - config_.min_prefill_share));
      }
      out.target_seconds = limit;
      // The step's predicted time with the chunks of `total` prompt tokens.
      const auto predicted = [&](int32_t total) {
        const std::vector<int32_t> shares = shares_of(total);
        StepShape shape = out.shape;
        for (size_t i = 0; i < candidates.size(); ++i) {
          if (shares[i] == 0) continue;
          const Sequence& s = *candidates[i].seq;
          shape.prompt_tokens += shares[i];
          shape.attended += attended_by_chunk(s.n_computed, shares[i]);
          if (s.n_computed + shares[i] == static_cast<int32_t>(s.tokens.size())) {
            ++shape.decode_sequences;  // it samples: the output head and a sampler
          }
        }
        return model.predict(shape);
      };
      // The most prompt tokens predicted to fit (the prediction grows with them), at least one.
      int32_t lo = 0;
      int32_t hi = prefill_tokens;
      while (lo < hi) {
        const int32_t mid = lo + (hi - lo + 1) / 2;
        if (predicted(mid) <= limit) {
          lo = mid;
        } else {
          hi = mid - 1;
        }
      }
      if (lo == 0 && prefill_tokens > 0) {
        lo = 1;
        out.target_unreachable = true;
      }
      prefill_tokens = lo;
    }
  }
  const std::vector<int32_t> shares = shares_of(prefill_tokens);
  for (size_t i = 0; i < candidates.size(); ++i) {
    Sequence& s = *candidates[i].seq;
    if (candidates[i].waiting || !s.is_running || shares[i] == 0) continue;
    if (n_scheduled() >= config_.max_num_seqs) break;
    if (allocate_prefill(s, shares[i])) emit(s, shares[i], false);
  }
  int32_t surplus = 0;  // share left over by waiting sequences whose prefix was cached
  for (size_t i = 0; i < candidates.size(); ++i) {
    Sequence& s = *candidates[i].seq;
    if (!candidates[i].waiting) continue;
    const int32_t share = shares[i] + surplus;
    if (running_were_short || share == 0 || n_scheduled() >= config_.max_num_seqs) break;
    const int32_t cached = kv_.add_sequence(s.key.seq_id, s.tokens, s.extra_key);
    s.n_computed = cached;
    if (wanted(s) <= 0) {  // add_sequence() promises to leave at least one token to compute
      fail(Error::Kind::kInternal, "kv cache returned " + std::to_string(cached) +
                                       " cached tokens for " + id_str(s.key.seq_id) + " of " +
                                       std::to_string(s.tokens.size()) + " tokens");
    }
    const int32_t n_new = std::min(share, wanted(s));
    bool admitted = false;
    for (;;) {
      if (kv_.allocate(s.key.seq_id, s.n_computed, int64_t{s.n_computed} + n_new, out.copies)) {
        admitted = true;
        break;
      }
      if (config_.policy != Policy::kPriority) break;
      Sequence* victim = pick_victim([&](const Sequence& v) { return v.priority > s.priority; });
      if (victim == nullptr || later_scheduled(*victim)) break;
      preempt(*victim);
    }
    if (!admitted) {  // no later sequence overtakes one refused for lack of blocks
      kv_.free(s.key.seq_id);
      s.n_computed = 0;
      break;
    }
    surplus = share - n_new;
    s.n_cached_prefix = cached;
    s.is_running = true;
    st.waiting.erase(s.key);
    st.running.insert(s.key);
    emit(s, n_new, false);
  }

  // 3. Drafts: every running sequence has its step; what budget and free blocks are left go to
  // the drafts set aside, in the same order, as many of each as fit (the rest are dropped).
  for (SetAside& a : set_aside) {
    ScheduledSequence& ss = out.scheduled[a.scheduled_index];
    Sequence& s = st.seqs.at(ss.seq_id);
    auto n = static_cast<int32_t>(std::min<size_t>(a.drafts.size(), static_cast<size_t>(budget)));
    const int64_t end = int64_t{s.n_computed} + ss.n_new;
    while (n > 0 && !kv_.allocate(ss.seq_id, s.n_computed, end + n, out.copies)) --n;
    if (n <= 0) continue;
    s.tokens.insert(s.tokens.end(), a.drafts.begin(), a.drafts.begin() + n);
    s.n_draft = n;
    ss.n_new += n;
    ss.n_draft = n;
    out.n_tokens += n;
    budget -= n;
    out.shape.prompt_tokens += n;
    out.shape.attended += attended_by_chunk(end, n);
  }
  return out;
}

void Scheduler::on_step_done(const SchedulerOutput& output) {
  State& st = *state_;
  for (const ScheduledSequence& ss : output.scheduled) {
    auto it = st.seqs.find(ss.seq_id);
    if (it == st.seqs.end()) continue;  // removed (aborted) while the step ran
    Sequence& s = it->second;
    if (!s.is_running || s.n_computed != ss.n_computed_before) {
      fail(Error::Kind::kInternal, "on_step_done: " + id_str(ss.seq_id) +
                                       " is not in the state this step was scheduled from "
                                       "(n_computed " +
                                       std::to_string(s.n_computed) + ", step expected " +
                                       std::to_string(ss.n_computed_before) + ")");
    }
    s.n_computed += ss.n_new;
    // Drafts wait for accept_draft() before their blocks may serve as a cached prefix.
    kv_.commit(ss.seq_id, s.tokens, s.n_computed - ss.n_draft);
  }
}

void Scheduler::append_draft(int64_t seq_id, std::span<const int32_t> draft) {
  Sequence& s = state_->get(seq_id);
  if (draft.empty()) return;
  const auto n_tokens = static_cast<int64_t>(s.tokens.size());
  if (!s.is_running || s.n_draft != 0 || s.n_computed != n_tokens - 1 || n_tokens == s.n_prompt) {
    fail(Error::Kind::kInvalidArgument,
         "append_draft: " + id_str(seq_id) + " is not waiting on one sampled token (running " +
             std::to_string(s.is_running) + ", computed " + std::to_string(s.n_computed) + " of " +
             std::to_string(n_tokens) + ", drafts " + std::to_string(s.n_draft) + ")");
  }
  if (n_tokens - s.n_prompt + static_cast<int64_t>(draft.size()) > s.max_new_tokens) {
    fail(Error::Kind::kInvalidArgument,
         "append_draft: " + std::to_string(draft.size()) + " drafts take " + id_str(seq_id) +
             " past its max_new_tokens (" + std::to_string(s.max_new_tokens) + ")");
  }
  s.tokens.insert(s.tokens.end(), draft.begin(), draft.end());
  s.n_draft = static_cast<int32_t>(draft.size());
}

void Scheduler::accept_draft(int64_t seq_id, int32_t n_accepted, std::span<const int32_t> kept) {
  Sequence& s = state_->get(seq_id);
  if (n_accepted < 0 || n_accepted > s.n_draft) {
    fail(Error::Kind::kInvalidArgument, "accept_draft: " + std::to_string(n_accepted) +
                                            " accepted of the " + std::to_string(s.n_draft) +
                                            " drafts of " + id_str(seq_id));
  }
  if (!kept.empty()) {
    if (static_cast<int32_t>(kept.size()) != n_accepted) {
      fail(Error::Kind::kInvalidArgument, "accept_draft: " + std::to_string(kept.size()) +
                                              " kept tokens for " + std::to_string(n_accepted) +
                                              " accepted drafts of " + id_str(seq_id));
    }
    std::copy(kept.begin(), kept.end(), s.tokens.end() - s.n_draft);
  }
  s.drop_drafts(s.n_draft - n_accepted);
  s.n_draft = 0;
  if (!s.is_running) return;
  s.n_computed = std::min(s.n_computed, static_cast<int32_t>(s.tokens.size()));
  kv_.truncate(seq_id, s.n_computed);
  kv_.commit(seq_id, s.tokens, s.n_computed);
}

void Scheduler::append_token(int64_t seq_id, int32_t token) {
  Sequence& s = state_->get(seq_id);
  if (!s.is_running) {
    fail(Error::Kind::kInvalidArgument, "append_token: " + id_str(seq_id) + " is not running");
  }
  if (s.n_draft != 0) {
    fail(Error::Kind::kInvalidArgument,
         "append_token: " + id_str(seq_id) + " has drafts; accept_draft() them first");
  }
  // add() checked the pool against prompt + max_new_tokens; growing past that could make the
  // sequence unable to fit even alone, so it is a caller bug.
  if (static_cast<int64_t>(s.tokens.size()) - s.n_prompt >= s.max_new_tokens) {
    fail(Error::Kind::kInvalidArgument, "append_token: " + id_str(seq_id) +
                                            " already has its max_new_tokens (" +
                                            std::to_string(s.max_new_tokens) + ") output tokens");
  }
  s.tokens.push_back(token);
}

void Scheduler::remove(int64_t seq_id) {
  State& st = *state_;
  auto it = st.seqs.find(seq_id);
  if (it == st.seqs.end()) return;
  if (it->second.is_running) {
    kv_.free(seq_id);
    st.running.erase(it->second.key);
  } else {
    st.waiting.erase(it->second.key);
  }
  st.seqs.erase(it);
}

bool Scheduler::has_sequence(int64_t seq_id) const { return state_->seqs.count(seq_id) != 0; }

std::span<const int32_t> Scheduler::tokens(int64_t seq_id) const {
  return state_->get(seq_id).tokens;
}

SequenceInfo Scheduler::info(int64_t seq_id) const {
  const Sequence& s = state_->get(seq_id);
  SequenceInfo i;
  i.n_prompt = s.n_prompt;
  i.n_computed = s.n_computed;
  i.n_cached_prefix = s.n_cached_prefix;
  i.n_preemptions = s.n_preemptions;
  i.n_draft = s.n_draft;
  i.is_running = s.is_running;
  return i;
}

int32_t Scheduler::n_running() const { return static_cast<int32_t>(state_->running.size()); }
int32_t Scheduler::n_waiting() const { return static_cast<int32_t>(state_->waiting.size()); }
int64_t Scheduler::n_preemptions_total() const { return state_->n_preemptions_total; }

}  // namespace llms::sched
