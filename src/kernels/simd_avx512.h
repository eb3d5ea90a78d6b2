// kernels/simd_avx512 (private): small AVX-512 helpers shared by the *_avx512.cpp files.
// Include only from files compiled with the AVX-512 flags (F, BW, VL, DQ, VNNI). Only
// AVX-512F/BW/VL/VNNI instructions are used here and in those files, never BF16, so
// Isa::kAvx512 need not require it.
#pragma once

// GCC 12 reports -W(maybe-)uninitialized inside its own 256/512-bit insert/extract intrinsics
// (their _mm512_undefined_* operand, GCC bug 105593). The state that counts is the one at the
// header's lines, so it is silenced for <immintrin.h> only; this must be its first inclusion
// in the file (include this header before anything that pulls in <immintrin.h>).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include "simd_avx2.h"

namespace llms::kernels::detail::avx512 {

// [lo | hi] from two 256-bit halves.
inline __m512i join(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

inline __m512 join(__m256 lo, __m256 hi) {
  return _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}

inline __m256 high_half(__m512 v) {
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

inline float hsum(__m512 v) {
  return avx2::hsum(_mm256_add_ps(_mm512_castps512_ps256(v), high_half(v)));
}

inline int hsum_i32(__m512i v) {
  return avx2::hsum_i32(
      _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1)));
}

inline __m512i loadu512(const void* p) { return _mm512_loadu_si512(p); }

// acc + vpdpbusd(w, the 4 signed bytes at p in every 32-bit lane): unsigned w times the
// broadcast bytes, the broadcast taken by the instruction from memory (its m32bcst operand).
// GCC 12 does not fold _mm512_set1_epi32 of a load into that operand and emits one vpbroadcastd
// per product instead; in the grouped GEMM tiles, where every product has its own broadcast,
// that extra instruction cost ~6 % (docs/PERF.md, 2026-12-03). The bytes are read as a char
// array, which may alias anything.
inline __m512i dpbusd_bcast(__m512i acc, __m512i w, const void* p) {
  struct Bytes4 {
    char b[4];
  };
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*static_cast<const Bytes4*>(p)));
  return acc;
}

}  // namespace llms::kernels::detail::avx512
