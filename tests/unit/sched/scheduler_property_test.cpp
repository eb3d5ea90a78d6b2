// Property test: random arrivals (prompts sharing a few prefixes), aborts, priorities and forks
// over small pools under both policies, for several seeds. The fake engine checks every step
// (budgets, block tables, exclusive writes, KV invariants); at the end every request that was not
// aborted has finished with exactly the token stream its id determines, none starved, and the
// whole pool is free. No step preempts a sequence while it runs one that comes later in policy
// order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <tuple>

#include "fake_engine.h"
#include "kv/kv_cache_manager.h"
#include "sched/scheduler.h"
#include "util/error.h"

namespace llms::sched {
namespace {

using testing::fake_token;
using testing::FakeEngine;

struct Origin {
  std::vector<int32_t> prompt;  // for a root
  int64_t parent = -1;          // for a fork child: forked when the parent had fork_len tokens
  size_t fork_len = 0;
  int32_t priority = 0;  // a child's is its parent's
};

// A sequence's place in policy order: (priority under kPriority, its root's arrival, its own
// id); ids are handed out in the order the scheduler numbers arrivals and forks.
std::tuple<int32_t, int64_t, int64_t> policy_key(const std::map<int64_t, Origin>& origins,
                                                 int64_t id, Policy policy) {
  int64_t root = id;
  while (origins.at(root).parent >= 0) root = origins.at(root).parent;
  return {policy == Policy::kPriority ? origins.at(id).priority : 0, root, id};
}

// The stream sequence `id` must finish with, `n_total` tokens long.
std::vector<int32_t> expected_for(const std::map<int64_t, Origin>& origins, int64_t id,
                                  size_t n_total) {
  const Origin& o = origins.at(id);
  std::vector<int32_t> t;
  if (o.parent < 0) {
    t = o.prompt;
  } else {
    t = expected_for(origins, o.parent, o.fork_len);
  }
  while (t.size() < n_total) t.push_back(fake_token(id, t.size()));
  t.resize(n_total);
  return t;
}

struct Params {
  uint32_t seed;
  Policy policy;
  int32_t block_size;
  int32_t n_blocks;
  int32_t budget;
  int32_t max_seqs;
  int32_t threshold;
  bool prefix_caching;
};

void run_random(const Params& p) {
  SCOPED_TRACE("seed " + std::to_string(p.seed));
  std::mt19937 rng(p.seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };

  kv::KvCacheManager kv(p.n_blocks, p.block_size, p.prefix_caching);
  SchedulerConfig cfg;
  cfg.max_num_batched_tokens = p.budget;
  cfg.max_num_seqs = p.max_seqs;
  cfg.max_model_len = 1 << 20;
  cfg.policy = p.policy;
  cfg.long_prefill_token_threshold = p.threshold;
  Scheduler sched(cfg, kv);
  FakeEngine eng(sched, kv);

  std::vector<std::vector<int32_t>> prefixes;
  for (int i = 0; i < 3; ++i)
    prefixes.push_back(testing::iota_tokens(uniform(1, 40), 100000 * (i + 1)));

  std::map<int64_t, Origin> origins;
  std::map<int64_t, int32_t> max_new_of;
  std::vector<int64_t> aborted;
  int64_t next_id = 1;
  int64_t n_refused = 0;
  int64_t n_forks = 0;
  const int kArrivalSteps = 300;

  eng.set_fork_hook([&](int64_t id) -> std::vector<int64_t> {
    if (next_id > 400 || uniform(0, 9) != 0) return {};
    const int64_t child = next_id++;
    eng.fork(id, child);
    ++n_forks;
    Origin o;
    o.parent = id;
    o.fork_len = sched.tokens(id).size();
    o.priority = origins.at(id).priority;
    origins[child] = o;
    max_new_of[child] = max_new_of.at(id);
    return {child};
  });

  auto live_ids = [&] {
    std::vector<int64_t> ids;
    for (const auto& [id, o] : origins) {
      if (sched.has_sequence(id)) ids.push_back(id);
    }
    return ids;
  };

  int step = 0;
  for (; step < 20000; ++step) {
    if (step < kArrivalSteps) {
      for (int n = uniform(0, 2); n > 0; --n) {
        std::vector<int32_t> prompt = prefixes[static_cast<size_t>(uniform(0, 2))];
        prompt.resize(static_cast<size_t>(uniform(1, static_cast<int>(prompt.size()))));
        for (int k = uniform(0, 40); k > 0; --k) prompt.push_back(uniform(0, 50));
        const int32_t max_new = uniform(0, 24);
        const int64_t id = next_id++;
        const int64_t n_total = static_cast<int64_t>(prompt.size()) + max_new;
        if (kv.blocks_for(n_total) > kv.n_blocks()) {
          EXPECT_THROW(sched.add(id, prompt, max_new), Error);
          ++n_refused;
          continue;
        }
        origins[id].prompt = prompt;
        origins[id].priority = uniform(0, 3);
        max_new_of[id] = max_new;
        eng.add(id, std::move(prompt), max_new, origins[id].priority,
                static_cast<uint64_t>(uniform(0, 4) == 0));
      }
      if (uniform(0, 9) == 0) {
        auto ids = live_ids();
        if (!ids.empty()) {
          const int64_t victim =
              ids[static_cast<size_t>(uniform(0, static_cast<int>(ids.size()) - 1))];
          eng.abort(victim);
          aborted.push_back(victim);
        }
      }
    } else if (eng.idle()) {
      break;
    }
    const SchedulerOutput out = eng.step();
    for (const int64_t x : out.preempted) {
      for (const ScheduledSequence& y : out.scheduled) {
        EXPECT_LT(policy_key(origins, y.seq_id, p.policy), policy_key(origins, x, p.policy))
            << "step " << step << " preempted " << x << " and ran the later " << y.seq_id;
      }
    }
    if (out.empty() && !eng.idle()) {
      // Nothing runnable only happens when nothing is running and the head of the queue waits
      // for blocks held by nobody, which would be a deadlock: the pool is free then.
      ADD_FAILURE() << "empty step at " << step << " with " << sched.n_waiting() << " waiting, "
                    << sched.n_running() << " running, " << kv.n_free_blocks() << " free blocks";
      break;
    }
  }
  EXPECT_TRUE(eng.idle()) << "not finished after " << step << " steps";
  EXPECT_EQ(sched.n_running() + sched.n_waiting(), 0);
  EXPECT_NO_THROW(kv.check_invariants());
  EXPECT_EQ(kv.n_free_blocks(), kv.n_blocks());

  // Every non-aborted request finished with its exact stream.
  size_t n_checked = 0;
  for (const auto& [id, o] : origins) {
    if (std::find(aborted.begin(), aborted.end(), id) != aborted.end()) continue;
    auto it = eng.finished().find(id);
    if (it == eng.finished().end()) {
      ADD_FAILURE() << "sequence " << id << " never finished";
      continue;
    }
    EXPECT_EQ(it->second, expected_for(origins, id, it->second.size())) << "sequence " << id;
    ++n_checked;
  }
  EXPECT_GT(n_checked, 50u);
  EXPECT_GT(n_forks, 0);
  std::printf(
      "seed %u: %zu finished (%lld forks), %zu aborted, %lld refused, %lld preemptions, "
      "%d steps, prefix hits %lld/%lld tokens\n",
      p.seed, n_checked, static_cast<long long>(n_forks), aborted.size(),
      static_cast<long long>(n_refused), static_cast<long long>(sched.n_preemptions_total()), step,
      static_cast<long long>(kv.stats().prefix_hits),
      static_cast<long long>(kv.stats().prefix_queries));
}

TEST(SchedulerProperty, RandomWorkloadsFcfs) {
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    run_random({seed, Policy::kFcfs, 4, 24, 32, 6, 0, true});
    run_random({seed + 100, Policy::kFcfs, 16, 12, 64, 16, 16, true});
    run_random({seed + 200, Policy::kFcfs, 8, 16, 48, 4, 0, false});
  }
}

TEST(SchedulerProperty, RandomWorkloadsPriority) {
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    run_random({seed + 300, Policy::kPriority, 4, 24, 32, 6, 0, true});
    run_random({seed + 400, Policy::kPriority, 16, 12, 64, 16, 8, true});
    run_random({seed + 500, Policy::kPriority, 8, 16, 256, 3, 0, false});
  }
}

}  // namespace
}  // namespace llms::sched
