// tokenizer/flat_map: an open-addressing hash map from 64-bit keys to small values.
//
// Used on the hot paths of encoding (merge look-ups by token-id pair, code point -> token id,
// trie edges). Linear probing over a power-of-two table kept at most 3/4 full (small tables stay
// cache-resident: Qwen's 151k merges fit in 4 MiB); the key
// kEmptyKey (all ones) is reserved and never inserted (callers build keys from non-negative
// 32-bit ids or code points, which cannot produce it). No erase: tables are built once at load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace llms::tokenizer {

template <typename V>
class FlatMap {
 public:
  static constexpr uint64_t kEmptyKey = ~uint64_t{0};

  FlatMap() { rehash(16); }

  // Inserts or overwrites (so the last of duplicate keys wins).
  void insert_or_assign(uint64_t key, const V& value) {
    if ((size_ + 1) * 4 > slots_.size() * 3) rehash(slots_.size() * 2);
    size_t i = slot_of(key);
    while (slots_[i].key != kEmptyKey && slots_[i].key != key) i = (i + 1) & mask_;
    if (slots_[i].key == kEmptyKey) ++size_;
    slots_[i] = Slot{key, value};
  }

  const V* find(uint64_t key) const {
    size_t i = slot_of(key);
    while (true) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == kEmptyKey) return nullptr;
      i = (i + 1) & mask_;
    }
  }

  bool contains(uint64_t key) const { return find(key) != nullptr; }
  size_t size() const { return size_; }

  void reserve(size_t n) {
    size_t want = 16;
    while (want * 3 < n * 4) want *= 2;
    if (want > slots_.size()) rehash(want);
  }

  static uint64_t pair_key(uint32_t a, uint32_t b) { return (uint64_t{a} << 32) | b; }

 private:
  struct Slot {
    uint64_t key;
    V value;
  };

  size_t slot_of(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  }

  void rehash(size_t n_slots) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(n_slots, Slot{kEmptyKey, V{}});
    mask_ = n_slots - 1;
    shift_ = 64;
    for (size_t n = n_slots; n > 1; n >>= 1) --shift_;
    size_ = 0;
    for (const Slot& s : old) {
      if (s.key != kEmptyKey) insert_or_assign(s.key, s.value);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace llms::tokenizer
