// kernels/row_groups_layout (private): the bytes of one block of a 16-row group
// (WeightLayout::kRowGroups16, kernels/row_groups.h), shared by the repacking, the scalar
// reference and the AVX-512 kernels.
//
// Block b of a group is 16 * sizeof(Block) bytes at group + b * 16 * sizeof(Block):
//   [0, 32)      the f16 scale d of row i at 2 * i;
//   Q5_0 only, [32, 96): the fifth bits, transposed to match the quant vectors: bit j of byte
//                4 * i + t is the fifth bit of row i's value 4 * j + t (so one shift or bit
//                test per vector j gives the fifth bits of all its bytes);
//   then the quants as 64-byte vectors, byte 4 * i + t of each from row i:
//     Q4_0, Q5_0: 4 vectors; vector p holds row i's qs[4 * p + t], so its low nibbles are
//                 values 4p..4p+3 and its high nibbles values 16+4p..16+4p+3;
//     Q8_0:       8 vectors; vector j holds row i's qs[4 * j + t] (values 4j..4j+3).
// Q4_K (super-blocks of 256, 16 * 144 bytes per group): [0, 32) the rows' f16 d, [32, 64) their
// f16 dmin, [64, 256) the 12 packed scale/min bytes, byte k of row i at 64 + 16 * k + i, then 32
// quant vectors, vector p holding row i's qs[4 * p + t]: for p = 8c + q its low nibbles are
// values 4q..4q+3 of sub-block 2c, its high nibbles the same of sub-block 2c + 1.
// Q6_K (super-blocks of 256, 16 * 210 bytes per group): [0, 32) the rows' f16 d, [32, 288) the
// 16 int8 sub-block scales, scale k of row i at 32 + 16 * k + i, then 32 vectors of the low
// nibbles, vector p holding row i's ql[4 * p + t], then 16 vectors of the high bits, vector r
// holding row i's qh[4 * r + t]. In GGUF's order, value 32 * c + 4 * q + t (c = 4 * h + s) has its
// low nibble in vector 8 * (2 * h + s % 2) + q (low nibbles for s < 2, high nibbles otherwise) and
// its two high bits at bits 2s, 2s + 1 of vector 8 * h + q.
// One 64-byte load (and a nibble split) thus gives 4 consecutive values of all 16 rows, as
// vpdpbusd takes them against 4 activation bytes broadcast to every lane.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gguf/ggml_type.h"
#include "kernels/row_groups.h"
#include "quant/blocks.h"
#include "quant/k_blocks.h"

namespace llms::kernels::detail {

inline constexpr int kGroupRows = kRowGroupRows;
inline constexpr size_t kGroupScaleBytes = 2 * kGroupRows;
inline constexpr size_t kGroupMaskBytes = 4 * kGroupRows;  // Q5_0's fifth bits: a byte per 4j+t

// sizeof the type's GGUF block (0 for a type without the grouped layout).
constexpr size_t grouped_type_block_bytes(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kQ4_0:
      return sizeof(quant::BlockQ4_0);
    case gguf::GgmlType::kQ5_0:
      return sizeof(quant::BlockQ5_0);
    case gguf::GgmlType::kQ8_0:
      return sizeof(quant::BlockQ8_0);
    case gguf::GgmlType::kQ4_K:
      return sizeof(quant::BlockQ4_K);
    case gguf::GgmlType::kQ6_K:
      return sizeof(quant::BlockQ6_K);
    default:
      return 0;
  }
}

// Values per block of a grouped type.
constexpr int64_t grouped_type_block_values(gguf::GgmlType type) {
  return type == gguf::GgmlType::kQ4_K || type == gguf::GgmlType::kQ6_K ? quant::kQK_K : quant::kQK;
}

// Q4_K's offsets within a grouped super-block.
inline constexpr size_t kGroupQ4kDmin = 2 * kGroupRows;
inline constexpr size_t kGroupQ4kScales = 4 * kGroupRows;
inline constexpr size_t kGroupQ4kQuants = kGroupQ4kScales + quant::kKScaleSize * kGroupRows;

// Q6_K's offsets within a grouped super-block (and within a GGUF block: ql, qh, scales, d).
inline constexpr size_t kGroupQ6kScales = kGroupScaleBytes;
inline constexpr size_t kGroupQ6kLow = kGroupQ6kScales + 16 * kGroupRows;
inline constexpr size_t kGroupQ6kHigh = kGroupQ6kLow + 128 * kGroupRows;
inline constexpr size_t kQ6kQh = 128, kQ6kScales = 192, kQ6kD = 208;
static_assert(offsetof(quant::BlockQ6_K, qh) == kQ6kQh &&
              offsetof(quant::BlockQ6_K, scales) == kQ6kScales &&
              offsetof(quant::BlockQ6_K, d) == kQ6kD);
static_assert(kGroupQ6kHigh + 64 * kGroupRows == kGroupRows * sizeof(quant::BlockQ6_K));

constexpr size_t grouped_quants_offset(gguf::GgmlType type) {
  return kGroupScaleBytes + (type == gguf::GgmlType::kQ5_0 ? kGroupMaskBytes : 0);
}

// Writes row i's GGUF block `block` into the grouped block gb (the other rows' bytes are kept).
inline void put_row_block(gguf::GgmlType type, const uint8_t* block, int i, uint8_t* gb) {
  if (type == gguf::GgmlType::kQ6_K) {
    std::memcpy(gb + 2 * i, block + kQ6kD, 2);
    for (int k = 0; k < 16; ++k) gb[kGroupQ6kScales + 16 * k + i] = block[kQ6kScales + k];
    for (int p = 0; p < 32; ++p) std::memcpy(gb + kGroupQ6kLow + 64 * p + 4 * i, block + 4 * p, 4);
    for (int r = 0; r < 16; ++r) {
      std::memcpy(gb + kGroupQ6kHigh + 64 * r + 4 * i, block + kQ6kQh + 4 * r, 4);
    }
    return;
  }
  std::memcpy(gb + 2 * i, block, 2);
  if (type == gguf::GgmlType::kQ4_K) {
    std::memcpy(gb + kGroupQ4kDmin + 2 * i, block + 2, 2);
    for (size_t k = 0; k < quant::kKScaleSize; ++k) gb[kGroupQ4kScales + 16 * k + i] = block[4 + k];
    for (int p = 0; p < 32; ++p) {
      std::memcpy(gb + kGroupQ4kQuants + 64 * p + 4 * i, block + 4 + quant::kKScaleSize + 4 * p, 4);
    }
    return;
  }
  uint8_t* quants = gb + grouped_quants_offset(type);
  if (type == gguf::GgmlType::kQ8_0) {
    for (int j = 0; j < 8; ++j) std::memcpy(quants + 64 * j + 4 * i, block + 2 + 4 * j, 4);
    return;
  }
  const size_t qs = type == gguf::GgmlType::kQ5_0 ? 6 : 2;
  for (int p = 0; p < 4; ++p) std::memcpy(quants + 64 * p + 4 * i, block + qs + 4 * p, 4);
  if (type == gguf::GgmlType::kQ5_0) {
    uint32_t qh;
    std::memcpy(&qh, block + 2, 4);
    for (int t = 0; t < 4; ++t) {
      uint8_t bits = 0;
      for (int j = 0; j < 8; ++j) bits |= static_cast<uint8_t>(((qh >> (4 * j + t)) & 1u) << j);
      gb[kGroupScaleBytes + 4 * i + t] = bits;
    }
  }
}

// Reads row i's GGUF block back out of the grouped block gb (the inverse of put_row_block).
inline void get_row_block(gguf::GgmlType type, const uint8_t* gb, int i, uint8_t* block) {
  if (type == gguf::GgmlType::kQ6_K) {
    std::memcpy(block + kQ6kD, gb + 2 * i, 2);
    for (int k = 0; k < 16; ++k) block[kQ6kScales + k] = gb[kGroupQ6kScales + 16 * k + i];
    for (int p = 0; p < 32; ++p) std::memcpy(block + 4 * p, gb + kGroupQ6kLow + 64 * p + 4 * i, 4);
    for (int r = 0; r < 16; ++r) {
      std::memcpy(block + kQ6kQh + 4 * r, gb + kGroupQ6kHigh + 64 * r + 4 * i, 4);
    }
    return;
  }
  std::memcpy(block, gb + 2 * i, 2);
  if (type == gguf::GgmlType::kQ4_K) {
    std::memcpy(block + 2, gb + kGroupQ4kDmin + 2 * i, 2);
    for (size_t k = 0; k < quant::kKScaleSize; ++k) block[4 + k] = gb[kGroupQ4kScales + 16 * k + i];
    for (int p = 0; p < 32; ++p) {
      std::memcpy(block + 4 + quant::kKScaleSize + 4 * p, gb + kGroupQ4kQuants + 64 * p + 4 * i, 4);
    }
    return;
  }
  const uint8_t* quants = gb + grouped_quants_offset(type);
  if (type == gguf::GgmlType::kQ8_0) {
    for (int j = 0; j < 8; ++j) std::memcpy(block + 2 + 4 * j, quants + 64 * j + 4 * i, 4);
    return;
  }
  const size_t qs = type == gguf::GgmlType::kQ5_0 ? 6 : 2;
  for (int p = 0; p < 4; ++p) std::memcpy(block + qs + 4 * p, quants + 64 * p + 4 * i, 4);
  if (type == gguf::GgmlType::kQ5_0) {
    uint32_t qh = 0;
    for (int t = 0; t < 4; ++t) {
      const uint8_t bits = gb[kGroupScaleBytes + 4 * i + t];
      for (int j = 0; j < 8; ++j) qh |= static_cast<uint32_t>((bits >> j) & 1u) << (4 * j + t);
    }
    std::memcpy(block + 2, &qh, 4);
  }
}

}  // namespace llms::kernels::detail
