// structured/token_set: see token_set.h.
#include "token_set.h"

#include <bit>

namespace llms::structured {

namespace {

// std::popcount becomes a library call without -mpopcnt; this is branch-free and inlined.
inline uint32_t bit_count(uint32_t w) {
  w = w - ((w >> 1) & 0x55555555u);
  w = (w & 0x33333333u) + ((w >> 2) & 0x33333333u);
  return (((w + (w >> 4)) & 0x0F0F0F0Fu) * 0x01010101u) >> 24;
}

}  // namespace

TokenSet TokenSet::from_bits(std::span<const uint32_t> words) {
  size_t count = 0;
  for (uint32_t w : words) count += bit_count(w);
  TokenSet set;
  if (count == 0) return set;
  // An id costs one word, a bitset one word per 32 ids: keep whichever is smaller.
  if (count >= words.size()) {
    set.words_.assign(words.begin(), words.end());
    return set;
  }
  set.ids_.reserve(count);
  for (size_t i = 0; i < words.size(); ++i) {
    uint32_t w = words[i];
    while (w != 0) {
      const int bit = std::countr_zero(w);
      set.ids_.push_back(static_cast<int32_t>(i * 32 + static_cast<size_t>(bit)));
      w &= w - 1;
    }
  }
  return set;
}

void TokenSet::or_into(std::span<uint32_t> words) const {
  if (!words_.empty()) {
    for (size_t i = 0; i < words_.size() && i < words.size(); ++i) words[i] |= words_[i];
    return;
  }
  for (int32_t id : ids_) words[static_cast<size_t>(id) / 32] |= 1u << (id % 32);
}

}  // namespace llms::structured
