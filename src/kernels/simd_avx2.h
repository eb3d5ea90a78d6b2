// kernels/simd_avx2 (private): small AVX2 helpers shared by the *_avx2.cpp files. Include only
// from files compiled with -mavx2 -mfma -mf16c.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

// The helpers are compiled into both the *_avx2.cpp and the *_avx512.cpp files, with different
// flags. An inline function not inlined somewhere is emitted in every file that uses it and the
// linker keeps one copy: without a per-flag namespace it could keep the EVEX-encoded copy for
// the AVX2 path, which then faults on a CPU without AVX-512. The inline namespace gives each
// flag set its own names.
#if defined(__AVX512F__)
#define LLMS_SIMD_FLAGS_NS flags_avx512
#else
#define LLMS_SIMD_FLAGS_NS flags_avx2
#endif

namespace llms::kernels::detail::avx2 {
inline namespace LLMS_SIMD_FLAGS_NS {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// Stores the NG accumulators of one weight row in the broadcast GEMM layout (lane i of acc[g]
// belongs to activation row 8g + i) into column 0 of y, keeping only the first n_a rows.
template <int NG>
inline void store_row_groups(const __m256 (&acc)[NG], int n_a, float* y, int64_t y_stride) {
  for (int g = 0; g < NG; ++g) {
    const int n = n_a - 8 * g < 8 ? n_a - 8 * g : 8;
    alignas(32) float out[8];
    _mm256_store_ps(out, acc[g]);
    for (int i = 0; i < n; ++i) y[(8 * g + i) * y_stride] = out[i];
  }
}

// The same for accumulators kept in memory (tiles whose rows do not all fit in registers).
template <int NG>
inline void store_row_groups(const float (&acc)[NG][8], int n_a, float* y, int64_t y_stride) {
  for (int g = 0; g < NG; ++g) {
    const int n = n_a - 8 * g < 8 ? n_a - 8 * g : 8;
    for (int i = 0; i < n; ++i) y[(8 * g + i) * y_stride] = acc[g][i];
  }
}

inline int hsum_i32(__m128i v) {
  v = _mm_add_epi32(v, _mm_unpackhi_epi64(v, v));
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(v);
}

inline int hsum_i32(__m256i v) {
  return hsum_i32(_mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}

inline __m256i loadu256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}
inline __m128i loadu128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

inline float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// The 4 bytes at p broadcast to all 8 lanes (a weight group of the broadcast GEMM tiles).
inline __m256i broadcast_u32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Software prefetch of [p, p + n) (a hint: never faults, so it may run past the matrix). The
// GEMV tiles prefetch the rows of the next tile while working on theirs: rows of a few
// hundred bytes are too short for the hardware stream prefetcher to ramp up on.
inline void prefetch(const uint8_t* p, size_t n) {
  for (size_t off = 0; off < n; off += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
  }
}

// 16 bytes of nibbles -> 32 bytes: the low nibbles, then the high nibbles (GGML's order).
inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i raw = loadu128(qs);
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

// Bit j of `bits` -> byte j: 0xFF where set, 0 elsewhere (the fifth bits of Q5_0/Q5_1).
inline __m256i bits_to_mask(uint32_t bits) {
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                           2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i mask = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, mask), mask);
}

inline __m256i bits_to_0x10(uint32_t bits) {
  return _mm256_and_si256(bits_to_mask(bits), _mm256_set1_epi8(0x10));
}

// Pairwise u8 x s8 products summed to 8 int32 lanes (no saturation for |u| * |s| * 2 < 2^15).
inline __m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

}  // namespace LLMS_SIMD_FLAGS_NS
}  // namespace llms::kernels::detail::avx2
