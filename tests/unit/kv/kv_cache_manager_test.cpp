// Unit tests for kv::KvCacheManager: on-demand allocation, all-or-nothing failure, freeing,
// prefix-cache hits and misses, LRU eviction, fork + copy-on-write, and argument errors. Every
// test ends with check_invariants(), and most with all blocks free again.
#include "kv/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "util/error.h"

namespace llms::kv {
namespace {

// Tokens seed, seed+1, ...: distinct prompts for distinct seeds.
std::vector<int32_t> iota_tokens(int32_t n, int32_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), seed);
  return t;
}

std::vector<BlockId> table_of(const KvCacheManager& kv, int64_t seq) {
  auto t = kv.block_table(seq);
  return {t.begin(), t.end()};
}

// Runs a whole prompt through: add, allocate, commit. Returns the cached token count.
int32_t prefill(KvCacheManager& kv, int64_t seq, const std::vector<int32_t>& prompt,
                uint64_t extra_key = 0) {
  const int32_t cached = kv.add_sequence(seq, prompt, extra_key);
  std::vector<BlockCopy> copies;
  EXPECT_TRUE(kv.allocate(seq, cached, static_cast<int64_t>(prompt.size()), copies));
  EXPECT_TRUE(copies.empty());
  kv.commit(seq, prompt, static_cast<int64_t>(prompt.size()));
  return cached;
}

void expect_error(const std::function<void()>& fn, Error::Kind kind, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected an llms::Error mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(KvCacheManager, ConstructorValidates) {
  expect_error([] { KvCacheManager kv(0, 16, true); }, Error::Kind::kInvalidArgument, "n_blocks");
  expect_error([] { KvCacheManager kv(8, 0, true); }, Error::Kind::kInvalidArgument, "block_size");
  expect_error([] { KvCacheManager kv(1 << 28, 1 << 8, true); }, Error::Kind::kInvalidArgument,
               "exceed");
  KvCacheManager kv(10, 16, true);
  EXPECT_EQ(kv.n_blocks(), 10);
  EXPECT_EQ(kv.block_size(), 16);
  EXPECT_EQ(kv.n_free_blocks(), 10);
  EXPECT_EQ(kv.usage(), 0.0);
  kv.check_invariants();
}

TEST(KvCacheManager, BlocksFor) {
  KvCacheManager kv(4, 16, false);
  EXPECT_EQ(kv.blocks_for(0), 0);
  EXPECT_EQ(kv.blocks_for(1), 1);
  EXPECT_EQ(kv.blocks_for(16), 1);
  EXPECT_EQ(kv.blocks_for(17), 2);
  EXPECT_EQ(kv.blocks_for(1024), 64);
  EXPECT_EQ(kv.blocks_for(INT64_MAX), INT32_MAX);  // saturates rather than wrapping
  expect_error([&] { kv.blocks_for(-1); }, Error::Kind::kInvalidArgument, "-1");
}

TEST(KvCacheManager, AllocatesOnDemand) {
  KvCacheManager kv(8, 4, true);
  const auto prompt = iota_tokens(10, 100);
  EXPECT_EQ(kv.add_sequence(1, prompt), 0);  // empty cache
  EXPECT_TRUE(kv.has_sequence(1));
  EXPECT_TRUE(kv.block_table(1).empty());
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.allocate(1, 0, 6, copies));  // a first chunk of 6 tokens: 2 blocks
  EXPECT_EQ(table_of(kv, 1), (std::vector<BlockId>{0, 1}));
  ASSERT_TRUE(kv.allocate(1, 6, 10, copies));  // the rest of the prompt: one more block
  EXPECT_EQ(table_of(kv, 1), (std::vector<BlockId>{0, 1, 2}));
  EXPECT_EQ(kv.n_free_blocks(), 5);
  ASSERT_TRUE(kv.allocate(1, 10, 11, copies));  // decode into the partial tail: no new block
  EXPECT_EQ(kv.block_table(1).size(), 3u);
  ASSERT_TRUE(kv.allocate(1, 12, 13, copies));  // position 12 opens block 3
  EXPECT_EQ(table_of(kv, 1), (std::vector<BlockId>{0, 1, 2, 3}));
  ASSERT_TRUE(kv.allocate(1, 12, 12, copies));  // nothing to write, nothing to add
  EXPECT_EQ(kv.block_table(1).size(), 4u);
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(kv.n_free_blocks(), 4);
  EXPECT_DOUBLE_EQ(kv.usage(), 0.5);
  kv.check_invariants();
}

TEST(KvCacheManager, AllocationIsAllOrNothing) {
  KvCacheManager kv(4, 4, true);
  std::vector<BlockCopy> copies;
  kv.add_sequence(1, iota_tokens(12, 0));
  ASSERT_TRUE(kv.allocate(1, 0, 12, copies));  // 3 of 4 blocks
  kv.add_sequence(2, iota_tokens(8, 50));
  EXPECT_FALSE(kv.allocate(2, 0, 8, copies));  // needs 2, 1 free: nothing taken
  EXPECT_TRUE(kv.block_table(2).empty());
  EXPECT_EQ(kv.n_free_blocks(), 1);
  EXPECT_FALSE(kv.allocate(1, 12, 20, copies));  // needs 2 more for sequence 1 too
  EXPECT_EQ(kv.block_table(1).size(), 3u);
  EXPECT_FALSE(kv.allocate(1, 0, 1000, copies));  // more than the whole pool
  ASSERT_TRUE(kv.allocate(2, 0, 4, copies));      // 1 block fits
  EXPECT_EQ(kv.n_free_blocks(), 0);
  EXPECT_TRUE(copies.empty());
  kv.check_invariants();
}

TEST(KvCacheManager, CopyOnWriteCountsAgainstTheFreeBlocks) {
  // Parent holds 1 full + 1 partial block; a child writing into the shared tail needs one copy
  // plus, for a longer write, one new block. With 1 free block the pair must fail as a whole.
  KvCacheManager kv(3, 4, true);
  const auto prompt = iota_tokens(6, 0);
  prefill(kv, 1, prompt);
  kv.fork(1, 2);
  std::vector<BlockCopy> copies;
  EXPECT_FALSE(kv.allocate(2, 6, 9, copies));  // 1 copy + 1 new > 1 free
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(table_of(kv, 2), table_of(kv, 1));
  ASSERT_TRUE(kv.allocate(2, 6, 7, copies));  // the copy alone fits
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src, table_of(kv, 1)[1]);
  EXPECT_EQ(copies[0].dst, table_of(kv, 2)[1]);
  kv.check_invariants();
}

TEST(KvCacheManager, FreeReturnsEveryBlock) {
  KvCacheManager kv(16, 4, true);
  prefill(kv, 1, iota_tokens(30, 0));
  prefill(kv, 2, iota_tokens(13, 1000));
  EXPECT_EQ(kv.n_free_blocks(), 16 - 8 - 4);
  kv.free(1);
  EXPECT_FALSE(kv.has_sequence(1));
  EXPECT_EQ(kv.n_free_blocks(), 16 - 4);
  kv.free(1);  // unknown ids are ignored
  kv.free(77);
  kv.free(2);
  EXPECT_EQ(kv.n_free_blocks(), 16);
  EXPECT_EQ(kv.usage(), 0.0);
  kv.check_invariants();
  // The id can be reused once freed.
  EXPECT_EQ(kv.add_sequence(1, iota_tokens(3, 5000)), 0);
  kv.check_invariants();
}

TEST(KvCacheManager, BadIdsAndArgumentsAreRefused) {
  KvCacheManager kv(8, 4, true);
  std::vector<BlockCopy> copies;
  const auto t = iota_tokens(8, 0);
  expect_error([&] { kv.allocate(42, 0, 4, copies); }, Error::Kind::kInvalidArgument, "42");
  expect_error([&] { kv.commit(43, t, 4); }, Error::Kind::kInvalidArgument, "43");
  expect_error([&] { kv.fork(44, 45); }, Error::Kind::kInvalidArgument, "44");
  expect_error([&] { kv.block_table(46); }, Error::Kind::kInvalidArgument, "46");
  kv.add_sequence(1, t);
  expect_error([&] { kv.add_sequence(1, t); }, Error::Kind::kInvalidArgument, "sequence 1");
  kv.add_sequence(2, t);
  expect_error([&] { kv.fork(1, 2); }, Error::Kind::kInvalidArgument, "sequence 2");
  expect_error([&] { kv.fork(1, 1); }, Error::Kind::kInvalidArgument, "sequence 1");
  expect_error([&] { kv.allocate(1, 5, 4, copies); }, Error::Kind::kInvalidArgument, "[5, 4)");
  expect_error([&] { kv.allocate(1, -1, 4, copies); }, Error::Kind::kInvalidArgument, "-1");
  ASSERT_TRUE(kv.allocate(1, 0, 4, copies));
  expect_error([&] { kv.commit(1, t, 9); }, Error::Kind::kInvalidArgument, "9");  // > tokens
  expect_error([&] { kv.commit(1, t, 5); }, Error::Kind::kInvalidArgument, "5");  // > blocks
  expect_error([&] { kv.commit(1, t, -2); }, Error::Kind::kInvalidArgument, "-2");
  EXPECT_TRUE(copies.empty());
  kv.check_invariants();
  kv.free(1);
  kv.free(2);
  EXPECT_EQ(kv.n_free_blocks(), 8);
}

TEST(KvCacheManager, PrefixHitLeavesTheLastTokenToCompute) {
  constexpr int32_t kBs = 16;
  for (int32_t len : {1, 15, 16, 17, 32, 33, 96, 97, 100}) {
    SCOPED_TRACE("prompt length " + std::to_string(len));
    KvCacheManager kv(64, kBs, true);
    const auto prompt = iota_tokens(len, 7);
    EXPECT_EQ(prefill(kv, 1, prompt), 0);
    const int32_t expected = (len - 1) / kBs * kBs;
    EXPECT_EQ(kv.add_sequence(2, prompt), expected);
    const auto t1 = table_of(kv, 1);
    const auto t2 = table_of(kv, 2);
    ASSERT_EQ(t2.size(), static_cast<size_t>(expected / kBs));
    EXPECT_TRUE(std::equal(t2.begin(), t2.end(), t1.begin()));
    // Both lookups counted the same capped full blocks; only the second hit.
    EXPECT_EQ(kv.stats().prefix_queries, 2 * expected);
    EXPECT_EQ(kv.stats().prefix_hits, expected);
    std::vector<BlockCopy> copies;
    ASSERT_TRUE(kv.allocate(2, expected, len, copies));
    EXPECT_TRUE(copies.empty());  // the hit blocks are full; only new blocks are written
    kv.commit(2, prompt, len);
    kv.check_invariants();
    kv.free(1);
    kv.free(2);
    EXPECT_EQ(kv.n_free_blocks(), 64);
  }
}

TEST(KvCacheManager, PrefixHitTakesOnlyWhatMatches) {
  constexpr int32_t kBs = 16;
  KvCacheManager kv(64, kBs, true);
  const auto prompt = iota_tokens(100, 0);
  prefill(kv, 1, prompt);
  EXPECT_EQ(prefill(kv, 2, prompt, /*extra_key=*/7), 0);  // other adapter / image: a miss
  for (int32_t k = 0; k < 6; ++k) {
    auto changed = prompt;
    changed[static_cast<size_t>(k * kBs + 5)] = -1;  // one token of block k differs
    EXPECT_EQ(kv.add_sequence(10 + k, changed), k * kBs) << "changed block " << k;
  }
  // A longer prompt sharing the first 100 tokens hits the 6 full blocks of the first.
  auto longer = prompt;
  longer.resize(300, 9);
  EXPECT_EQ(kv.add_sequence(20, longer), 96);
  // The same tokens committed under another extra key are a separate chain.
  EXPECT_EQ(kv.add_sequence(21, prompt, 7), 96);
  const auto t2 = table_of(kv, 2);
  EXPECT_EQ(table_of(kv, 21), std::vector<BlockId>(t2.begin(), t2.begin() + 6));
  const auto t1 = table_of(kv, 1);
  EXPECT_EQ(table_of(kv, 20), std::vector<BlockId>(t1.begin(), t1.begin() + 6));
  kv.check_invariants();
}

TEST(KvCacheManager, DisabledPrefixCachingNeverLooksUp) {
  KvCacheManager kv(16, 4, false);
  const auto prompt = iota_tokens(20, 0);
  EXPECT_EQ(prefill(kv, 1, prompt), 0);
  EXPECT_EQ(prefill(kv, 2, prompt), 0);
  EXPECT_EQ(kv.stats().prefix_queries, 0);
  EXPECT_EQ(kv.stats().prefix_hits, 0);
  kv.free(1);
  kv.free(2);
  std::vector<BlockCopy> copies;
  kv.add_sequence(3, iota_tokens(64, 500));
  ASSERT_TRUE(kv.allocate(3, 0, 64, copies));  // reuses everything without evictions
  EXPECT_EQ(kv.stats().evictions, 0);
  kv.check_invariants();
}

TEST(KvCacheManager, ConcurrentSamePrefixKeepsTheFirstRegistration) {
  KvCacheManager kv(16, 4, true);
  const auto prompt = iota_tokens(9, 0);
  EXPECT_EQ(kv.add_sequence(1, prompt), 0);
  EXPECT_EQ(kv.add_sequence(2, prompt), 0);  // before 1 committed: a miss
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.allocate(1, 0, 9, copies));
  ASSERT_TRUE(kv.allocate(2, 0, 9, copies));
  kv.commit(1, prompt, 9);
  kv.commit(2, prompt, 9);  // same keys: 1's blocks stay the registered ones
  kv.check_invariants();
  EXPECT_EQ(kv.add_sequence(3, prompt), 8);
  const auto t1 = table_of(kv, 1);
  EXPECT_EQ(table_of(kv, 3), (std::vector<BlockId>{t1[0], t1[1]}));
  // Freeing 2 frees its unkeyed blocks; 1's stay held by 3.
  kv.free(2);
  kv.free(1);
  EXPECT_EQ(kv.add_sequence(4, prompt), 8);
  EXPECT_EQ(table_of(kv, 4), table_of(kv, 3));
  kv.check_invariants();
}

TEST(KvCacheManager, CachedFreeBlockRevivedByAHitLeavesTheFreeList) {
  constexpr int32_t kBs = 4;
  KvCacheManager kv(10, kBs, true);
  const auto prompt = iota_tokens(13, 0);  // 3 full blocks + 1 token
  prefill(kv, 1, prompt);
  const auto t1 = table_of(kv, 1);
  kv.free(1);
  EXPECT_EQ(kv.n_free_blocks(), 10);  // cached blocks count as free
  EXPECT_EQ(kv.add_sequence(2, prompt), 12);
  EXPECT_EQ(kv.n_free_blocks(), 7);  // the 3 revived blocks are held again
  const std::vector<BlockId> revived(t1.begin(), t1.begin() + 3);
  EXPECT_EQ(table_of(kv, 2), revived);
  kv.check_invariants();
  // Drain the pool: no revived block may be handed out again.
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.allocate(2, 12, 13, copies));
  kv.add_sequence(3, iota_tokens(24, 900));
  ASSERT_TRUE(kv.allocate(3, 0, 24, copies));
  EXPECT_EQ(kv.n_free_blocks(), 0);
  std::set<BlockId> seen;
  for (int64_t s : {2, 3}) {
    for (BlockId b : kv.block_table(s)) EXPECT_TRUE(seen.insert(b).second) << "block " << b;
  }
  EXPECT_EQ(seen.size(), 10u);
  EXPECT_EQ(kv.stats().evictions, 0);  // only the uncached free blocks were taken
  kv.check_invariants();
}

TEST(KvCacheManager, EvictsLeastRecentlyFreedTailsFirst) {
  constexpr int32_t kBs = 4;
  KvCacheManager kv(8, kBs, true);
  const auto prompt_a = iota_tokens(13, 0);    // 3 full + 1 partial: blocks 0..3
  const auto prompt_b = iota_tokens(9, 1000);  // 2 full + 1 partial: blocks 4..6
  prefill(kv, 1, prompt_a);
  prefill(kv, 2, prompt_b);
  EXPECT_EQ(table_of(kv, 1), (std::vector<BlockId>{0, 1, 2, 3}));
  EXPECT_EQ(table_of(kv, 2), (std::vector<BlockId>{4, 5, 6}));
  kv.free(1);  // free order A: 3 (unkeyed, front), then keyed 2, 1, 0 to the back
  kv.free(2);  // then B: 6 to the front, keyed 5, 4 to the back
  // Free list now: 6 3 7 | 2 1 0 5 4 — uncached first, then A's chain tail-first, then B's.
  std::vector<BlockCopy> copies;
  kv.add_sequence(3, iota_tokens(64, 5000));
  ASSERT_TRUE(kv.allocate(3, 0, 12, copies));  // 3 blocks: all uncached, no eviction
  EXPECT_EQ(table_of(kv, 3), (std::vector<BlockId>{6, 3, 7}));
  EXPECT_EQ(kv.stats().evictions, 0);
  ASSERT_TRUE(kv.allocate(3, 12, 20, copies));  // 2 more: A's blocks 2 then 1 are evicted
  EXPECT_EQ(table_of(kv, 3), (std::vector<BlockId>{6, 3, 7, 2, 1}));
  EXPECT_EQ(kv.stats().evictions, 2);
  // A's head block survives; B (freed later) is intact.
  EXPECT_EQ(kv.add_sequence(4, prompt_a), kBs);
  EXPECT_EQ(table_of(kv, 4), (std::vector<BlockId>{0}));
  EXPECT_EQ(kv.add_sequence(5, prompt_b), 2 * kBs);
  EXPECT_EQ(table_of(kv, 5), (std::vector<BlockId>{4, 5}));
  EXPECT_EQ(kv.n_free_blocks(), 0);
  kv.check_invariants();
  // Everything freed: every block free again, the evictions counter unchanged by frees.
  for (int64_t s : {3, 4, 5}) kv.free(s);
  EXPECT_EQ(kv.n_free_blocks(), 8);
  EXPECT_EQ(kv.stats().evictions, 2);
  kv.check_invariants();
}

TEST(KvCacheManager, ForkedChildrenCopyTheSharedPartialTailOnce) {
  constexpr int32_t kBs = 16;
  constexpr int32_t kPrompt = 40;  // 2 full blocks + 8 tokens in a partial tail
  KvCacheManager kv(32, kBs, true);
  const auto prompt = iota_tokens(kPrompt, 0);
  prefill(kv, 0, prompt);
  const auto parent = table_of(kv, 0);
  ASSERT_EQ(parent.size(), 3u);
  for (int64_t c = 1; c <= 4; ++c) kv.fork(0, c);
  EXPECT_EQ(kv.n_free_blocks(), 32 - 3);  // forks take no blocks
  kv.check_invariants();

  std::set<BlockId> dsts;
  for (int64_t c = 1; c <= 4; ++c) {
    EXPECT_EQ(table_of(kv, c), parent);
    std::vector<BlockCopy> copies;
    ASSERT_TRUE(kv.allocate(c, kPrompt, kPrompt + 1, copies));
    ASSERT_EQ(copies.size(), 1u) << "child " << c;
    EXPECT_EQ(copies[0].src, parent[2]);
    EXPECT_TRUE(std::find(parent.begin(), parent.end(), copies[0].dst) == parent.end());
    EXPECT_TRUE(dsts.insert(copies[0].dst).second);  // each child its own fresh block
    const auto child = table_of(kv, c);
    EXPECT_EQ(child, (std::vector<BlockId>{parent[0], parent[1], copies[0].dst}));
    kv.check_invariants();
  }
  // The parent now holds its tail alone: writing needs no copy.
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.allocate(0, kPrompt, kPrompt + 1, copies));
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(table_of(kv, 0), parent);
  EXPECT_EQ(kv.n_free_blocks(), 32 - 3 - 4);
  for (int64_t c = 0; c <= 4; ++c) kv.free(c);
  EXPECT_EQ(kv.n_free_blocks(), 32);
  kv.check_invariants();
}

TEST(KvCacheManager, ForkedChildInheritsTheHashChain) {
  constexpr int32_t kBs = 4;
  KvCacheManager kv(32, kBs, true);
  auto tokens = iota_tokens(6, 0);
  prefill(kv, 1, tokens);
  kv.fork(1, 2);
  // The child writes 3 more tokens (completing block 1 and opening block 2) and commits: its
  // chain continues from the parent's, so a third sequence with the same tokens hits 2 blocks.
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.allocate(2, 6, 9, copies));
  ASSERT_EQ(copies.size(), 1u);
  tokens.insert(tokens.end(), {70, 71, 72});
  kv.commit(2, tokens, 9);
  auto probe = tokens;
  probe.push_back(99);
  EXPECT_EQ(kv.add_sequence(3, probe), 8);
  const auto t2 = table_of(kv, 2);
  EXPECT_EQ(table_of(kv, 3), (std::vector<BlockId>{t2[0], t2[1]}));
  kv.check_invariants();
}

TEST(KvCacheManager, RewritingACommittedBlockDropsItsKey) {
  constexpr int32_t kBs = 4;
  KvCacheManager kv(16, kBs, true);
  auto tokens = iota_tokens(8, 0);
  prefill(kv, 1, tokens);
  auto probe = tokens;
  probe.push_back(0);
  EXPECT_EQ(kv.add_sequence(2, probe), 8);
  kv.free(2);
  // Sequence 1 rewinds to position 5 (its block 1 is its own) and writes other tokens.
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.allocate(1, 5, 8, copies));
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(kv.add_sequence(3, probe), 4);  // block 1's old key is gone
  kv.free(3);
  tokens[6] = 600;
  kv.commit(1, tokens, 8);
  auto probe2 = tokens;
  probe2.push_back(0);
  EXPECT_EQ(kv.add_sequence(4, probe2), 8);  // rehashed from its new tokens
  kv.check_invariants();
}

TEST(KvCacheManager, RewritingASharedFullBlockCopiesIt) {
  constexpr int32_t kBs = 4;
  KvCacheManager kv(16, kBs, true);
  const auto tokens = iota_tokens(9, 0);
  prefill(kv, 1, tokens);
  EXPECT_EQ(kv.add_sequence(2, tokens), 8);  // shares blocks 0 and 1
  const auto t1 = table_of(kv, 1);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.allocate(2, 4, 9, copies));  // rewrites block 1 and opens block 2
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src, t1[1]);
  const auto t2 = table_of(kv, 2);
  ASSERT_EQ(t2.size(), 3u);
  EXPECT_EQ(t2[0], t1[0]);
  EXPECT_EQ(t2[1], copies[0].dst);
  kv.commit(2, tokens, 9);  // same key as 1's block 1: the copy stays unkeyed
  kv.check_invariants();
  kv.free(2);
  EXPECT_EQ(kv.add_sequence(3, tokens), 8);
  EXPECT_EQ(table_of(kv, 3), (std::vector<BlockId>{t1[0], t1[1]}));
  kv.check_invariants();
}

TEST(KvCacheManager, SamplesForkedFromOnePromptShareItsBlocks) {
  constexpr int32_t kBs = 16;
  constexpr int32_t kPrompt = 1024;
  constexpr int32_t kGenerated = 64;
  constexpr int kSamples = 5;
  KvCacheManager kv(512, kBs, true);
  const auto prompt = iota_tokens(kPrompt, 0);
  prefill(kv, 0, prompt);
  for (int64_t c = 1; c < kSamples; ++c) kv.fork(0, c);
  std::vector<std::vector<int32_t>> tokens(kSamples, prompt);
  for (int32_t step = 0; step < kGenerated; ++step) {
    for (int64_t s = 0; s < kSamples; ++s) {
      auto& t = tokens[static_cast<size_t>(s)];
      t.push_back(static_cast<int32_t>(s * 100000 + step));  // samples diverge at once
      std::vector<BlockCopy> copies;
      const int64_t pos = static_cast<int64_t>(t.size()) - 1;
      ASSERT_TRUE(kv.allocate(s, pos, pos + 1, copies));
      EXPECT_TRUE(copies.empty());  // the prompt ends on a block boundary: nothing shared to write
      kv.commit(s, t, pos + 1);
    }
  }
  const int32_t used = kv.n_blocks() - kv.n_free_blocks();
  const int32_t separate = kSamples * kv.blocks_for(kPrompt + kGenerated);
  std::printf("[ memory ] %d samples of %d+%d tokens: %d blocks shared vs %d separate (%.1f%%)\n",
              kSamples, kPrompt, kGenerated, used, separate, 100.0 * used / separate);
  EXPECT_EQ(used, kPrompt / kBs + kSamples * (kGenerated / kBs));  // 64 + 5 * 4
  EXPECT_LE(used * 10, separate * 3);                              // <= 30%
  kv.check_invariants();
  for (int64_t s = 0; s < kSamples; ++s) kv.free(s);
  EXPECT_EQ(kv.n_free_blocks(), kv.n_blocks());
}

}  // namespace
}  // namespace llms::kv

namespace llms::kv {
namespace {

// H2O-style eviction: the evicted block is given back (findable again under its key, since it
// was computed before any eviction), blocks computed afterwards are never registered (they
// depend on what was evicted), and misuse is refused.
TEST(KvCacheManager, EvictedSequencesRegisterNoLaterBlocks) {
  KvCacheManager kv(16, 4, /*enable_prefix_caching=*/true);
  const std::vector<int32_t> prompt = iota_tokens(12, 100);  // 3 blocks
  prefill(kv, 1, prompt);
  kv.evict_block(1, 1);
  EXPECT_EQ(table_of(kv, 1)[1], kNoBlock);
  EXPECT_EQ(kv.n_blocks_held(1), 2);
  EXPECT_EQ(kv.n_free_blocks(), 14);
  kv.check_invariants();
  expect_error([&] { kv.evict_block(1, 1); }, Error::Kind::kInvalidArgument, "given back");
  expect_error([&] { kv.evict_block(1, 7); }, Error::Kind::kInvalidArgument, "no block index");

  // Eight more tokens (two blocks) computed after the eviction.
  std::vector<int32_t> longer = prompt;
  for (int32_t t : iota_tokens(9, 500)) longer.push_back(t);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.allocate(1, 12, 20, copies));
  kv.commit(1, longer, 20);
  kv.check_invariants();
  // A new sequence with the same 21 tokens finds the 3 blocks computed before the eviction
  // (the evicted one among them, revived from the free list), not the 2 computed after it.
  EXPECT_EQ(kv.add_sequence(2, longer), 12);
  kv.check_invariants();
  std::vector<BlockCopy> none;
  expect_error([&] { kv.allocate(1, 4, 20, none); }, Error::Kind::kInvalidArgument, "given back");
  kv.free(1);
  kv.free(2);
  kv.check_invariants();
  EXPECT_EQ(kv.n_free_blocks(), 16);
}

}  // namespace
}  // namespace llms::kv
