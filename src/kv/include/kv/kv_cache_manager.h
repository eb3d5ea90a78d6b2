// kv/kv_cache_manager: which KV blocks each sequence owns, shared prefixes, and the free pool.
//
// The pool holds n_blocks blocks of block_size token slots (the tensors live elsewhere; this
// class only decides ids). Each sequence has a block table: position p of the sequence lives in
// block_table[p / block_size], slot p % block_size. A block has a ref count = the number of
// block tables that hold it.
//
// Prefix caching: once a block is full of computed tokens it is keyed by a 128-bit hash of
// (parent block's hash, its block_size token ids, the sequence's extra key) and registered, so a
// later sequence whose prompt starts with the same tokens (and has the same extra key) takes a
// reference to it instead of recomputing. A block whose ref count drops to 0 goes to the free
// list; if it still holds a registered prefix it stays findable until it is reused for new data
// (evicted), least recently freed first. Hits, misses (in blocks) and evictions are counted.
//
// Sharing and copy-on-write: fork() gives a child sequence the parent's table with every block's
// ref count raised (the n samples of one prompt share its blocks). Before a sequence writes into
// a block that another table also holds (only a partial last block can be written), allocate()
// gives it a fresh block and reports the copy the executor must do before the step.
//
// Invariants (check_invariants()): every block is free xor referenced; each ref count equals the
// number of tables holding the block; free blocks are exactly those in the free list; registered
// hashes map to blocks that carry that hash; nothing leaks after every sequence is freed.
//
// Rollback: truncate() gives back the blocks a sequence no longer covers (speculative tokens
// that verification rejected) and drops the keys of the blocks it will rewrite.
//
// Cache groups (kv/kv_groups.h): the manager keeps one block table per group, interleaved
// (block index b of group g is table[b * n_groups() + g]), all drawing on the one pool. A group
// with a window W gives a block back as soon as no later query can see it: once n tokens are
// committed, the next query is at position n and sees positions from n - W + 1 on, so every
// block wholly before that is released (its entry becomes kNoBlock; a keyed block stays
// findable in the free list like any other). Prefix caching with windows: a hit of k blocks
// needs blocks [0, k) of every full group and, of every windowed group, the blocks that hold
// the window before position k * block_size; the longest k for which all of them are cached is
// taken (every group's copy of a block is keyed apart, since each holds other layers). A group
// with attention sinks also keeps (and a hit also needs) the blocks of its first `sinks` tokens;
// what it gives back lies between them and the window.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kv/step_batch.h"

namespace llms::kv {

struct BlockCopy {
  BlockId src = 0;
  BlockId dst = 0;
};

struct KvCacheStats {
  int64_t prefix_queries = 0;  // tokens looked up by add_sequence (full blocks only)
  int64_t prefix_hits = 0;     // of those, tokens found cached
  int64_t evictions = 0;       // cached blocks reused for new data
};

class KvCacheManager {
 public:
  // group_windows: one entry per cache group, 0 for full attention or the group's sliding
  // window in tokens (kv::KvGroupLayout::windows()); the default is one full group.
  // group_sinks (empty: none): per group, tokens at the start a windowed group keeps for good
  // (attention sinks, kv::KvGroupLayout::sinks()).
  KvCacheManager(int32_t n_blocks, int32_t block_size, bool enable_prefix_caching,
                 std::span<const int64_t> group_windows = {},
                 std::span<const int64_t> group_sinks = {});
  ~KvCacheManager();
  KvCacheManager(const KvCacheManager&) = delete;
  KvCacheManager& operator=(const KvCacheManager&) = delete;

  int32_t block_size() const;
  int32_t n_blocks() const;
  // Blocks that allocate() can hand out now (ref count 0, cached or not).
  int32_t n_free_blocks() const;
  int32_t n_groups() const;
  // Block indices (entries per group's table) needed to hold n_tokens positions.
  int32_t blocks_for(int64_t n_tokens) const;
  // Pool blocks one sequence of n_tokens holds at most, across its groups, when each step
  // computes at most max_step_tokens of its tokens (a windowed group then holds its window plus
  // one step). Without windows: n_groups() * blocks_for(n_tokens).
  int32_t blocks_for_sequence(int64_t n_tokens, int64_t max_step_tokens) const;

  // Registers a new sequence (seq_id must be unused) and takes references on the longest run
  // of cached full blocks that matches the start of `tokens`. At most tokens.size() - 1 tokens
  // are taken from the cache, so at least one token is left to compute (its logits are needed).
  // Returns the number of cached tokens, a multiple of block_size. Takes no free block other
  // than cached ones it revives; never fails.
  int32_t add_sequence(int64_t seq_id, std::span<const int32_t> tokens, uint64_t extra_key = 0);

  // Makes the sequence's table cover n_tokens_total positions, allocating blocks on demand, and
  // makes every block that positions [n_write_begin, n_tokens_total) fall in exclusively owned
  // (copy-on-write: appends a BlockCopy per block copied). All or nothing: returns false and
  // changes nothing when the free blocks do not suffice.
  bool allocate(int64_t seq_id, int64_t n_write_begin, int64_t n_tokens_total,
                std::vector<BlockCopy>& copies);

  // Tells the manager the first n_computed tokens of the sequence are in the cache (`tokens`
  // holds at least that many ids: prompt then output). Newly completed full blocks are hashed
  // and registered for prefix caching.
  void commit(int64_t seq_id, std::span<const int32_t> tokens, int64_t n_computed);

  // Rolls the sequence back to its first n_tokens positions (rejected speculative tokens): the
  // blocks past blocks_for(n_tokens) are released (a keyed one keeps its key: its slots hold
  // exactly the tokens the key names) and the kept blocks from index n_tokens / block_size on,
  // whose slots will be rewritten, leave the hash chain; one of them that this sequence alone
  // holds also loses its registered key. n_tokens beyond the table's positions is refused, and so
  // is a rollback that would need blocks a windowed group has already given back.
  void truncate(int64_t seq_id, int64_t n_tokens);

  // Gives back block index b of every group (H2O-style eviction, kv/heavy_hitters.h): its entry
  // becomes kNoBlock and attention skips it. The sequence's blocks computed from then on depend
  // on what was evicted, so none of them is registered for prefix caching. b must be a held
  // block of the sequence and the manager must have no windowed group (else
  // llms::Error(kInvalidArgument)); that b is not written again is the caller's policy (it keeps
  // the recent window; allocate() refuses a write into a given-back block).
  void evict_block(int64_t seq_id, int64_t b);

  // New sequence `child` sharing all of `parent`'s blocks (ref counts + 1) and its hash chain.
  void fork(int64_t parent, int64_t child);

  // Drops the sequence's references; blocks reaching 0 go to the free list (cached ones stay
  // findable until evicted). Unknown ids are ignored.
  void free(int64_t seq_id);

  bool has_sequence(int64_t seq_id) const;
  // The interleaved tables of every group: entry b * n_groups() + g (kNoBlock where a windowed
  // group gave the block back).
  std::span<const BlockId> block_table(int64_t seq_id) const;
  // Blocks the sequence holds now (entries other than kNoBlock).
  int32_t n_blocks_held(int64_t seq_id) const;
  // Fraction of blocks referenced by some table (0..1), as vLLM's kv_cache_usage_perc.
  double usage() const;
  const KvCacheStats& stats() const;

  // Throws llms::Error(kInternal) naming the first broken invariant.
  void check_invariants() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace llms::kv
