// quant/block_io (private): unaligned block access and UB-free float -> integer steps shared by
// the block codecs.
//
// Blocks may sit at any byte offset of a mapped file, so they are copied in and out with
// memcpy. Float -> int conversions clamp in the float domain first: converting NaN or an
// out-of-range float to an integer type is undefined behaviour in C++, and quantizers must
// survive any input.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace llms::quant::detail {

template <typename Block>
inline Block load_block(const void* base, int64_t index) {
  static_assert(std::is_trivially_copyable_v<Block>);
  Block block;
  std::memcpy(&block, static_cast<const unsigned char*>(base) + index * sizeof(Block),
              sizeof(Block));
  return block;
}

template <typename Block>
inline void store_block(void* base, int64_t index, const Block& block) {
  static_assert(std::is_trivially_copyable_v<Block>);
  std::memcpy(static_cast<unsigned char*>(base) + index * sizeof(Block), &block, sizeof(Block));
}

// Truncation toward zero clamped to [lo, hi]; NaN maps to lo. For v in range this is exactly
// the C cast GGML's reference quantizers use.
inline int trunc_clamped(float v, int lo, int hi) {
  if (!(v > static_cast<float>(lo))) return lo;
  if (!(v < static_cast<float>(hi))) return hi;
  return static_cast<int>(v);
}

// Round half away from zero (C roundf) clamped to [lo, hi]; NaN maps to 0 clamped.
inline int round_away_clamped(float v, int lo, int hi) {
  if (std::isnan(v)) return lo > 0 ? lo : (hi < 0 ? hi : 0);
  const float r = std::round(v);
  if (r <= static_cast<float>(lo)) return lo;
  if (r >= static_cast<float>(hi)) return hi;
  return static_cast<int>(r);
}

// Round half to even (GGML's nearest_int) clamped to [lo, hi]; NaN maps to 0 clamped.
inline int round_even_clamped(float v, int lo, int hi) {
  if (std::isnan(v)) return lo > 0 ? lo : (hi < 0 ? hi : 0);
  const float r = std::nearbyint(v);
  if (r <= static_cast<float>(lo)) return lo;
  if (r >= static_cast<float>(hi)) return hi;
  return static_cast<int>(r);
}

}  // namespace llms::quant::detail
