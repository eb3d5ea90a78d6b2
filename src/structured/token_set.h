// structured/token_set: an immutable set of token ids, stored as a bitset in the mask layout
// when dense and as a sorted id list when sparse (most grammar states allow few tokens, a few
// allow most of the vocabulary; a per-state cache of 19 KB bitsets would waste memory).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace llms::structured {

class TokenSet {
 public:
  TokenSet() = default;
  // From a bitset in mask layout (bit id % 32 of words[id / 32]).
  static TokenSet from_bits(std::span<const uint32_t> words);

  void or_into(std::span<uint32_t> words) const;
  bool empty() const { return words_.empty() && ids_.empty(); }

 private:
  std::vector<uint32_t> words_;  // dense form, or empty
  std::vector<int32_t> ids_;     // sparse form, or empty
};

}  // namespace llms::structured
