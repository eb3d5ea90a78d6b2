// util/checked_math: overflow-safe 64-bit arithmetic for sizes and offsets read from files.
//
// Every count, length, dimension and offset that comes from outside goes through these before it
// is used to index memory or size an allocation. They return std::nullopt on overflow so the
// caller can name the field that overflowed in its error message.
#pragma once

#include <cstdint>
#include <optional>

namespace llms {

inline std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// Rounds `value` up to a multiple of `alignment` (which must be a power of two, non-zero).
inline std::optional<uint64_t> checked_align_up(uint64_t value, uint64_t alignment) {
  auto bumped = checked_add(value, alignment - 1);
  if (!bumped) return std::nullopt;
  return *bumped & ~(alignment - 1);
}

inline bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

}  // namespace llms
