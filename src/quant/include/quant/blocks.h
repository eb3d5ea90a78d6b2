// quant/blocks: the byte layouts of GGML's quantized blocks, as they sit in a GGUF file.
//
// These are file-format facts. Every struct is exactly the on-disk block: no padding, fields in
// file order, little-endian, half floats kept as raw uint16_t bits (see float_convert.h). The
// static_asserts pin each size to the type_size of gguf::ggml_type_info; a unit test checks
// the two tables agree at run time as well.
//
// Blocks inside a mapped file need not be aligned for these structs (the file decides the
// offset), so readers copy a block out with std::memcpy before touching its fields.
#pragma once

#include <cstdint>

namespace llms::quant {

inline constexpr int kQK = 32;          // elements per block of the "legacy" formats Q4_0..Q8_1
inline constexpr int kQK_K = 256;       // elements per super-block of the K-quants
inline constexpr int kKScaleSize = 12;  // bytes of 6-bit packed scales/mins in Q4_K and Q5_K

// Q4_0: x = d * (q - 8), q in [0, 15]. qs[j] holds element j (low nibble) and j + 16 (high).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};

// Q4_1: x = d * q + m, q in [0, 15]. Nibble order as Q4_0.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};

// Q5_0: x = d * (q - 16), q in [0, 31]. Low 4 bits as Q4_0; bit j of the little-endian 32-bit
// word qh is the fifth bit of element j. qh is bytes, not uint32_t, so the block stays 22 bytes.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};

// Q5_1: x = d * q + m, q in [0, 31]. Bits as Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};

// Q8_0: x = d * q, q in [-127, 127].
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};

// Q8_1: x = d * q; s caches d * sum(q) for dot products with Q4_1/Q5_1.
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK];
};

// Q2_K: 16 sub-blocks of 16. scales[j]: low nibble = scale, high nibble = min of sub-block j.
// x = d * scale * q - dmin * min, q in [0, 3]. Element e = 128*h + 32*s + l (h < 2, s < 4,
// l < 32) is bits [2s, 2s+1] of qs[32*h + l].
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};

// Q3_K: 16 sub-blocks of 16, x = d * (scale - 32) * (q - 4 * !hbit), low 2 bits of q laid out as
// Q2_K, hbit of element e = 32*i + l is bit i of hmask[l]. The 16 6-bit scales: low nibble of
// scales[j] (j < 8) or high nibble of scales[j - 8] (8 <= j < 16), plus the 2 high bits at
// bits [2*(j/4), 2*(j/4)+1] of scales[8 + j % 4].
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};

// Q4_K: 8 sub-blocks of 32, x = d * scale_j * q - dmin * min_j, q in [0, 15], scale/min 6-bit
// packed in `scales` (see k_scale_min in k_blocks.h). qs[32*c + l]: low nibble is element
// 64*c + l, high nibble is element 64*c + 32 + l.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qs[kQK_K / 2];
};

// Q5_K: as Q4_K with q in [0, 31]; the fifth bit of element 32*j + l is bit j of qh[l].
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};

// Q6_K: 16 sub-blocks of 16, x = d * scales[e / 16] * (q - 32), q in [0, 63]. For element
// e = 128*h + 64*k + l (l < 64): low 4 bits are nibble k of ql[64*h + l]; for e = 128*h + 32*s + l
// (l < 32): high 2 bits are bits [2s, 2s+1] of qh[32*h + l].
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};

// Q8_K: the activation format of K-quant dot products. d is a plain f32; bsums[j] is the sum of
// qs[16*j .. 16*j + 15].
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

}  // namespace llms::quant
