// kv/block_hash (internal): the 128-bit key of a full KV block for prefix caching.
//
// key(block i) = XXH3-128(key(block i-1) as 16 bytes, the block's block_size token ids as
// int32, extra_key as 8 bytes); block 0 chains from the all-zero key. Because each key folds in
// its parent, equal keys mean equal whole prefixes, not just equal blocks.
//
// A hit is trusted without comparing tokens: with 128-bit keys the chance that any two of even
// 2^32 distinct prefixes collide is about 2^-65, far below the rate of undetected memory errors,
// so storing and comparing the token ids would cost memory for no real safety.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace llms::kv {

struct BlockHash {
  uint64_t lo = 0;
  uint64_t hi = 0;

  friend bool operator==(const BlockHash&, const BlockHash&) = default;
};

// For std::unordered_map: the low half of an XXH3 digest is already uniformly mixed.
struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const noexcept { return static_cast<size_t>(h.lo); }
};

// The key of a block holding `tokens` whose predecessor has key `parent` ({} for block 0).
BlockHash hash_block(const BlockHash& parent, std::span<const int32_t> tokens, uint64_t extra_key);

}  // namespace llms::kv
