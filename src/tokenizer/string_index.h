// tokenizer/string_index: token text -> id, as a flat open-addressing table of (hash, id).
//
// Building merges for a 262k-token SentencePiece vocabulary looks up millions of substrings;
// a node-based std::unordered_map spends most of that time chasing pointers. Here a probe reads
// one 16-byte slot and compares the full string only when the 64-bit hash matches. The strings
// themselves live in the caller's table (`text_of(id)`), which must outlive the index.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace llms::tokenizer {

inline uint64_t hash_bytes(std::string_view s) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t h = 0x243F6A8885A308D3ull ^ (s.size() * kMul);
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  for (size_t k = 0; i + k < s.size(); ++k) {
    tail |= static_cast<uint64_t>(static_cast<uint8_t>(s[i + k])) << (8 * k);
  }
  h = (h ^ tail) * kMul;
  h ^= h >> 32;
  return h * kMul;
}

template <typename TextOf>
class StringIndex {
 public:
  explicit StringIndex(TextOf text_of) : text_of_(std::move(text_of)) {}

  void reserve(size_t n) {
    size_t want = 16;
    while (want * 3 < n * 4) want *= 2;
    if (want > slots_.size()) rehash(want);
  }

  // Maps `text_of(id)` to id; a later id with the same text replaces the earlier one.
  void insert_or_assign(int32_t id) {
    if ((size_ + 1) * 4 > slots_.size() * 3) rehash(slots_.empty() ? 16 : slots_.size() * 2);
    const std::string_view text = text_of_(id);
    const uint64_t h = hash_bytes(text);
    for (size_t i = slot_of(h);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.id < 0) {
        s = Slot{h, id};
        ++size_;
        return;
      }
      if (s.hash == h && text_of_(s.id) == text) {
        s.id = id;
        return;
      }
    }
  }

  // The id of `text`, or -1.
  int32_t find(std::string_view text) const {
    if (slots_.empty()) return -1;
    const uint64_t h = hash_bytes(text);
    for (size_t i = slot_of(h);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.hash == h && text_of_(s.id) == text) return s.id;
    }
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    int32_t id = -1;
  };

  size_t slot_of(uint64_t h) const { return static_cast<size_t>(h >> shift_); }

  void rehash(size_t n_slots) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(n_slots, Slot{});
    mask_ = n_slots - 1;
    shift_ = 64;
    for (size_t n = n_slots; n > 1; n >>= 1) --shift_;
    for (const Slot& s : old) {
      if (s.id < 0) continue;
      size_t i = slot_of(s.hash);
      while (slots_[i].id >= 0) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  TextOf text_of_;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace llms::tokenizer
