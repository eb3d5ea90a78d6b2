// kv/block_pool: see block_pool.h. Misuse from the manager (taking from an empty list, releasing
// a free block) is a bug of ours and throws Error(kInternal) rather than corrupting the lists.
#include "block_pool.h"

#include <string>

#include "util/error.h"

namespace llms::kv {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw Error(Error::Kind::kInternal, "KV block pool: " + what);
}

std::string block_name(BlockId b) { return "block " + std::to_string(b); }

}  // namespace

BlockPool::BlockPool(int32_t n_blocks) : blocks_(static_cast<size_t>(n_blocks)) {
  registry_.reserve(static_cast<size_t>(n_blocks));
  for (BlockId b = 0; b < n_blocks; ++b) push_back(b);
}

void BlockPool::push_front(BlockId b) {
  Block& blk = blocks_[b];
  blk.prev = kNone;
  blk.next = head_;
  if (head_ != kNone) blocks_[head_].prev = b;
  head_ = b;
  if (tail_ == kNone) tail_ = b;
  blk.is_free = true;
  ++n_free_;
}

void BlockPool::push_back(BlockId b) {
  Block& blk = blocks_[b];
  blk.next = kNone;
  blk.prev = tail_;
  if (tail_ != kNone) blocks_[tail_].next = b;
  tail_ = b;
  if (head_ == kNone) head_ = b;
  blk.is_free = true;
  ++n_free_;
}

void BlockPool::unlink(BlockId b) {
  Block& blk = blocks_[b];
  if (blk.prev != kNone) {
    blocks_[blk.prev].next = blk.next;
  } else {
    head_ = blk.next;
  }
  if (blk.next != kNone) {
    blocks_[blk.next].prev = blk.prev;
  } else {
    tail_ = blk.prev;
  }
  blk.prev = blk.next = kNone;
  blk.is_free = false;
  --n_free_;
}

BlockId BlockPool::take_fresh(bool& evicted) {
  if (head_ == kNone) fail("take_fresh with no free block");
  const BlockId b = head_;
  unlink(b);
  evicted = blocks_[b].has_key;
  unregister(b);
  blocks_[b].ref = 1;
  return b;
}

void BlockPool::add_ref(BlockId b) {
  Block& blk = blocks_[b];
  if (blk.is_free) unlink(b);
  ++blk.ref;
}

void BlockPool::release(BlockId b) {
  Block& blk = blocks_[b];
  if (blk.ref <= 0 || blk.is_free) fail("release of unreferenced " + block_name(b));
  if (--blk.ref > 0) return;
  if (blk.has_key) {
    push_back(b);
  } else {
    push_front(b);
  }
}

std::optional<BlockId> BlockPool::find(const BlockHash& key) const {
  auto it = registry_.find(key);
  if (it == registry_.end()) return std::nullopt;
  return it->second;
}

bool BlockPool::register_key(BlockId b, const BlockHash& key) {
  Block& blk = blocks_[b];
  if (blk.has_key) return false;
  if (!registry_.emplace(key, b).second) return false;
  blk.has_key = true;
  blk.key = key;
  return true;
}

void BlockPool::unregister(BlockId b) {
  Block& blk = blocks_[b];
  if (!blk.has_key) return;
  registry_.erase(blk.key);
  blk.has_key = false;
  blk.key = BlockHash{};
}

void BlockPool::check_invariants(std::span<const int32_t> expected_refs) const {
  const int32_t n = n_blocks();
  if (static_cast<int32_t>(expected_refs.size()) != n) fail("reference census has the wrong size");

  // Walk the free list: links agree both ways, every member is marked free with ref 0, and the
  // walk ends within n steps (no cycle).
  int32_t n_walked = 0;
  BlockId prev = kNone;
  for (BlockId b = head_; b != kNone; b = blocks_[b].next) {
    if (b < 0 || b >= n) fail("free list links to " + block_name(b) + " outside the pool");
    if (++n_walked > n) fail("free list has a cycle");
    const Block& blk = blocks_[b];
    if (!blk.is_free) fail(block_name(b) + " is on the free list but not marked free");
    if (blk.prev != prev) fail(block_name(b) + " has a wrong back link in the free list");
    if (blk.ref != 0) fail(block_name(b) + " is free with ref count " + std::to_string(blk.ref));
    prev = b;
  }
  if (prev != tail_) fail("free list tail does not match its last block");
  if (n_walked != n_free_) {
    fail("free list holds " + std::to_string(n_walked) + " blocks but n_free is " +
         std::to_string(n_free_));
  }

  int32_t n_marked_free = 0;
  int32_t n_keyed = 0;
  for (BlockId b = 0; b < n; ++b) {
    const Block& blk = blocks_[b];
    if (blk.ref != expected_refs[b]) {
      fail(block_name(b) + " has ref count " + std::to_string(blk.ref) + " but " +
           std::to_string(expected_refs[b]) + " block tables hold it");
    }
    if (blk.is_free == (blk.ref > 0))
      fail(block_name(b) + " is not exactly one of free/referenced");
    if (blk.is_free) ++n_marked_free;
    if (blk.has_key) {
      ++n_keyed;
      auto it = registry_.find(blk.key);
      if (it == registry_.end() || it->second != b) {
        fail(block_name(b) + " carries a key the registry does not map to it");
      }
    }
  }
  if (n_marked_free != n_free_) fail("blocks marked free differ from the free list length");
  if (n_keyed != static_cast<int32_t>(registry_.size())) {
    fail("registry holds " + std::to_string(registry_.size()) + " keys but " +
         std::to_string(n_keyed) + " blocks carry one");
  }
  for (const auto& [key, b] : registry_) {
    if (b < 0 || b >= n) fail("registry maps a key to " + block_name(b) + " outside the pool");
    if (!blocks_[b].has_key || !(blocks_[b].key == key)) {
      fail("registry maps a key to " + block_name(b) + " which does not carry it");
    }
  }
}

}  // namespace llms::kv
