// Property test for speculative decoding in the scheduler: an engine loop with a fake model (the
// token after position p is a fixed function of the token before it and p, so sequences sharing
// a prompt share their whole stream and hit each other's prefix blocks) drafts random
// continuations, some right and some wrong, verifies them by comparison, and calls accept_draft()
// and append_token() as the engine does; sequences arrive and are aborted at random over a tight
// pool (preemptions happen). Each step is checked against the contracts (budget, n_draft and
// samples, block tables covering the step, exclusive writes), a simulated KV pool holds the
// token written in every slot so each running sequence's computed positions must read back its
// tokens (a wrong prefix hit or a missed copy shows up), and the KV invariants hold. Every
// request that finishes has exactly the stream the fake model determines.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "sched/scheduler.h"

namespace llms::sched {
namespace {

int32_t next_token(int32_t prev, size_t pos) {
  return static_cast<int32_t>((static_cast<int64_t>(prev) * 31 + static_cast<int64_t>(pos) * 7) %
                              997);
}

std::vector<int32_t> stream(std::vector<int32_t> prompt, int32_t max_new) {
  for (int32_t i = 0; i < max_new; ++i) prompt.push_back(next_token(prompt.back(), prompt.size()));
  return prompt;
}

struct Live {
  std::vector<int32_t> prompt;
  int32_t max_new = 0;
};

class DraftSimulation {
 public:
  DraftSimulation(uint32_t seed, int32_t n_blocks, int32_t block_size, int32_t budget)
      : rng_(seed),
        kv_(n_blocks, block_size, true),
        sched_(config(budget), kv_),
        slots_(static_cast<size_t>(n_blocks) * block_size, -1) {
    for (int i = 0; i < 3; ++i) {
      std::vector<int32_t> p(static_cast<size_t>(uniform(3, 14)));
      for (auto& t : p) t = uniform(0, 996);
      prefixes_.push_back(std::move(p));
    }
  }

  void run(int n_steps) {
    for (int i = 0; i < n_steps; ++i) {
      SCOPED_TRACE("step " + std::to_string(i));
      if (uniform(0, 2) == 0 && live_.size() < 6) arrive();
      if (uniform(0, 30) == 0 && !live_.empty()) abort();
      one_step();
      if (testing::Test::HasFatalFailure()) return;
    }
    for (const auto& [id, l] : live_) sched_.remove(id);
    live_.clear();
    kv_.check_invariants();
    EXPECT_EQ(kv_.n_free_blocks(), kv_.n_blocks());
  }

  int64_t n_finished = 0, n_drafts = 0, n_accepted = 0, n_rejected = 0, n_dropped = 0;
  int64_t n_preemptions() const { return sched_.n_preemptions_total(); }
  int64_t prefix_hits() const { return kv_.stats().prefix_hits; }

 private:
  static SchedulerConfig config(int32_t budget) {
    SchedulerConfig c;
    c.max_num_batched_tokens = budget;
    c.max_num_seqs = 4;
    return c;
  }
  int32_t uniform(int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng_);
  }

  void arrive() {
    Live l;
    l.prompt = prefixes_[static_cast<size_t>(uniform(0, 2))];
    if (uniform(0, 1) == 0) l.prompt.push_back(uniform(0, 996));
    l.max_new = uniform(1, 24);
    sched_.add(next_id_, l.prompt, l.max_new);
    live_.emplace(next_id_++, std::move(l));
  }

  void abort() {
    auto it = live_.begin();
    std::advance(it, uniform(0, static_cast<int32_t>(live_.size()) - 1));
    sched_.remove(it->first);
    live_.erase(it);
  }

  std::vector<int32_t> tokens(int64_t id) const {
    auto t = sched_.tokens(id);
    return {t.begin(), t.end()};
  }

  void one_step() {
    std::map<int64_t, int32_t> drafts_before;
    for (const auto& [id, l] : live_) drafts_before[id] = sched_.info(id).n_draft;
    const SchedulerOutput out = sched_.schedule();
    kv_.check_invariants();
    ASSERT_LE(out.n_tokens, sched_.config().max_num_batched_tokens);
    const size_t bs = static_cast<size_t>(kv_.block_size());
    for (const kv::BlockCopy& c : out.copies) {
      std::copy_n(slots_.begin() + static_cast<std::ptrdiff_t>(c.src * bs), bs,
                  slots_.begin() + static_cast<std::ptrdiff_t>(c.dst * bs));
    }
    std::set<kv::BlockId> written;
    int32_t n_tokens = 0;
    for (const ScheduledSequence& ss : out.scheduled) {
      const SequenceInfo info = sched_.info(ss.seq_id);
      const std::vector<int32_t> t = tokens(ss.seq_id);
      const int32_t end = ss.n_computed_before + ss.n_new;
      n_tokens += ss.n_new;
      ASSERT_EQ(info.n_computed, ss.n_computed_before);
      ASSERT_LE(end, static_cast<int32_t>(t.size()));
      ASSERT_EQ(ss.samples, end == static_cast<int32_t>(t.size()));
      ASSERT_EQ(ss.n_draft, ss.samples ? info.n_draft : 0);
      ASSERT_GE(ss.n_new, 1 + ss.n_draft);
      ASSERT_LE(info.n_draft, drafts_before[ss.seq_id]);  // drafts only ever dropped here
      n_dropped += drafts_before[ss.seq_id] - info.n_draft;
      const auto table = kv_.block_table(ss.seq_id);
      ASSERT_GE(static_cast<int32_t>(table.size()), kv_.blocks_for(end));
      for (int32_t pos = ss.n_computed_before; pos < end; ++pos) {
        const kv::BlockId b = table[static_cast<size_t>(pos) / bs];
        if (pos == ss.n_computed_before || static_cast<size_t>(pos) % bs == 0) {
          ASSERT_TRUE(written.insert(b).second) << "block " << b << " written twice";
        }
        slots_[static_cast<size_t>(b) * bs + static_cast<size_t>(pos) % bs] =
            t[static_cast<size_t>(pos)];
      }
    }
    ASSERT_EQ(n_tokens, out.n_tokens);
    for (int64_t id : out.preempted) {
      ASSERT_EQ(sched_.info(id).n_draft, 0);
      // Its tokens are its accepted stream: no draft survives a preemption.
      const std::vector<int32_t> t = tokens(id);
      const Live& l = live_.at(id);
      ASSERT_EQ(t, stream(l.prompt, static_cast<int32_t>(t.size() - l.prompt.size())));
    }
    sched_.on_step_done(out);
    kv_.check_invariants();

    for (const ScheduledSequence& ss : out.scheduled) {
      if (ss.samples) deliver(ss);
      if (testing::Test::HasFatalFailure()) return;
    }
    propose();
    verify_contents();
  }

  // Verifies the drafts against the fake model and appends the next token, as the engine does.
  void deliver(const ScheduledSequence& ss) {
    const int64_t id = ss.seq_id;
    std::vector<int32_t> t = tokens(id);
    const size_t first_draft = t.size() - static_cast<size_t>(ss.n_draft);
    int32_t n_ok = 0;
    while (n_ok < ss.n_draft &&
           t[first_draft + n_ok] == next_token(t[first_draft + n_ok - 1], first_draft + n_ok)) {
      ++n_ok;
    }
    if (ss.n_draft > 0) {
      sched_.accept_draft(id, n_ok);
      kv_.check_invariants();
      n_accepted += n_ok;
      n_rejected += ss.n_draft - n_ok;
      t.resize(first_draft + static_cast<size_t>(n_ok));
      ASSERT_EQ(tokens(id), t);
      ASSERT_EQ(sched_.info(id).n_computed, static_cast<int32_t>(t.size()));
      ASSERT_EQ(static_cast<int32_t>(kv_.block_table(id).size()),
                kv_.blocks_for(static_cast<int64_t>(t.size())));
    }
    Live& l = live_.at(id);
    const auto n_out = static_cast<int32_t>(t.size() - l.prompt.size());
    if (n_out < l.max_new) sched_.append_token(id, next_token(t.back(), t.size()));
    if (n_out + 1 >= l.max_new) {
      EXPECT_EQ(tokens(id), stream(l.prompt, l.max_new)) << "sequence " << id;
      sched_.remove(id);
      live_.erase(id);
      ++n_finished;
    }
  }

  // Drafts for every sequence waiting on its one sampled token; leaves room for the bonus.
  void propose() {
    for (const auto& [id, l] : live_) {
      const SequenceInfo info = sched_.info(id);
      const std::vector<int32_t> t = tokens(id);
      if (!info.is_running || info.n_draft != 0 ||
          info.n_computed + 1 != static_cast<int32_t>(t.size()) ||
          static_cast<int32_t>(t.size()) == info.n_prompt) {
        continue;
      }
      const int32_t room = l.max_new - static_cast<int32_t>(t.size() - l.prompt.size()) - 1;
      const int32_t k = std::min(room, uniform(0, 5));
      if (k <= 0) continue;
      std::vector<int32_t> d;
      int32_t prev = t.back();
      for (int32_t j = 0; j < k; ++j) {
        int32_t tok = next_token(prev, t.size() + static_cast<size_t>(j));
        if (uniform(0, 3) == 0) tok = (tok + 1) % 997;  // a wrong guess
        d.push_back(tok);
        prev = tok;
      }
      sched_.append_draft(id, d);
      EXPECT_EQ(sched_.info(id).n_draft, k);
      n_drafts += k;
    }
  }

  void verify_contents() {
    const size_t bs = static_cast<size_t>(kv_.block_size());
    for (const auto& [id, l] : live_) {
      const SequenceInfo info = sched_.info(id);
      if (!info.is_running) continue;
      const auto table = kv_.block_table(id);
      const std::vector<int32_t> t = tokens(id);
      for (int32_t pos = 0; pos < info.n_computed; ++pos) {
        const kv::BlockId b = table[static_cast<size_t>(pos) / bs];
        ASSERT_EQ(slots_[static_cast<size_t>(b) * bs + static_cast<size_t>(pos) % bs],
                  t[static_cast<size_t>(pos)])
            << "sequence " << id << " position " << pos;
      }
    }
  }

  std::mt19937 rng_;
  kv::KvCacheManager kv_;
  Scheduler sched_;
  std::vector<int32_t> slots_;
  std::vector<std::vector<int32_t>> prefixes_;
  std::map<int64_t, Live> live_;
  int64_t next_id_ = 1;
};

TEST(SchedulerDraftProperty, RandomDraftsKeepStreamsCachesAndInvariantsRight) {
  struct Case {
    uint32_t seed;
    int32_t n_blocks, block_size, budget;
  };
  int64_t preemptions = 0, dropped = 0;
  for (const Case& c : {Case{1, 12, 4, 32}, Case{2, 10, 4, 6}, Case{3, 24, 2, 16},
                        Case{4, 40, 1, 8}, Case{5, 16, 4, 64}}) {
    SCOPED_TRACE("seed " + std::to_string(c.seed));
    DraftSimulation sim(c.seed, c.n_blocks, c.block_size, c.budget);
    sim.run(3000);
    if (HasFatalFailure()) return;
    EXPECT_GT(sim.n_finished, 50);
    EXPECT_GT(sim.n_accepted, 0);
    EXPECT_GT(sim.n_rejected, 0);
    EXPECT_GT(sim.prefix_hits(), 0);
    preemptions += sim.n_preemptions();
    dropped += sim.n_dropped;
  }
  EXPECT_GT(preemptions, 0);  // the tight pools reached preemption
  EXPECT_GT(dropped, 0);      // and drafts were dropped for budget or blocks
}

}  // namespace
}  // namespace llms::sched
