// kernels/matmul_grouped_avx512: VNNI GEMV and GEMM tiles for Q4_0, Q5_0, Q8_0, Q4_K and Q6_K
// matrices in 16-row groups (WeightLayout::kRowGroups16; bytes in row_groups_layout.h).
//
// One zmm holds 4 consecutive weights of each of the group's 16 rows (unsigned: Q4_0/Q5_0 as
// stored, Q8_0 as w + 128), and vpdpbusd against 4 activation bytes broadcast from memory adds
// the 4 products into each row's int32 lane: 8 instructions per block of 32 columns give all 16
// rows' integer dots, with no shuffle to broadcast weights and no horizontal sum. The weights
// of a block are unpacked once per tile and used for every activation row of the tile.
//
// Each (row, block) dot is the same exact integer the row-layout kernels compute (minus offset
// * sum(q_a) for the unsigned weights: 8, 16, 128), and the f32 step is the same expression,
// acc = fma(float(idot), dw * da, acc), block after block: a grouped matrix gives bit for bit
// what the row layout gives on the AVX-512 table, GEMV and GEMM alike.
// clang-format off
#include "simd_avx512.h"  // first: see the note there on <immintrin.h>
// clang-format on

#include "matmul_kernels.h"
#include "row_groups_layout.h"

namespace llms::kernels::detail {
namespace {

using avx2::load_u32;
using avx512::dpbusd_bcast;
using avx512::loadu512;

// The 8 weight vectors of a grouped block: v[j] = values 4j..4j+3 of the 16 rows, unsigned.
template <gguf::GgmlType kType>
struct Grouped {
  static constexpr size_t kBlockBytes = kGroupRows * grouped_type_block_bytes(kType);
  static constexpr int kOffsetShift = kType == gguf::GgmlType::kQ4_0   ? 3
                                      : kType == gguf::GgmlType::kQ5_0 ? 4
                                                                       : 7;

  static void unpack(const uint8_t* gb, __m512i (&v)[8]) {
    const uint8_t* quants = gb + grouped_quants_offset(kType);
    if constexpr (kType == gguf::GgmlType::kQ8_0) {
      const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
      for (int j = 0; j < 8; ++j) v[j] = _mm512_xor_si512(loadu512(quants + 64 * j), bias);
    } else {
      const __m512i low = _mm512_set1_epi8(0x0f);
      for (int p = 0; p < 4; ++p) {
        const __m512i q = loadu512(quants + 64 * p);
        v[p] = _mm512_and_si512(q, low);
        v[p + 4] = _mm512_and_si512(_mm512_srli_epi16(q, 4), low);
      }
      if constexpr (kType == gguf::GgmlType::kQ5_0) {
        // Bit j of byte k of the fifth-bit vector belongs to byte k of v[j].
        const __m512i bits = loadu512(gb + kGroupScaleBytes);
        const __m512i fifth = _mm512_set1_epi8(0x10);
        for (int j = 0; j < 8; ++j) {
          const __mmask64 set =
              _mm512_test_epi8_mask(bits, _mm512_set1_epi8(static_cast<char>(1 << j)));
          v[j] = _mm512_mask_add_epi8(v[j], set, v[j], fifth);
        }
      }
    }
  }

  static __m512 scales(const uint8_t* gb) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gb)));
  }
};

// acc + the products of w with the 4 activation bytes at p in every lane: the broadcast folded
// into vpdpbusd (simd_avx512.h) in the GEMM tiles, a separate vpbroadcastd in the Q4_0 / Q5_0 /
// Q8_0 and Q6_K GEMVs (the folded form measured 4-12 % slower there, in cache, one thread: Q8_0
// 79-80 -> 75-77 GB/s, Q6_K 35 -> 31-32). The Q4_K tile, which its GEMV shares, folds it (its
// GEMV measured no slower: 41-45 -> 46 GB/s).
template <bool kFold>
inline __m512i dpbusd4(__m512i acc, __m512i w, const int8_t* p) {
  if constexpr (kFold) {
    return dpbusd_bcast(acc, w, p);
  } else {
    return _mm512_dpbusd_epi32(
        acc, w, _mm512_set1_epi32(static_cast<int>(load_u32(reinterpret_cast<const uint8_t*>(p)))));
  }
}

// acc += the f32 step of one activation block against the 16 rows' unpacked block v: the dot in
// two vpdpbusd chains (their latency is several cycles) with the offset correction, then the fma.
template <int kOffsetShift, bool kFold>
inline __m512 block_step(const __m512i (&v)[8], __m512 dw, const ActQ8& a, __m512 acc) {
  // The offset correction -sum(q_a) * offset starts the even chain (exact in int32).
  __m512i even = _mm512_set1_epi32(-(a.sum << kOffsetShift));
  __m512i odd = _mm512_setzero_si512();
  for (int j = 0; j < 8; j += 2) {
    even = dpbusd4<kFold>(even, v[j], a.qs + 4 * j);
    odd = dpbusd4<kFold>(odd, v[j + 1], a.qs + 4 * j + 4);
  }
  const __m512i dot = _mm512_add_epi32(even, odd);
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw, _mm512_set1_ps(a.d)), acc);
}

inline __mmask16 row_mask(int n_w) { return static_cast<__mmask16>((1u << n_w) - 1u); }

// Bytes ahead (address order) the GEMV prefetches: a group's blocks are one stream.
constexpr size_t kGemvPrefetchBytes = 4096;

// The K-quant GEMVs' prefetch goes to L2 (prefetcht1), not L1: a super-block's burst of 36 (Q4_K)
// or 53 (Q6_K) line requests into L1 held them back from memory (2 threads, weights cycled
// through >= 400 MiB: Q4_K 8960 x 1536 22.9 -> 32.6 GB/s, 1536 x 1536 19.2 -> 27.4, Q6_K
// 151,936 x 1,536 22.1 -> 34.7, level with its row layout's 35.2; Q6_K 1536 x 8960 unchanged).
// The 32-value blocks of Q4_0/Q5_0/Q8_0 (5-9 lines each) keep prefetcht0: there it measured no
// better, and the 0.5B's generation looked slower with it (docs/PERF.md).
inline void gemv_prefetch(const uint8_t* p, size_t n) {
  for (size_t off = 0; off < n; off += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T1);
  }
}

template <gguf::GgmlType kType>
void gemv(const Tile& t) {
  using F = Grouped<kType>;
  const int64_t n_blocks = t.n_cols / quant::kQK;
  const auto* act = reinterpret_cast<const ActQ8*>(t.a);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* gb = t.w + b * F::kBlockBytes;
    avx2::prefetch(gb + kGemvPrefetchBytes, F::kBlockBytes);
    __m512i v[8];
    F::unpack(gb, v);
    acc = block_step<F::kOffsetShift, false>(v, F::scales(gb), act[b], acc);
  }
  _mm512_mask_storeu_ps(t.y, row_mask(t.n_w), acc);
}

// Activation rows per GEMM tile: the 8 unpacked weight vectors, NA accumulators and the two
// dot chains of the row in flight fit in the 32 zmm registers up to NA = 16. Q5_0, whose
// unpacking (fifth bits by mask) is the dearest, shares it over 16 rows; Q4_0 and Q8_0 ran
// faster with 8 (one thread, in cache, m = 32: Q5_0 318 -> 329 GFLOP/s with 16, Q8_0 350 -> 341,
// Q4_0 355 -> 347; docs/PERF.md).
template <gguf::GgmlType kType>
constexpr int gemm_act_rows() {
  return kType == gguf::GgmlType::kQ5_0 ? 16 : 8;
}

// The GEMM streams each group once from memory (its later activation tiles find it in cache) at
// a few GB/s, too slowly and in too short a run for the hardware prefetcher alone.
constexpr size_t kGemmPrefetchBytes = 2048;

template <gguf::GgmlType kType, int NA>
void gemm_tile(const Tile& t) {
  using F = Grouped<kType>;
  const int64_t n_blocks = t.n_cols / quant::kQK;
  __m512 acc[NA];
  for (int n = 0; n < NA; ++n) acc[n] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* gb = t.w + b * F::kBlockBytes;
    avx2::prefetch(gb + kGemmPrefetchBytes, F::kBlockBytes);
    __m512i v[8];
    F::unpack(gb, v);
    const __m512 dw = F::scales(gb);
    for (int n = 0; n < NA; ++n) {
      const auto* a = reinterpret_cast<const ActQ8*>(t.a + n * t.a_stride) + b;
      acc[n] = block_step<F::kOffsetShift, true>(v, dw, *a, acc[n]);
    }
  }
  const __mmask16 mask = row_mask(t.n_w);
  for (int n = 0; n < NA && n < t.n_a; ++n)
    _mm512_mask_storeu_ps(t.y + n * t.y_stride, mask, acc[n]);
}

template <gguf::GgmlType kType>
void gemm(const Tile& t) {
  dispatch_tile<1, gemm_act_rows<kType>()>(
      t, [&t](auto, auto n) { gemm_tile<kType, decltype(n)::value>(t); });
}

template <gguf::GgmlType kType>
constexpr Kernel make() {
  return Kernel{ActKind::kQ8,           kGroupRows,   kGroupRows,
                gemm_act_rows<kType>(), &gemv<kType>, &gemm<kType>};
}

// Q4_K. Per super-block of a group: the 16 rows' 6-bit scales and mins are decoded once (16
// lanes at a time from the byte-per-row scale vectors) into a stack array, as int32 scales for
// vpmulld and as (min, min) int16 pairs for vpdpwssd against an activation row's pair of
// 16-value sums; then per sub-block 8 weight vectors (the low or high nibbles of 8 loads, each
// load made twice: 16 live vectors left too few registers for 8 activation rows) serve every
// activation row of the tile. Integers and the f32 step, acc + fma(d * da, sumi,
// -((dmin * da) * summ)), are the row kernels'.
struct Q4kScales {
  __m512i scale[8];     // sub-block j's scale, one int32 lane per row
  __m512i min_pair[8];  // sub-block j's min in both int16 halves of each row's lane
};

inline void decode_q4k_scales(const uint8_t* gb, Q4kScales* out) {
  const uint8_t* s = gb + kGroupQ4kScales;
  auto bytes = [s](int k) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16 * k)); };
  const __m128i low6 = _mm_set1_epi8(63);
  const __m128i low4 = _mm_set1_epi8(0x0f);
  const __m128i bits45 = _mm_set1_epi8(0x30);
  for (int j = 0; j < 8; ++j) {
    __m128i sc;
    __m128i mn;
    if (j < 4) {
      sc = _mm_and_si128(bytes(j), low6);
      mn = _mm_and_si128(bytes(j + 4), low6);
    } else {
      // The top two bits of bytes j - 4 (scales) and j (mins) become bits 4-5.
      const __m128i packed = bytes(j + 4);
      sc = _mm_or_si128(_mm_and_si128(packed, low4),
                        _mm_and_si128(_mm_srli_epi16(bytes(j - 4), 2), bits45));
      mn = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(packed, 4), low4),
                        _mm_and_si128(_mm_srli_epi16(bytes(j), 2), bits45));
    }
    out->scale[j] = _mm512_cvtepu8_epi32(sc);
    const __m512i m = _mm512_cvtepu8_epi32(mn);
    out->min_pair[j] = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
  }
}

// Activation rows per Q4_K tile: 8 weight vectors, NA sums and NA accumulators, two chains.
constexpr int kQ4kActRows = 8;

// The GEMV is the 1-row tile. Every tile prefetches its stream into L2 4 KiB ahead, as the GEMV
// does: a GEMM of a few rows (a verification step; the output matrix at 2-8 logits rows) is
// memory-bound as well, and with the other types' GEMM prefetch (L1, 2 KiB ahead) it waited on
// memory (docs/PERF.md, 2026-12-07).
template <int NA>
void q4k_tile(const Tile& t) {
  constexpr size_t kBlockBytes = kGroupRows * sizeof(quant::BlockQ4_K);
  const int64_t n_blocks = t.n_cols / quant::kQK_K;
  const __m512i low = _mm512_set1_epi8(0x0f);
  const __m512 sign_bit = _mm512_set1_ps(-0.0f);
  __m512 acc[NA];
  for (int n = 0; n < NA; ++n) acc[n] = _mm512_setzero_ps();
  Q4kScales sm;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* gb = t.w + b * kBlockBytes;
    gemv_prefetch(gb + kGemvPrefetchBytes, kBlockBytes);
    decode_q4k_scales(gb, &sm);
    // The asm barrier keeps the decoded scales in memory: the loops below read them as memory
    // operands (GCC would otherwise try to keep all 16 in registers next to the weights).
    asm volatile("" ::: "memory");
    const ActQ8K* a[NA];
    __m512i isum[NA];
    for (int n = 0; n < NA; ++n) {
      a[n] = reinterpret_cast<const ActQ8K*>(t.a + n * t.a_stride) + b;
      isum[n] = _mm512_setzero_si512();
    }
    const uint8_t* quants = gb + kGroupQ4kQuants;
    // Sub-block j = 2c + h: the low (h = 0) or high (h = 1) nibbles of vectors 8c..8c+7.
    for (int j = 0; j < 8; ++j) {
      const int c = j / 2;
      __m512i v[8];
      for (int q = 0; q < 8; ++q) {
        const __m512i x = loadu512(quants + 64 * (8 * c + q));
        v[q] = _mm512_and_si512(j % 2 == 0 ? x : _mm512_srli_epi16(x, 4), low);
      }
      for (int n = 0; n < NA; ++n) {
        const int8_t* qs = a[n]->qs + 32 * j;
        __m512i even = _mm512_setzero_si512();
        __m512i odd = _mm512_setzero_si512();
        for (int q = 0; q < 8; q += 2) {
          even = dpbusd_bcast(even, v[q], qs + 4 * q);
          odd = dpbusd_bcast(odd, v[q + 1], qs + 4 * q + 4);
        }
        isum[n] =
            _mm512_add_epi32(isum[n], _mm512_mullo_epi32(_mm512_add_epi32(even, odd), sm.scale[j]));
      }
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gb)));
    const __m512 dmin =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gb + kGroupQ4kDmin)));
    for (int n = 0; n < NA; ++n) {
      __m512i summ = _mm512_setzero_si512();
      for (int j = 0; j < 8; ++j) {
        uint32_t pair;
        std::memcpy(&pair, a[n]->bsums + 2 * j, 4);
        summ = _mm512_dpwssd_epi32(summ, sm.min_pair[j], _mm512_set1_epi32(static_cast<int>(pair)));
      }
      const __m512 da = _mm512_set1_ps(a[n]->d);
      const __m512 m =
          _mm512_xor_ps(_mm512_mul_ps(_mm512_mul_ps(dmin, da), _mm512_cvtepi32_ps(summ)), sign_bit);
      acc[n] = _mm512_add_ps(acc[n],
                             _mm512_fmadd_ps(_mm512_mul_ps(d, da), _mm512_cvtepi32_ps(isum[n]), m));
    }
  }
  const __mmask16 mask = row_mask(t.n_w);
  for (int n = 0; n < NA && n < t.n_a; ++n)
    _mm512_mask_storeu_ps(t.y + n * t.y_stride, mask, acc[n]);
}

void q4k_gemv(const Tile& t) { q4k_tile<1>(t); }

void q4k_gemm(const Tile& t) {
  dispatch_tile<1, kQ4kActRows>(t, [&t](auto, auto n) { q4k_tile<decltype(n)::value>(t); });
}

constexpr Kernel q4_k{ActKind::kQ8K, kGroupRows, kGroupRows, kQ4kActRows, &q4k_gemv, &q4k_gemm};

// Q6_K. Per super-block of a group: the 16 rows' int8 sub-block scales are widened once into a
// stack array, as int32 lanes for vpmulld and as (scale 2j, scale 2j + 1) int16 pairs for the
// -32 offset, which vpdpwssd takes against an activation row's pairs of 16-value sums; then per
// 32-value chunk 8 weight vectors of unsigned 6-bit values (the low nibble from a low-bit
// vector, bits 4-5 from a high-bit vector, joined by one vpternlogd) serve every activation row
// of the tile, in two vpdpbusd chains, one per 16-value sub-block. Integers and the f32 step,
// fma(d * da, sumi, acc), are the row kernels'.
struct Q6kScales {
  __m512i scale[16];  // sub-block k's scale, one int32 lane per row
  __m512i pair[8];    // sub-blocks 2j and 2j + 1's scales as the two int16 halves of each lane
};

inline void decode_q6k_scales(const uint8_t* gb, Q6kScales* out) {
  const uint8_t* s = gb + kGroupQ6kScales;
  for (int k = 0; k < 16; ++k) {
    out->scale[k] =
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16 * k)));
  }
  const __m512i low16 = _mm512_set1_epi32(0xffff);
  for (int j = 0; j < 8; ++j) {
    out->pair[j] = _mm512_or_si512(_mm512_and_si512(out->scale[2 * j], low16),
                                   _mm512_slli_epi32(out->scale[2 * j + 1], 16));
  }
}

// Chunk c (values 32c..32c+31) of the 16 rows, v[q] = values 32c + 4q..4q+3 (row_groups_layout.h).
inline void unpack_q6k_chunk(const uint8_t* gb, int c, __m512i (&v)[8]) {
  const int h = c / 4;
  const int s = c % 4;
  const uint8_t* low = gb + kGroupQ6kLow + 64 * 8 * (2 * h + s % 2);
  const uint8_t* high = gb + kGroupQ6kHigh + 64 * 8 * h;
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i m33 = _mm512_set1_epi8(0x33);
  for (int q = 0; q < 8; ++q) {
    __m512i x = loadu512(low + 64 * q);
    if (s >= 2) x = _mm512_srli_epi16(x, 4);
    const __m512i y = loadu512(high + 64 * q);
    // The high bits (bits 2s, 2s + 1 of each byte) moved to bits 4-5 with bits 6-7 clear: the
    // 0x33 mask keeps fields 0 and 2 (or, after a shift by 2, 1 and 3) at bits 0-1 and 4-5.
    const __m512i fields = _mm512_and_si512(s % 2 == 0 ? y : _mm512_srli_epi16(y, 2), m33);
    const __m512i hb = s < 2 ? _mm512_slli_epi16(fields, 4) : fields;
    // 0xe4: C ? A : B with C = 0x0f (bits 0-3 from x, bits 4-7 from hb).
    v[q] = _mm512_ternarylogic_epi32(x, hb, low4, 0xe4);
  }
}

// Activation rows per Q6_K tile: 8 weight vectors, NA sums and NA accumulators, two chains.
constexpr int kQ6kActRows = 8;

template <int NA>
void q6k_gemm_tile(const Tile& t) {
  constexpr size_t kBlockBytes = kGroupRows * sizeof(quant::BlockQ6_K);
  const int64_t n_blocks = t.n_cols / quant::kQK_K;
  __m512 acc[NA];
  for (int n = 0; n < NA; ++n) acc[n] = _mm512_setzero_ps();
  Q6kScales sc;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* gb = t.w + b * kBlockBytes;
    gemv_prefetch(gb + kGemvPrefetchBytes, kBlockBytes);  // as q4k_tile's
    decode_q6k_scales(gb, &sc);
    // As for Q4_K: the scales stay in memory, read as vpmulld / vpdpwssd memory operands.
    asm volatile("" ::: "memory");
    const ActQ8K* a[NA];
    __m512i isum[NA];
    for (int n = 0; n < NA; ++n) {
      a[n] = reinterpret_cast<const ActQ8K*>(t.a + n * t.a_stride) + b;
      isum[n] = _mm512_setzero_si512();
    }
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      __m512i v[8];
      unpack_q6k_chunk(gb, c, v);
      for (int n = 0; n < NA; ++n) {
        const int8_t* qs = a[n]->qs + 32 * c;
        __m512i first = _mm512_setzero_si512();   // sub-block 2c
        __m512i second = _mm512_setzero_si512();  // sub-block 2c + 1
        for (int q = 0; q < 4; ++q) {
          first = dpbusd_bcast(first, v[q], qs + 4 * q);
          second = dpbusd_bcast(second, v[q + 4], qs + 16 + 4 * q);
        }
        isum[n] = _mm512_add_epi32(
            isum[n], _mm512_add_epi32(_mm512_mullo_epi32(first, sc.scale[2 * c]),
                                      _mm512_mullo_epi32(second, sc.scale[2 * c + 1])));
      }
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gb)));
    for (int n = 0; n < NA; ++n) {
      // The -32 offset: 32 * sum_k scale_k * bsums_k.
      __m512i offset = _mm512_setzero_si512();
      for (int j = 0; j < 8; ++j) {
        uint32_t pair;
        std::memcpy(&pair, a[n]->bsums + 2 * j, 4);
        offset = _mm512_dpwssd_epi32(offset, sc.pair[j], _mm512_set1_epi32(static_cast<int>(pair)));
      }
      const __m512i sumi = _mm512_sub_epi32(isum[n], _mm512_slli_epi32(offset, 5));
      acc[n] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(a[n]->d)), _mm512_cvtepi32_ps(sumi),
                               acc[n]);
    }
  }
  const __mmask16 mask = row_mask(t.n_w);
  for (int n = 0; n < NA && n < t.n_a; ++n)
    _mm512_mask_storeu_ps(t.y + n * t.y_stride, mask, acc[n]);
}

// The GEMV (one activation row) has no other rows to share the unpacking with, so it is cut to
// the bone: per half of a super-block and position q, the two low-bit vectors and the high-bit
// vector are loaded once for the 4 chunks they hold, the 8 sub-blocks of the half are 8 vpdpbusd
// chains started at -32 * their activation sum (the offset, exact in int32), and each chain is
// scaled by one vpmulld against its scales widened straight from the block.
void q6k_gemv(const Tile& t) {
  constexpr size_t kBlockBytes = kGroupRows * sizeof(quant::BlockQ6_K);
  const int64_t n_blocks = t.n_cols / quant::kQK_K;
  const auto* act = reinterpret_cast<const ActQ8K*>(t.a);
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i m33 = _mm512_set1_epi8(0x33);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* gb = t.w + b * kBlockBytes;
    gemv_prefetch(gb + kGemvPrefetchBytes, kBlockBytes);
    const ActQ8K& a = act[b];
    __m512i sum = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      const uint8_t* low0 = gb + kGroupQ6kLow + 64 * 8 * (2 * h);
      const uint8_t* low1 = low0 + 64 * 8;
      const uint8_t* high = gb + kGroupQ6kHigh + 64 * 8 * h;
      // dot[2s + u]: sub-block 8h + 2s + u (chunk 4h + s, its 16-value half u).
      __m512i dot[8];
      for (int k = 0; k < 8; ++k) dot[k] = _mm512_set1_epi32(-32 * int{a.bsums[8 * h + k]});
      for (int q = 0; q < 8; ++q) {
        const __m512i x0 = loadu512(low0 + 64 * q);
        const __m512i x1 = loadu512(low1 + 64 * q);
        const __m512i y = loadu512(high + 64 * q);
        const __m512i f02 = _mm512_and_si512(y, m33);
        const __m512i f13 = _mm512_and_si512(_mm512_srli_epi16(y, 2), m33);
        const __m512i v[4] = {_mm512_ternarylogic_epi32(x0, _mm512_slli_epi16(f02, 4), low4, 0xe4),
                              _mm512_ternarylogic_epi32(x1, _mm512_slli_epi16(f13, 4), low4, 0xe4),
                              _mm512_ternarylogic_epi32(_mm512_srli_epi16(x0, 4), f02, low4, 0xe4),
                              _mm512_ternarylogic_epi32(_mm512_srli_epi16(x1, 4), f13, low4, 0xe4)};
        for (int s = 0; s < 4; ++s) {
          const int k = 2 * s + q / 4;
          dot[k] = dpbusd4<false>(dot[k], v[s], a.qs + 32 * (4 * h + s) + 4 * q);
        }
      }
      const uint8_t* scales = gb + kGroupQ6kScales + 16 * 8 * h;
      for (int k = 0; k < 8; ++k) {
        const __m512i scale = _mm512_cvtepi8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 16 * k)));
        sum = _mm512_add_epi32(sum, _mm512_mullo_epi32(dot[k], scale));
      }
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gb)));
    acc = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(a.d)), _mm512_cvtepi32_ps(sum), acc);
  }
  _mm512_mask_storeu_ps(t.y, row_mask(t.n_w), acc);
}

void q6k_gemm(const Tile& t) {
  dispatch_tile<1, kQ6kActRows>(t, [&t](auto, auto n) { q6k_gemm_tile<decltype(n)::value>(t); });
}

constexpr Kernel q6_k{ActKind::kQ8K, kGroupRows, kGroupRows, kQ6kActRows, &q6k_gemv, &q6k_gemm};

constexpr Kernel q4_0 = make<gguf::GgmlType::kQ4_0>();
constexpr Kernel q5_0 = make<gguf::GgmlType::kQ5_0>();
constexpr Kernel q8_0 = make<gguf::GgmlType::kQ8_0>();

}  // namespace

const Kernel* find_grouped_avx512(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kQ4_0:
      return &q4_0;
    case gguf::GgmlType::kQ5_0:
      return &q5_0;
    case gguf::GgmlType::kQ8_0:
      return &q8_0;
    case gguf::GgmlType::kQ4_K:
      return &q4_k;
    case gguf::GgmlType::kQ6_K:
      return &q6_k;
    default:
      return nullptr;
  }
}

}  // namespace llms::kernels::detail
