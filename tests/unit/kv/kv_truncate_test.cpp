// Unit tests for KvCacheManager::truncate(), the rollback of rejected speculative tokens: the
// blocks past blocks_for(n) go back to the free pool and the table shrinks; a mid-block end keeps
// its block; a keyed block that will be rewritten loses its key (no stale prefix hit once new
// tokens are committed over it) while blocks released whole keep theirs (still hittable); a block
// shared with a fork keeps its key; a truncate beyond the covered positions is refused and changes
// nothing. Ends with a randomized property test (allocate / commit / truncate / fork / free /
// add_sequence over shared prefixes) against a simulated pool holding, per slot, the token whose
// KV it stores: a stale key handed to a later sequence shows up as a wrong token. Invariants are
// checked after every operation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "util/error.h"

namespace llms::kv {
namespace {

std::vector<int32_t> iota_tokens(int32_t n, int32_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), seed);
  return t;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<BlockId> table_of(const KvCacheManager& kv, int64_t seq) {
  auto t = kv.block_table(seq);
  return {t.begin(), t.end()};
}

// add_sequence + allocate + commit of the whole of `tokens`; returns the cached token count.
int32_t prefill(KvCacheManager& kv, int64_t seq, const std::vector<int32_t>& tokens) {
  const int32_t cached = kv.add_sequence(seq, tokens);
  std::vector<BlockCopy> copies;
  EXPECT_TRUE(kv.allocate(seq, cached, static_cast<int64_t>(tokens.size()), copies));
  kv.commit(seq, tokens, static_cast<int64_t>(tokens.size()));
  kv.check_invariants();
  return cached;
}

// How many tokens of `tokens` a new sequence would take from the cache (the probe is freed).
int32_t probe_hit(KvCacheManager& kv, const std::vector<int32_t>& tokens) {
  constexpr int64_t kProbe = 999999;
  const int32_t cached = kv.add_sequence(kProbe, tokens);
  kv.check_invariants();
  kv.free(kProbe);
  kv.check_invariants();
  return cached;
}

void expect_invalid(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected llms::Error(kInvalidArgument) mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(KvTruncate, ReleasesTheBlocksPastTheNewEnd) {
  KvCacheManager kv(16, 4, true);
  kv.add_sequence(1, iota_tokens(3, 0));
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.allocate(1, 0, 15, copies));  // 4 blocks
  const std::vector<BlockId> full = table_of(kv, 1);
  ASSERT_EQ(full.size(), 4u);
  EXPECT_EQ(kv.n_free_blocks(), 12);

  kv.truncate(1, 9);  // blocks_for(9) = 3
  kv.check_invariants();
  EXPECT_EQ(table_of(kv, 1), std::vector<BlockId>(full.begin(), full.begin() + 3));
  EXPECT_EQ(kv.n_free_blocks(), 13);

  kv.truncate(1, 9);  // again: nothing left to release
  kv.check_invariants();
  EXPECT_EQ(kv.n_free_blocks(), 13);

  kv.truncate(1, 8);  // exactly two blocks
  kv.check_invariants();
  EXPECT_EQ(table_of(kv, 1), std::vector<BlockId>(full.begin(), full.begin() + 2));
  EXPECT_EQ(kv.n_free_blocks(), 14);

  kv.truncate(1, 0);
  kv.check_invariants();
  EXPECT_TRUE(kv.block_table(1).empty());
  EXPECT_EQ(kv.n_free_blocks(), 16);
  EXPECT_TRUE(kv.has_sequence(1));  // rolled back, not removed

  // The sequence grows again from nothing.
  ASSERT_TRUE(kv.allocate(1, 0, 5, copies));
  EXPECT_EQ(kv.block_table(1).size(), 2u);
  kv.check_invariants();
  kv.free(1);
  EXPECT_EQ(kv.n_free_blocks(), 16);
  kv.check_invariants();
}

TEST(KvTruncate, AMidBlockEndKeepsThatBlock) {
  KvCacheManager kv(8, 4, false);
  kv.add_sequence(1, iota_tokens(1, 0));
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.allocate(1, 0, 12, copies));
  const std::vector<BlockId> full = table_of(kv, 1);
  kv.truncate(1, 5);  // position 4 lives in block 1: blocks 0 and 1 stay
  kv.check_invariants();
  EXPECT_EQ(table_of(kv, 1), std::vector<BlockId>(full.begin(), full.begin() + 2));
  EXPECT_EQ(kv.n_free_blocks(), 6);
  // Writing from 5 on reuses the kept block and adds one for position 8.
  ASSERT_TRUE(kv.allocate(1, 5, 9, copies));
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(table_of(kv, 1)[1], full[1]);
  EXPECT_EQ(kv.block_table(1).size(), 3u);
  kv.check_invariants();
}

TEST(KvTruncate, ARewrittenKeyedBlockLosesItsKey) {
  KvCacheManager kv(16, 4, true);
  const auto old_tokens = iota_tokens(12, 100);  // three full blocks, all keyed after commit
  EXPECT_EQ(prefill(kv, 1, old_tokens), 0);
  const std::vector<BlockId> before = table_of(kv, 1);
  EXPECT_EQ(probe_hit(kv, concat(old_tokens, {7})), 12);

  kv.truncate(1, 6);  // block 1 (positions 4..7) will be rewritten from position 6
  kv.check_invariants();
  EXPECT_EQ(table_of(kv, 1), std::vector<BlockId>(before.begin(), before.begin() + 2));
  // Block 1 no longer answers for the old tokens (block 2 hangs off it in the chain).
  EXPECT_EQ(probe_hit(kv, concat(old_tokens, {7})), 4);

  // New tokens from position 6 on, committed over the kept block.
  std::vector<int32_t> new_tokens(old_tokens.begin(), old_tokens.begin() + 6);
  for (int32_t t : {900, 901, 902, 903, 904, 905}) new_tokens.push_back(t);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.allocate(1, 6, 12, copies));
  EXPECT_TRUE(copies.empty());  // ours alone: written in place
  EXPECT_EQ(table_of(kv, 1)[1], before[1]);
  kv.commit(1, new_tokens, 12);
  kv.check_invariants();

  // The old tokens hit block 0 only; the new ones hit all three blocks, the rewritten one keyed
  // by its new contents.
  EXPECT_EQ(probe_hit(kv, concat(old_tokens, {7})), 4);
  kv.add_sequence(2, concat(new_tokens, {7}));
  EXPECT_EQ(table_of(kv, 2), table_of(kv, 1));
  kv.check_invariants();
  kv.free(2);
  kv.free(1);
  EXPECT_EQ(kv.n_free_blocks(), 16);
  kv.check_invariants();
}

TEST(KvTruncate, BlocksReleasedWholeKeepTheirKey) {
  KvCacheManager kv(16, 4, true);
  const auto tokens = iota_tokens(12, 300);
  prefill(kv, 1, tokens);
  const std::vector<BlockId> before = table_of(kv, 1);
  kv.truncate(1, 8);  // a block boundary: block 2 released whole, blocks 0 and 1 untouched
  kv.check_invariants();
  EXPECT_EQ(kv.block_table(1).size(), 2u);
  EXPECT_EQ(kv.n_free_blocks(), 14);

  // A new sequence with exactly those tokens finds all three blocks, block 2 revived from the
  // free list.
  EXPECT_EQ(kv.add_sequence(2, concat(tokens, {1})), 12);
  EXPECT_EQ(table_of(kv, 2), before);
  EXPECT_EQ(kv.n_free_blocks(), 13);
  EXPECT_EQ(kv.stats().prefix_hits, 12);
  kv.check_invariants();

  // A truncate inside the chain but at a block boundary of a block released whole, with the
  // chain then extended again by the first sequence: its re-grown block is new (the cached one
  // is held by sequence 2).
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.allocate(1, 8, 12, copies));
  EXPECT_TRUE(copies.empty());
  EXPECT_NE(table_of(kv, 1)[2], before[2]);
  kv.commit(1, tokens, 12);  // same tokens: the key stays with block 2 of sequence 2
  kv.check_invariants();
  kv.free(1);
  kv.free(2);
  EXPECT_EQ(kv.n_free_blocks(), 16);
  kv.check_invariants();
}

TEST(KvTruncate, BeyondTheCoveredPositionsIsRefusedAndChangesNothing) {
  KvCacheManager kv(8, 4, true);
  prefill(kv, 1, iota_tokens(6, 0));  // 2 blocks cover positions 0..7
  const std::vector<BlockId> before = table_of(kv, 1);
  const int32_t free_before = kv.n_free_blocks();
  expect_invalid([&] { kv.truncate(1, 9); }, "sequence 1");
  expect_invalid([&] { kv.truncate(1, 1000); }, "1000");
  expect_invalid([&] { kv.truncate(1, -1); }, "-1");
  expect_invalid([&] { kv.truncate(42, 0); }, "sequence 42");
  EXPECT_EQ(table_of(kv, 1), before);
  EXPECT_EQ(kv.n_free_blocks(), free_before);
  kv.check_invariants();
  // The refused calls left the keys alone too: block 0 still hits.
  EXPECT_EQ(probe_hit(kv, iota_tokens(6, 0)), 4);
  // Every covered position is allowed, the last one included (allocated past the tokens).
  kv.truncate(1, 8);
  EXPECT_EQ(table_of(kv, 1), before);
  kv.truncate(1, 7);
  EXPECT_EQ(table_of(kv, 1), before);
  kv.check_invariants();
}

TEST(KvTruncate, SharedForkedBlocksKeepTheirKey) {
  KvCacheManager kv(16, 4, true);
  const auto tokens = iota_tokens(10, 500);  // blocks 0, 1 full and keyed; block 2 partial
  prefill(kv, 1, tokens);
  kv.fork(1, 2);
  const std::vector<BlockId> shared = table_of(kv, 1);
  const int32_t free_before = kv.n_free_blocks();

  kv.truncate(2, 6);  // into block 1, which the parent also holds: it keeps its key
  kv.check_invariants();
  EXPECT_EQ(table_of(kv, 2), std::vector<BlockId>(shared.begin(), shared.begin() + 2));
  EXPECT_EQ(table_of(kv, 1), shared);
  EXPECT_EQ(kv.n_free_blocks(), free_before);  // block 2 still held by the parent
  EXPECT_EQ(probe_hit(kv, concat(tokens, {1})), 8);

  // The child writes new tokens from 6: block 1 is copied, not rewritten in place.
  std::vector<int32_t> child_tokens(tokens.begin(), tokens.begin() + 6);
  child_tokens.push_back(77);
  child_tokens.push_back(78);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.allocate(2, 6, 8, copies));
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src, shared[1]);
  EXPECT_EQ(table_of(kv, 2)[1], copies[0].dst);
  kv.commit(2, child_tokens, 8);
  kv.check_invariants();
  EXPECT_EQ(probe_hit(kv, concat(tokens, {1})), 8);        // the parent's block 1
  EXPECT_EQ(probe_hit(kv, concat(child_tokens, {1})), 8);  // the child's copy

  // With the parent gone the child holds its blocks alone: a truncate into block 1 now drops
  // its key.
  kv.free(1);
  kv.check_invariants();
  kv.truncate(2, 5);
  kv.check_invariants();
  EXPECT_EQ(probe_hit(kv, concat(child_tokens, {1})), 4);
  EXPECT_EQ(probe_hit(kv, concat(tokens, {1})), 8);  // the parent's blocks, cached and free
  kv.free(2);
  EXPECT_EQ(kv.n_free_blocks(), 16);
  kv.check_invariants();
}

TEST(KvTruncate, WorksWithPrefixCachingDisabled) {
  KvCacheManager kv(8, 4, false);
  prefill(kv, 1, iota_tokens(11, 0));
  kv.fork(1, 2);
  kv.truncate(2, 3);
  kv.check_invariants();
  EXPECT_EQ(kv.block_table(2).size(), 1u);
  EXPECT_EQ(kv.n_free_blocks(), 5);
  kv.truncate(1, 0);
  kv.check_invariants();
  EXPECT_EQ(kv.n_free_blocks(), 7);
  kv.free(2);
  kv.free(1);
  EXPECT_EQ(kv.n_free_blocks(), 8);
  kv.check_invariants();
}

// ---- randomized property test ----

constexpr int32_t kEmpty = -1;  // a slot never written

struct SimSeq {
  std::vector<int32_t> tokens;  // known tokens
  int64_t n_computed = 0;       // of them, in the cache
};

class TruncateSimulation {
 public:
  TruncateSimulation(uint32_t seed, int32_t n_blocks, int32_t block_size, bool caching)
      : rng_(seed),
        kv_(n_blocks, block_size, caching),
        slots_(static_cast<size_t>(n_blocks) * block_size, kEmpty) {
    for (int p = 0; p < 3; ++p) prefixes_.push_back(random_tokens(uniform(4, 24)));
  }

  void run(int n_ops) {
    for (int op = 0; op < n_ops; ++op) {
      SCOPED_TRACE("op " + std::to_string(op));
      const int r = uniform(0, 99);
      if (r < 15) {
        arrive();
      } else if (r < 50) {
        compute();
      } else if (r < 75) {
        truncate();
      } else if (r < 83) {
        fork();
      } else if (r < 90) {
        free_one();
      } else {
        refused_truncate();
      }
      kv_.check_invariants();
      verify_contents();
      if (testing::Test::HasFatalFailure()) return;
    }
    for (const auto& [id, seq] : seqs_) kv_.free(id);
    seqs_.clear();
    kv_.check_invariants();
    EXPECT_EQ(kv_.n_free_blocks(), kv_.n_blocks());
  }

  int64_t n_truncates = 0;
  int64_t n_hits = 0;

 private:
  int32_t uniform(int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng_);
  }
  // A small alphabet: rewrites often reproduce the tokens a stale key would name.
  std::vector<int32_t> random_tokens(int32_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = uniform(0, 3);
    return t;
  }
  int64_t pick() {
    if (seqs_.empty()) return -1;
    auto it = seqs_.begin();
    std::advance(it, uniform(0, static_cast<int32_t>(seqs_.size()) - 1));
    return it->first;
  }
  int32_t holders(BlockId b) const {
    int32_t n = 0;
    for (const auto& [id, s] : seqs_) {
      for (BlockId x : kv_.block_table(id)) n += x == b ? 1 : 0;
    }
    return n;
  }

  void arrive() {
    if (seqs_.size() >= 8) return;
    SimSeq s;
    s.tokens = prefixes_[static_cast<size_t>(uniform(0, 2))];
    for (int32_t t : random_tokens(uniform(1, 12))) s.tokens.push_back(t);
    const int64_t id = next_id_++;
    const int32_t cached = kv_.add_sequence(id, s.tokens);
    ASSERT_EQ(cached % kv_.block_size(), 0);
    ASSERT_LT(cached, static_cast<int32_t>(s.tokens.size()));
    n_hits += cached;
    s.n_computed = cached;
    seqs_.emplace(id, std::move(s));
  }

  // Computes up to 8 more positions, extending the known tokens when they run out (a decode
  // with drafts), then commits what was computed.
  void compute() {
    const int64_t id = pick();
    if (id < 0) return;
    SimSeq& s = seqs_[id];
    const int64_t n_new = uniform(1, 8);
    while (static_cast<int64_t>(s.tokens.size()) < s.n_computed + n_new) {
      if (s.tokens.size() >= 72) return;  // long enough
      s.tokens.push_back(uniform(0, 3));
    }
    const int64_t end = s.n_computed + n_new;
    std::vector<BlockCopy> copies;
    if (!kv_.allocate(id, s.n_computed, end, copies)) {
      ASSERT_TRUE(copies.empty());
      return;
    }
    const size_t bs = static_cast<size_t>(kv_.block_size());
    for (const BlockCopy& c : copies) {
      std::copy_n(slots_.begin() + static_cast<std::ptrdiff_t>(c.src * bs), bs,
                  slots_.begin() + static_cast<std::ptrdiff_t>(c.dst * bs));
    }
    const auto table = kv_.block_table(id);
    ASSERT_GE(static_cast<int64_t>(table.size()), kv_.blocks_for(end));
    for (int64_t pos = s.n_computed; pos < end; ++pos) {
      const BlockId b = table[static_cast<size_t>(pos) / bs];
      ASSERT_EQ(holders(b), 1) << "write into shared block " << b;
      slots_[static_cast<size_t>(b) * bs + static_cast<size_t>(pos) % bs] =
          s.tokens[static_cast<size_t>(pos)];
    }
    s.n_computed = end;
    kv_.commit(id, s.tokens, s.n_computed);
  }

  // Rolls back to a random covered position; half the time the tokens after it are replaced
  // (rejected drafts: the rewrite will differ), else they stay known and are recomputed.
  void truncate() {
    const int64_t id = pick();
    if (id < 0) return;
    SimSeq& s = seqs_[id];
    const auto table = kv_.block_table(id);
    const int64_t covered = static_cast<int64_t>(table.size()) * kv_.block_size();
    const int64_t n = uniform(0, static_cast<int32_t>(covered));
    const int32_t keep = kv_.blocks_for(n);
    int32_t n_released = 0;  // tail blocks only this sequence holds go back to the pool
    for (size_t b = static_cast<size_t>(keep); b < table.size(); ++b) {
      n_released += holders(table[b]) == 1 ? 1 : 0;
    }
    const std::vector<BlockId> kept(table.begin(), table.begin() + keep);
    const int32_t free_before = kv_.n_free_blocks();
    kv_.truncate(id, n);
    ++n_truncates;
    EXPECT_EQ(table_of(kv_, id), kept);
    EXPECT_EQ(kv_.n_free_blocks(), free_before + n_released);
    s.n_computed = std::min(s.n_computed, n);
    if (uniform(0, 1) == 0 && static_cast<int64_t>(s.tokens.size()) > s.n_computed) {
      s.tokens.resize(static_cast<size_t>(s.n_computed));
    }
    kv_.commit(id, s.tokens, s.n_computed);  // re-keys nothing past n_computed
  }

  void refused_truncate() {
    const int64_t id = pick();
    if (id < 0) return;
    const std::vector<BlockId> before = table_of(kv_, id);
    const int32_t free_before = kv_.n_free_blocks();
    const int64_t covered = static_cast<int64_t>(before.size()) * kv_.block_size();
    EXPECT_THROW(kv_.truncate(id, covered + uniform(1, 9)), Error);
    EXPECT_EQ(table_of(kv_, id), before);
    EXPECT_EQ(kv_.n_free_blocks(), free_before);
  }

  void fork() {
    const int64_t parent = pick();
    if (parent < 0 || seqs_.size() >= 8) return;
    const int64_t child = next_id_++;
    kv_.fork(parent, child);
    seqs_.emplace(child, seqs_[parent]);
  }

  void free_one() {
    const int64_t id = pick();
    if (id < 0) return;
    kv_.free(id);
    seqs_.erase(id);
  }

  void verify_contents() {
    const int32_t bs = kv_.block_size();
    for (const auto& [id, s] : seqs_) {
      const auto table = kv_.block_table(id);
      ASSERT_GE(static_cast<int64_t>(table.size()) * bs, s.n_computed) << "sequence " << id;
      for (int64_t pos = 0; pos < s.n_computed; ++pos) {
        const BlockId b = table[static_cast<size_t>(pos / bs)];
        ASSERT_EQ(slots_[static_cast<size_t>(b) * bs + static_cast<size_t>(pos % bs)],
                  s.tokens[static_cast<size_t>(pos)])
            << "sequence " << id << " position " << pos << " block " << b;
      }
    }
  }

  std::mt19937 rng_;
  KvCacheManager kv_;
  std::vector<int32_t> slots_;
  std::vector<std::vector<int32_t>> prefixes_;
  std::map<int64_t, SimSeq> seqs_;
  int64_t next_id_ = 0;
};

TEST(KvTruncate, RandomOperationsKeepInvariantsAndContents) {
  struct Case {
    uint32_t seed;
    int32_t n_blocks;
    int32_t block_size;
    bool caching;
  };
  for (const Case& c : {Case{1, 24, 4, true}, Case{2, 40, 4, true}, Case{3, 16, 8, true},
                        Case{4, 48, 1, true}, Case{5, 24, 4, false}, Case{6, 64, 2, true}}) {
    SCOPED_TRACE("seed " + std::to_string(c.seed));
    TruncateSimulation sim(c.seed, c.n_blocks, c.block_size, c.caching);
    sim.run(4000);
    EXPECT_GT(sim.n_truncates, 500);
    if (c.caching) {
      EXPECT_GT(sim.n_hits, 0);  // the prefix cache was exercised
    }
  }
}

// With a windowed cache group (window 8, blocks of 4) a rollback may not reach back past what the
// window gave back: 20 committed tokens leave group 1 holding block indices 3 and 4 (the next
// query, at 20, sees 13-20), so a rollback to 19 (sees 12-19, block 3 on) is fine and one to 18
// (sees 11-18, block 2 on) is refused and changes nothing. The full group keeps everything.
TEST(KvTruncate, AWindowedGroupRefusesARollbackPastWhatItGaveBack) {
  const std::vector<int64_t> windows = {0, 8};
  KvCacheManager kv(32, 4, /*enable_prefix_caching=*/true, windows);
  prefill(kv, 1, iota_tokens(20, 1));
  std::vector<BlockId> table = table_of(kv, 1);
  ASSERT_EQ(table.size(), 10u);  // 5 block indices x 2 groups
  for (int b = 0; b < 5; ++b) EXPECT_NE(table[static_cast<size_t>(2 * b)], kNoBlock) << b;
  for (int b = 0; b < 3; ++b) EXPECT_EQ(table[static_cast<size_t>(2 * b + 1)], kNoBlock) << b;
  EXPECT_NE(table[7], kNoBlock);
  EXPECT_NE(table[9], kNoBlock);
  EXPECT_EQ(kv.n_free_blocks(), 32 - 7);

  expect_invalid([&] { kv.truncate(1, 18); }, "were given back");
  EXPECT_EQ(table_of(kv, 1), table);
  kv.check_invariants();
  kv.truncate(1, 19);  // same blocks: the last one is rewritten from slot 3
  EXPECT_EQ(table_of(kv, 1), table);
  kv.check_invariants();
  expect_invalid([&] { kv.truncate(1, 16); }, "were given back");  // 16 sees 9-16: block 2 on
  kv.free(1);
  kv.check_invariants();
  EXPECT_EQ(kv.n_free_blocks(), 32);
}

}  // namespace
}  // namespace llms::kv
