// Property test for kv::KvCacheManager: thousands of random operations (arrivals drawn from a
// few shared prefixes, prefill chunks, speculative decode steps with rejections, forks, aborts,
// preemptions with re-admission) against a simulated KV pool holding, per slot, the token whose
// KV it stores. After every operation the manager's invariants hold and every sequence's
// computed positions read back exactly its tokens through its block table: a wrong prefix hit,
// a missed copy-on-write, a block handed out twice or evicted while in use all show up as a
// wrong token. At the end everything is freed and every block is free.
// With cache groups (kv/kv_groups.h) every group's table is checked the same way over the
// positions a next query can see, and a windowed group must have given back every block wholly
// before its window.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace llms::kv {
namespace {

constexpr int32_t kEmpty = -1000000;  // a slot never written

struct SimSequence {
  std::vector<int32_t> tokens;  // prompt, then accepted output
  int64_t n_computed = 0;
  uint64_t extra_key = 0;
};

class Simulation {
 public:
  Simulation(uint32_t seed, int32_t n_blocks, int32_t block_size, bool prefix_caching,
             std::vector<int64_t> windows, std::vector<int64_t> sinks)
      : rng_(seed),
        windows_(windows.empty() ? std::vector<int64_t>{0} : std::move(windows)),
        sinks_(sinks.empty() ? std::vector<int64_t>(windows_.size(), 0) : std::move(sinks)),
        n_groups_(static_cast<int32_t>(windows_.size())),
        kv_(n_blocks, block_size, prefix_caching, windows_, sinks_),
        slots_(static_cast<size_t>(n_blocks) * block_size, kEmpty) {
    std::uniform_int_distribution<int32_t> tok(0, 50000);
    for (int p = 0; p < 4; ++p) {
      std::vector<int32_t> prefix(static_cast<size_t>(uniform(8, 60)));
      for (auto& t : prefix) t = tok(rng_);
      prefixes_.push_back(std::move(prefix));
    }
  }

  void run(int n_steps) {
    for (int step = 0; step < n_steps; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const int op = uniform(0, 99);
      if (op < 15) {
        arrive();
      } else if (op < 22) {
        readmit();
      } else if (op < 75) {
        compute();
      } else if (op < 81) {
        fork();
      } else if (op < 88) {
        abort();
      } else if (op < 92) {
        preempt(pick_running());
      } else {
        compute();  // a second chance keeps long prompts moving
      }
      kv_.check_invariants();
      verify_contents();
      if (testing::Test::HasFatalFailure()) return;
    }
  }

  void free_all() {
    for (const auto& [id, seq] : running_) kv_.free(id);
    running_.clear();
    kv_.check_invariants();
    EXPECT_EQ(kv_.n_free_blocks(), kv_.n_blocks());
    EXPECT_EQ(kv_.usage(), 0.0);
  }

  const KvCacheManager& kv() const { return kv_; }
  int64_t n_copies() const { return n_copies_; }
  int64_t n_refused() const { return n_refused_; }
  int64_t n_forks() const { return n_forks_; }

 private:
  int32_t uniform(int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng_);
  }

  // Picks a running sequence id, or -1 when none runs.
  int64_t pick_running() {
    if (running_.empty()) return -1;
    auto it = running_.begin();
    std::advance(it, uniform(0, static_cast<int32_t>(running_.size()) - 1));
    return it->first;
  }

  void admit(int64_t id, SimSequence seq) {
    const int32_t cached = kv_.add_sequence(id, seq.tokens, seq.extra_key);
    const int32_t bs = kv_.block_size();
    ASSERT_EQ(cached % bs, 0);
    ASSERT_LT(cached, static_cast<int32_t>(seq.tokens.size()));
    ASSERT_EQ(kv_.block_table(id).size(), static_cast<size_t>(cached / bs * n_groups_));
    seq.n_computed = cached;
    running_.emplace(id, std::move(seq));
  }

  void arrive() {
    if (running_.size() >= 12) return;
    SimSequence seq;
    const auto& prefix = prefixes_[static_cast<size_t>(uniform(0, 3))];
    // Mostly the whole shared prefix, sometimes a cut of it; then a private suffix.
    const int32_t keep = uniform(0, 3) == 0 ? uniform(1, static_cast<int32_t>(prefix.size()))
                                            : static_cast<int32_t>(prefix.size());
    seq.tokens.assign(prefix.begin(), prefix.begin() + keep);
    const int32_t n_suffix = uniform(0, 3) == 0 ? 0 : uniform(1, 30);
    for (int32_t i = 0; i < n_suffix; ++i) seq.tokens.push_back(uniform(0, 50000));
    seq.extra_key = uniform(0, 9) == 0 ? 1 : 0;
    admit(next_id_++, std::move(seq));
  }

  void readmit() {
    if (waiting_.empty() || running_.size() >= 12) return;
    SimSequence seq = std::move(waiting_.front());
    waiting_.erase(waiting_.begin());
    admit(next_id_++, std::move(seq));
  }

  // One scheduler step for one sequence: a prefill chunk while prompt tokens remain, else a
  // speculative decode of k draft tokens of which a random number is accepted.
  void compute() {
    const int64_t id = pick_running();
    if (id < 0) return;
    SimSequence& seq = running_[id];
    const int64_t n_known = static_cast<int64_t>(seq.tokens.size());
    std::vector<int32_t> written;
    int64_t n_accepted = 0;
    if (seq.n_computed < n_known) {
      const int64_t n_new = std::min<int64_t>(uniform(1, 24), n_known - seq.n_computed);
      written.assign(seq.tokens.begin() + seq.n_computed,
                     seq.tokens.begin() + seq.n_computed + n_new);
      n_accepted = n_new;
    } else {
      if (n_known >= 160) return;  // long enough; the sequence idles until aborted
      const int32_t k = uniform(1, 4);
      for (int32_t i = 0; i < k; ++i) written.push_back(uniform(0, 50000));
      n_accepted = uniform(1, k);
    }
    std::vector<BlockCopy> copies;
    const int64_t end = seq.n_computed + static_cast<int64_t>(written.size());
    if (!kv_.allocate(id, seq.n_computed, end, copies)) {
      ++n_refused_;
      ASSERT_TRUE(copies.empty());
      if (uniform(0, 1) == 0) preempt(id);  // as a scheduler would, to let others progress
      return;
    }
    const auto table = kv_.block_table(id);
    ASSERT_GE(table.size(), static_cast<size_t>(kv_.blocks_for(end) * n_groups_));
    apply_copies(copies);
    // Every block the write range falls in must now be ours alone.
    const int32_t bs = kv_.block_size();
    for (int64_t b = seq.n_computed / bs; b < kv_.blocks_for(end); ++b) {
      for (int32_t g = 0; g < n_groups_; ++g) {
        const BlockId block = table[static_cast<size_t>(b * n_groups_ + g)];
        ASSERT_NE(block, kNoBlock) << "write into a given-back entry, group " << g;
        ASSERT_EQ(holders(block), 1) << "write into shared block " << block;
      }
    }
    for (size_t i = 0; i < written.size(); ++i) {
      const int64_t pos = seq.n_computed + static_cast<int64_t>(i);
      for (int32_t g = 0; g < n_groups_; ++g) {
        const BlockId block = table[static_cast<size_t>(pos / bs * n_groups_ + g)];
        slots_[static_cast<size_t>(block) * bs + pos % bs] = written[i];
      }
    }
    if (seq.n_computed == n_known) {
      seq.tokens.insert(seq.tokens.end(), written.begin(), written.begin() + n_accepted);
    }
    seq.n_computed += n_accepted;
    kv_.commit(id, seq.tokens, seq.n_computed);
  }

  void apply_copies(const std::vector<BlockCopy>& copies) {
    const size_t bs = static_cast<size_t>(kv_.block_size());
    for (const BlockCopy& c : copies) {
      ASSERT_NE(c.src, c.dst);
      ASSERT_EQ(holders(c.dst), 1) << "copy target " << c.dst << " is shared";
      std::copy_n(slots_.begin() + static_cast<std::ptrdiff_t>(c.src * bs), bs,
                  slots_.begin() + static_cast<std::ptrdiff_t>(c.dst * bs));
      ++n_copies_;
    }
  }

  void fork() {
    const int64_t parent = pick_running();
    if (parent < 0 || running_.size() >= 12) return;
    const int64_t child = next_id_++;
    kv_.fork(parent, child);
    running_.emplace(child, running_[parent]);
    ++n_forks_;
  }

  void abort() {
    const int64_t id = pick_running();
    if (id < 0) return;
    kv_.free(id);
    running_.erase(id);
  }

  // Recompute preemption: the sequence loses its blocks but keeps its tokens and comes back
  // later, under a new id, finding whatever of its prefix is still cached.
  void preempt(int64_t id) {
    if (id < 0) return;
    kv_.free(id);
    waiting_.push_back(std::move(running_[id]));
    running_.erase(id);
  }

  int32_t holders(BlockId b) const {
    int32_t n = 0;
    for (const auto& [id, seq] : running_) {
      for (BlockId x : kv_.block_table(id)) n += x == b ? 1 : 0;
    }
    return n;
  }

  void verify_contents() {
    const int32_t bs = kv_.block_size();
    for (const auto& [id, seq] : running_) {
      const auto table = kv_.block_table(id);
      ASSERT_GE(static_cast<int64_t>(table.size()) / n_groups_ * bs, seq.n_computed)
          << "sequence " << id;
      for (int32_t g = 0; g < n_groups_; ++g) {
        const int64_t w = windows_[static_cast<size_t>(g)];
        const int64_t n_sinks = sinks_[static_cast<size_t>(g)];
        const int64_t sink_blocks = (n_sinks + bs - 1) / bs;
        // What the next query (at position n_computed) can see: its sinks and its window.
        const int64_t lo = w > 0 ? std::max<int64_t>(0, seq.n_computed - w + 1) : 0;
        for (int64_t b = sink_blocks; b < lo / bs; ++b) {
          ASSERT_EQ(table[static_cast<size_t>(b * n_groups_ + g)], kNoBlock)
              << "sequence " << id << " group " << g << " still holds block index " << b
              << " before its window at " << lo;
        }
        for (int64_t pos = 0; pos < seq.n_computed; ++pos) {
          if (pos >= std::min(n_sinks, lo) && pos < lo) continue;  // neither sink nor window
          const BlockId block = table[static_cast<size_t>(pos / bs * n_groups_ + g)];
          ASSERT_NE(block, kNoBlock) << "sequence " << id << " group " << g << " pos " << pos;
          const int32_t got = slots_[static_cast<size_t>(block) * bs + pos % bs];
          ASSERT_EQ(got, seq.tokens[static_cast<size_t>(pos)])
              << "sequence " << id << " group " << g << " position " << pos << " block " << block;
        }
      }
    }
  }

  std::mt19937 rng_;
  std::vector<int64_t> windows_;  // per cache group; 0: full attention
  std::vector<int64_t> sinks_;    // per cache group: attention sinks (windowed groups only)
  int32_t n_groups_;
  KvCacheManager kv_;
  std::vector<int32_t> slots_;  // slots_[block * block_size + slot]: the token whose KV is there
  std::vector<std::vector<int32_t>> prefixes_;
  std::map<int64_t, SimSequence> running_;
  std::vector<SimSequence> waiting_;
  int64_t next_id_ = 0;
  int64_t n_copies_ = 0;
  int64_t n_refused_ = 0;
  int64_t n_forks_ = 0;
};

struct PropertyCase {
  uint32_t seed;
  int32_t n_blocks;
  int32_t block_size;
  bool prefix_caching;
  bool is_tight;                      // the pool is small enough that allocations get refused
  std::vector<int64_t> windows = {};  // cache groups' windows (empty: one full group)
  std::vector<int64_t> sinks = {};    // and their attention sinks (empty: none)
};

class KvCacheProperty : public testing::TestWithParam<PropertyCase> {};

TEST_P(KvCacheProperty, RandomWorkloadKeepsInvariantsAndContents) {
  const PropertyCase& c = GetParam();
  Simulation sim(c.seed, c.n_blocks, c.block_size, c.prefix_caching, c.windows, c.sinks);
  sim.run(5000);
  if (HasFatalFailure()) return;
  const KvCacheStats& stats = sim.kv().stats();
  std::printf(
      "[ stats  ] copies %lld, refused %lld, forks %lld, hits %lld / %lld tokens, "
      "evictions %lld\n",
      static_cast<long long>(sim.n_copies()), static_cast<long long>(sim.n_refused()),
      static_cast<long long>(sim.n_forks()), static_cast<long long>(stats.prefix_hits),
      static_cast<long long>(stats.prefix_queries), static_cast<long long>(stats.evictions));
  // The workload must actually reach the interesting paths, or the test proves little.
  EXPECT_GT(sim.n_copies(), 0);
  if (c.is_tight) {
    EXPECT_GT(sim.n_refused(), 0);
  }
  EXPECT_GT(sim.n_forks(), 0);
  if (c.prefix_caching) {
    EXPECT_GT(stats.prefix_hits, 0);
    EXPECT_GT(stats.evictions, 0);
    EXPECT_LE(stats.prefix_hits, stats.prefix_queries);
  } else {
    EXPECT_EQ(stats.prefix_queries, 0);
    EXPECT_EQ(stats.evictions, 0);
  }
  sim.free_all();
}

std::vector<PropertyCase> property_cases() {
  std::vector<PropertyCase> cases;
  for (uint32_t seed : {1u, 2u, 3u}) {  // a tight pool: refusals, preemption, evictions
    cases.push_back({seed, 48, 4, true, true});
    cases.push_back({seed, 24, 8, true, true});
  }
  for (uint32_t seed : {4u, 5u, 6u}) {  // a roomier one: more sharing, fewer refusals
    cases.push_back({seed, 160, 4, true, false});
    cases.push_back({seed, 80, 8, true, false});
  }
  cases.push_back({7, 40, 1, true, true});  // one token per block: every write is a block boundary
  cases.push_back({8, 32, 4, false, true});
  cases.push_back({9, 16, 16, false, true});
  // Cache groups: one full and two windowed (as Gemma 3's global and sliding layers), windows
  // shorter than, equal to and longer than a block; all windowed; prefix caching on and off.
  for (uint32_t seed : {10u, 11u}) {
    cases.push_back({seed, 160, 4, true, true, {0, 9, 9}});
    cases.push_back({seed, 240, 8, true, false, {0, 8, 8, 8}});
  }
  cases.push_back({12, 120, 4, true, true, {0, 3}});
  cases.push_back({13, 24, 4, true, true, {5}});
  cases.push_back({14, 120, 4, false, true, {0, 21}});
  cases.push_back({15, 120, 1, true, true, {0, 2}});
  // Attention sinks (StreamingLLM): kept for good before a window that moves on.
  cases.push_back({16, 40, 4, true, true, {10}, {3}});
  cases.push_back({17, 60, 4, true, true, {9, 9}, {4, 0}});
  cases.push_back({18, 40, 1, true, true, {5}, {2}});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(
    Seeds, KvCacheProperty, testing::ValuesIn(property_cases()),
    [](const testing::TestParamInfo<PropertyCase>& param_info) {
      const PropertyCase& c = param_info.param;
      return "seed" + std::to_string(c.seed) + "_blocks" + std::to_string(c.n_blocks) + "_bs" +
             std::to_string(c.block_size) + (c.prefix_caching ? "_cached" : "_uncached") +
             (c.windows.empty() ? "" : "_groups" + std::to_string(c.windows.size())) +
             (c.sinks.empty() ? "" : "_sinks");
    });

}  // namespace
}  // namespace llms::kv
