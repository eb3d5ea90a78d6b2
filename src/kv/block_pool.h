// kv/block_pool (internal): ref counts, the free list and the registry of cached block keys.
//
// Every block is either referenced (ref count > 0) or on the free list, never both. The free
// list is intrusive and doubly linked, so a cached free block that a prefix hit revives leaves it
// in O(1). take_fresh() hands out the front. release() puts a block that holds no registered key
// at the front (it is worth nothing, reuse it first) and a cached one at the back, so cached
// blocks are evicted least recently freed first.
//
// A block carries a key iff the registry maps that key to it (one block per key, one key per
// block). A key stays registered while its block is free; it is dropped when the block is taken
// for new data (an eviction) or when its owner is about to overwrite it (unregister()).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "block_hash.h"
#include "kv/step_batch.h"

namespace llms::kv {

class BlockPool {
 public:
  explicit BlockPool(int32_t n_blocks);

  int32_t n_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t n_free() const { return n_free_; }
  int32_t ref_count(BlockId b) const { return blocks_[b].ref; }
  bool has_key(BlockId b) const { return blocks_[b].has_key; }
  // The block's registered key, or nullptr.
  const BlockHash* key_of(BlockId b) const {
    return blocks_[b].has_key ? &blocks_[b].key : nullptr;
  }

  // Takes the front of the free list (requires n_free() > 0) with ref count 1. If it still
  // carried a registered key, the key is dropped and `evicted` is set.
  BlockId take_fresh(bool& evicted);
  // Adds a reference; a free block (a cached one revived by a hit) leaves the free list.
  void add_ref(BlockId b);
  // Drops a reference; at 0 the block joins the free list (see the header comment for where).
  void release(BlockId b);

  std::optional<BlockId> find(const BlockHash& key) const;
  // Registers `key` for block b unless the key is already registered (to any block) or b already
  // carries a key; returns whether it registered.
  bool register_key(BlockId b, const BlockHash& key);
  // Forgets b's key if it has one (its contents are about to change).
  void unregister(BlockId b);

  // Throws Error(kInternal) on the first broken invariant; `expected_refs[b]` is the number of
  // block tables that hold b.
  void check_invariants(std::span<const int32_t> expected_refs) const;

 private:
  static constexpr int32_t kNone = -1;

  struct Block {
    int32_t ref = 0;
    int32_t prev = kNone;  // free-list links, meaningful while is_free
    int32_t next = kNone;
    bool is_free = false;
    bool has_key = false;
    BlockHash key;
  };

  void push_front(BlockId b);
  void push_back(BlockId b);
  void unlink(BlockId b);

  std::vector<Block> blocks_;
  int32_t head_ = kNone;
  int32_t tail_ = kNone;
  int32_t n_free_ = 0;
  std::unordered_map<BlockHash, BlockId, BlockHashHasher> registry_;
};

}  // namespace llms::kv
