// kernels/kquant_unpack_avx2 (private): the K-quant block decoders shared by the AVX2 tiles
// (matmul_kquant_avx2.cpp) and the VNNI GEMM (matmul_kquant_avx512.cpp): a Q4_K/Q5_K or Q6_K
// super-block unpacked 32 values at a time to unsigned bytes, with its scales. Include after
// simd_avx2.h (or simd_avx512.h) in a file compiled with AVX2 flags or more; the names sit in
// simd_avx2.h's per-flag namespace for the same reason as its helpers.
#pragma once

#include <cstring>

#include "quant/blocks.h"
#include "simd_avx2.h"

namespace llms::kernels::detail::avx2 {
inline namespace LLMS_SIMD_FLAGS_NS {

// The 8 6-bit scales and 8 6-bit mins of a Q4_K/Q5_K block as bytes (k_scale_min, 32 bits at
// a time): scales 0-3 and mins 0-3 are the low 6 bits of bytes 0-3 / 4-7; scales 4-7 take
// their low 4 bits from bytes 8-11 (low nibble) and their top 2 bits from bits 6-7 of bytes
// 0-3; mins 4-7 likewise from the high nibbles and bytes 4-7.
struct ScaleMin {
  uint8_t scale[8];
  uint8_t min[8];
};

// The same bytes as two uint64 (byte j = scale_j / min_j), for kernels that keep them in
// registers.
struct PackedScaleMin {
  uint64_t scale;
  uint64_t min;
};

inline PackedScaleMin packed_scale_min(const uint8_t* packed) {
  const uint32_t u0 = load_u32(packed);
  const uint32_t u1 = load_u32(packed + 4);
  const uint32_t u2 = load_u32(packed + 8);
  const uint64_t s_lo = u0 & 0x3f3f3f3fu;
  const uint64_t s_hi = (u2 & 0x0f0f0f0fu) | ((u0 >> 2) & 0x30303030u);
  const uint64_t m_lo = u1 & 0x3f3f3f3fu;
  const uint64_t m_hi = ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 2) & 0x30303030u);
  return {s_lo | (s_hi << 32), m_lo | (m_hi << 32)};
}

inline ScaleMin unpack_scale_min(const uint8_t* packed) {
  const PackedScaleMin p = packed_scale_min(packed);
  ScaleMin out;
  std::memcpy(out.scale, &p.scale, 8);
  std::memcpy(out.min, &p.min, 8);
  return out;
}

// Sums of a Q8_K activation block over each 32-group: bsums[2j] + bsums[2j+1], as 8 int16 (the
// GEMVs' min terms).
inline __m128i act_group_sums(const quant::BlockQ8_K& a) {
  return _mm_hadd_epi16(loadu128(a.bsums), loadu128(a.bsums + 8));
}

// Q4_K and Q5_K: value = d * scale_j * q - dmin * min_j.
template <bool kFiveBit>
struct Q45K {
  static constexpr size_t kBytes = kFiveBit ? sizeof(quant::BlockQ5_K) : sizeof(quant::BlockQ4_K);
  static constexpr size_t kQsOffset = kFiveBit ? 48 : 16;
  struct Prep {
    const uint8_t* qs;
    __m256i high;  // Q5_K's qh bytes (bit j of byte l: fifth bit of element 32j + l)
    ScaleMin sm;
    float d;
    float dmin;
  };
  static void prepare(const uint8_t* block, Prep* p) {
    p->d = load_f16(block);
    p->dmin = load_f16(block + 2);
    p->sm = unpack_scale_min(block + 4);
    p->qs = block + kQsOffset;
    if constexpr (kFiveBit) p->high = loadu256(block + 16);
  }
  // Groups 2 * j2 and 2 * j2 + 1 (elements 64 j2 .. 64 j2 + 63) from one load of qs: the low
  // and high nibbles, with Q5_K's fifth bits (bit g of each qh byte moved to bit 4; 16-bit
  // shifts by at most 4 keep bit 4 within its own byte). The GEMVs' unpack.
  static void group_pair(const uint8_t* qs, __m256i high, int j2, __m256i* lo, __m256i* hi) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i raw = loadu256(qs + 32 * j2);
    __m256i l = _mm256_and_si256(raw, m4);
    __m256i h = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
    if constexpr (kFiveBit) {
      const __m256i b16 = _mm256_set1_epi8(0x10);
      const int g = 2 * j2;
      const __m256i l_bit = g < 4 ? _mm256_slli_epi16(high, 4 - g) : _mm256_srli_epi16(high, g - 4);
      const __m256i h_bit =
          g + 1 < 4 ? _mm256_slli_epi16(high, 3 - g) : _mm256_srli_epi16(high, g - 3);
      l = _mm256_or_si256(l, _mm256_and_si256(l_bit, b16));
      h = _mm256_or_si256(h, _mm256_and_si256(h_bit, b16));
    }
    *lo = l;
    *hi = h;
  }
  // Group g (elements 32g .. 32g+31): unsigned values and the int16 scale vector.
  static void group(const Prep& p, int g, __m256i* q, __m256i* scale) {
    const __m256i raw = loadu256(p.qs + 32 * (g / 2));
    __m256i v = (g % 2 == 0) ? raw : _mm256_srli_epi16(raw, 4);
    v = _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
    if constexpr (kFiveBit) {
      const __m256i bit = _mm256_and_si256(_mm256_srli_epi16(p.high, g), _mm256_set1_epi8(1));
      v = _mm256_or_si256(v, _mm256_slli_epi16(bit, 4));
    }
    *q = v;
    *scale = _mm256_set1_epi16(p.sm.scale[g]);
  }
};

// Q6_K: value = d * sc_k * (q - 32), 16 sub-blocks of 16 with signed 8-bit scales.
struct Q6K {
  static constexpr size_t kBytes = sizeof(quant::BlockQ6_K);
  struct Prep {
    const uint8_t* ql;
    const uint8_t* qh;
    __m128i scales;  // 16 int8
    float d;
  };
  static void prepare(const uint8_t* block, Prep* p) {
    p->ql = block;
    p->qh = block + 128;
    p->scales = loadu128(block + 192);
    p->d = load_f16(block + 208);
  }
  static void group(const Prep& p, int g, __m256i* q, __m256i* scale) {
    const int h = g / 4;  // half of the super-block
    const int s = g % 4;  // 32-group within the half
    const __m256i raw = loadu256(p.ql + 64 * h + 32 * (s % 2));
    const __m256i low =
        _mm256_and_si256(s < 2 ? raw : _mm256_srli_epi16(raw, 4), _mm256_set1_epi8(0x0f));
    const __m256i high =
        _mm256_and_si256(_mm256_srli_epi16(loadu256(p.qh + 32 * h), 2 * s), _mm256_set1_epi8(3));
    *q = _mm256_or_si256(low, _mm256_slli_epi16(high, 4));
    // Sub-blocks 2g and 2g+1 cover the two 16-byte halves of the group.
    const __m128i pick = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m128i two =
        _mm_shuffle_epi8(p.scales, _mm_add_epi8(pick, _mm_set1_epi8(static_cast<char>(2 * g))));
    *scale = _mm256_cvtepi8_epi16(two);
  }
};

// The super-block of prep (Q45K<...> or Q6K) unpacked to 256 unsigned bytes at out (32-byte
// aligned), for the GEMM tiles that broadcast it 4 bytes at a time.
template <class F>
inline void unpack_super_block(const typename F::Prep& prep, uint8_t* out) {
  for (int g = 0; g < 8; ++g) {
    __m256i q;
    __m256i unused;
    F::group(prep, g, &q, &unused);
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + 32 * g), q);
  }
}

// Q6_K sub-block scales 2p and 2p + 1 as an int16 pair in every 32-bit lane: one vpmaddwd of
// an interleaved bsum pair (ActQ8Kx8::bsums[p]) against it gives sc_2p * B_2p + sc_2p+1 * B_2p+1.
inline __m256i q6k_scale_pair(const int8_t* scales, int p) {
  const auto lo = static_cast<uint16_t>(static_cast<int16_t>(scales[2 * p]));
  const auto hi = static_cast<uint16_t>(static_cast<int16_t>(scales[2 * p + 1]));
  return _mm256_set1_epi32(static_cast<int32_t>(lo | (uint32_t{hi} << 16)));
}

// The GEMVs' sub-block scale picks (vpshufb controls). Q4_K/Q5_K: kScalePick[k] puts int16 element
// k of each 128-bit lane in all 8 int16 lanes. Q6_K: group s (0..3) of a half covers sub-blocks 2s
// (low 128-bit lane) and 2s + 1 (high lane) of the half's 8 int16 scales, kScalePick6[s].
struct PickTable {
  alignas(32) uint8_t control[8][32];
};

constexpr PickTable make_pick(bool six) {
  PickTable t{};
  for (int k = 0; k < 8; ++k) {
    for (int i = 0; i < 32; ++i) {
      const int element = six ? 2 * k + i / 16 : k;  // Q6_K: only k < 4 is used
      t.control[k][i] = static_cast<uint8_t>((2 * element + i % 2) & 0x0f);
    }
  }
  return t;
}

constexpr PickTable kScalePick = make_pick(false);
constexpr PickTable kScalePick6 = make_pick(true);

inline __m256i pick(__m256i v, const uint8_t (&control)[32]) {
  return _mm256_shuffle_epi8(v, _mm256_load_si256(reinterpret_cast<const __m256i*>(control)));
}

}  // namespace LLMS_SIMD_FLAGS_NS
}  // namespace llms::kernels::detail::avx2
