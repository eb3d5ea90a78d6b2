// kernels/matmul_kquant_avx2: AVX2 tiles for the K-quants Q4_K, Q5_K and Q6_K against Q8_K
// activations.
//
// A super-block (256 values) is walked in 8 groups of 32, unpacked to unsigned bytes (0..15,
// 0..31 or 0..63): vpmaddubsw gives int16 pair sums, vpmaddwd against the sub-block scales as
// int16 gives scaled int32 sums, accumulated exactly over the super-block. The min term
// (Q4_K/Q5_K: dmin * sum_j m_j * B_j) and Q6_K's -32 offset (32 * sum_k sc_k * B_k) come from
// the activation's bsums. Per (weight row, activation row) and super-block the integers are then
// scaled in f32, in the same order in every tile shape:
//   Q4_K/Q5_K: acc = acc + fma(d * da, sumi, -((dmin * da) * summ))
//   Q6_K:      acc = fma(d * da, sumi, acc)
//
// The GEMV (q45k_gemv_tile, q6k_gemv_tile) takes up to 4 weight rows per pass (2 are used: 4 were
// faster in cache but slower from memory on short rows, 1536 columns) and reduces their sums into
// the lanes of one xmm, so the f32 step runs once per pass. Short rows go one at a time in the
// row layout (kGemvRowByRowMaxCols); matrices repacked into row pairs
// (kernels/row_pairs.h) take the 2-row pass over one address-ordered stream instead. The GEMMs have
// their own tiles (q6k_gemm_tile, q45k_gemm_tile: 8 weight rows x 32 activation rows against
// interleaved ActQ8Kx8 groups, no horizontal sums), with the GEMV's integers and final f32
// operations, so a GEMM row equals the GEMV of that row bit for bit. Calls of 2-8 activation
// rows take neither: the GEMM would pad them to 8 rows, so small tiles (q45k_small_tile,
// q6k_small_tile) unpack each weight block once for up to 8 row-form activation rows, with the
// GEMV's results.
//
// A GEMM tile walks the super-blocks in its outer loop and its weight rows in the inner one: a
// super-block of 32 activation rows is 9 KiB, so the rows after the first find it in L1. One row
// per tile read every activation byte from L2 once per weight row, 256 bytes per 256
// multiply-adds, and that bound the tiles (Zen 3, one thread, in cache: Q4_K 1536 x 1536 at
// m = 512 135 -> 157 GFLOP/s with 8 rows, Q6_K 8960 x 1536 at m = 32 and 2 threads 240 -> 296;
// 16 rows gave no more; docs/PERF.md).
#include <algorithm>
#include <cstring>

#include "kquant_unpack_avx2.h"
#include "matmul_kernels.h"
#include "simd_avx2.h"

namespace llms::kernels::detail {
namespace {

using namespace avx2;

// ---- GEMV: R (<= 4; kGemvRows = 2) weight rows x 1 activation row ----
//
// Per super-block each row's exact int32 sums (8 lanes) are reduced into one xmm (reduce4)
// (lanes = rows), so the f32 step of Q45K / Q6K (the GEMMs' expressions, lane by lane) runs once
// for the R rows. Sub-block scales are picked from a register by vpshufb (kScalePick) rather
// than broadcast one by one. The activation loads are shared by the rows (from L1).

// The totals of 4 vectors of 8 int32 as one xmm (lane r = sum of s_r), by transposing with
// unpacks (one-uop shuffles) and adds: vphaddd is several shuffle-port uops on Zen 3, and the
// shuffle ports are the busiest in these loops.
inline __m128i reduce4(__m256i s0, __m256i s1, __m256i s2, __m256i s3) {
  const __m256i s01 =
      _mm256_add_epi32(_mm256_unpacklo_epi32(s0, s1), _mm256_unpackhi_epi32(s0, s1));
  const __m256i s23 =
      _mm256_add_epi32(_mm256_unpacklo_epi32(s2, s3), _mm256_unpackhi_epi32(s2, s3));
  const __m256i s =
      _mm256_add_epi32(_mm256_unpacklo_epi64(s01, s23), _mm256_unpackhi_epi64(s01, s23));
  return _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
}

// One Q4_K/Q5_K super-block of one row against activation a: the exact int32 sums of
// scale_j * q * y (8 lanes) and, in *mins, of min_j * (group sums of a) (4 lanes).
template <bool kFiveBit>
inline __m256i q45k_block(const uint8_t* block, const ActQ8K& a, __m128i group_sums,
                          __m128i* mins) {
  using F = Q45K<kFiveBit>;
  const ScaleMin sm = unpack_scale_min(block + 4);
  const __m256i scales = _mm256_broadcastsi128_si256(
      _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm.scale))));
  *mins = _mm_madd_epi16(
      _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm.min))), group_sums);
  const uint8_t* qs = block + F::kQsOffset;
  __m256i high = _mm256_setzero_si256();
  if constexpr (kFiveBit) high = loadu256(block + 16);
  __m256i sum = _mm256_setzero_si256();
  for (int j2 = 0; j2 < 4; ++j2) {
    __m256i lo, hi;
    F::group_pair(qs, high, j2, &lo, &hi);
    const __m256i p0 = _mm256_maddubs_epi16(lo, loadu256(a.qs + 64 * j2));
    const __m256i p1 = _mm256_maddubs_epi16(hi, loadu256(a.qs + 64 * j2 + 32));
    sum = _mm256_add_epi32(
        sum, _mm256_add_epi32(_mm256_madd_epi16(p0, pick(scales, kScalePick.control[2 * j2])),
                              _mm256_madd_epi16(p1, pick(scales, kScalePick.control[2 * j2 + 1]))));
  }
  return sum;
}

// d (lanes 0..3) and the f16 at offset 2 (lanes 4..7: Q4_K/Q5_K's dmin) of R rows' blocks.
template <int R>
inline __m256 load_d_pairs(const uint8_t* block, size_t stride) {
  int32_t v[4] = {0, 0, 0, 0};
  for (int r = 0; r < R; ++r) std::memcpy(&v[r], block + r * stride, 4);
  // f16 pairs (d_r, dmin_r) -> [d0 dmin0 d1 dmin1 | d2 dmin2 d3 dmin3] -> [d0..d3 | dmin0..dmin3]
  const __m256 pairs = _mm256_cvtph_ps(_mm_setr_epi32(v[0], v[1], v[2], v[3]));
  const __m128 lo = _mm256_castps256_ps128(pairs);
  const __m128 hi = _mm256_extractf128_ps(pairs, 1);
  return _mm256_set_m128(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)),
                         _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)));
}

// Block b of row r of a tile: in the row layout, or (kPairs) where kernels/row_pairs.h puts it,
// the super-blocks of each row pair alternating (a tile starts at a pair).
template <bool kPairs>
inline const uint8_t* row_block(const Tile& t, int r, int64_t b, size_t block_bytes) {
  if constexpr (kPairs) {
    return t.w + static_cast<size_t>(r & ~1) * t.w_stride +
           static_cast<size_t>(2 * b + (r & 1)) * block_bytes;
  }
  return t.w + static_cast<size_t>(r) * t.w_stride + static_cast<size_t>(b) * block_bytes;
}

// How far ahead (bytes, address order) the GEMV over a row pair prefetches its one stream: the
// pair's 2 super-blocks a step, 2 KiB ahead (2-4 KiB measured alike; none or the row layout's
// next-rows prefetch streamed slower from memory: docs/PERF.md).
constexpr size_t kPairPrefetchBytes = 2048;

// Prefetches what a tile of R rows reads after block0 (row 0's block of this step): the pair's
// stream kPairPrefetchBytes ahead, or the same blocks of the next R rows in the row layout.
template <int R, bool kPairs>
inline void prefetch_ahead(const Tile& t, const uint8_t* block0, size_t block_bytes) {
  if constexpr (kPairs) {
    prefetch(block0 + kPairPrefetchBytes, 2 * block_bytes);
  } else {
    for (int r = 0; r < R; ++r) prefetch(block0 + (r + R) * t.w_stride, block_bytes);
  }
}

// kPairs: the rows are a pair in the row-pair layout (R <= 2), read as one stream.
template <bool kFiveBit, int R, bool kPairs = false>
void q45k_gemv_tile(const Tile& t) {
  static_assert(!kPairs || R <= 2);
  using F = Q45K<kFiveBit>;
  const int64_t n_blocks = t.n_cols / quant::kQK_K;
  const auto* act = reinterpret_cast<const ActQ8K*>(t.a);
  const __m128 sign_bit = _mm_set1_ps(-0.0f);
  const size_t row_step = kPairs ? F::kBytes : t.w_stride;  // row r's block at block0 + r * step
  __m128 acc = _mm_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const ActQ8K& a = act[b];
    const uint8_t* block0 = row_block<kPairs>(t, 0, b, F::kBytes);
    const __m128i group_sums = act_group_sums(a);
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    __m128i m0 = _mm_setzero_si128(), m1 = m0, m2 = m0, m3 = m0;
    prefetch_ahead<R, kPairs>(t, block0, F::kBytes);
    s0 = q45k_block<kFiveBit>(block0, a, group_sums, &m0);
    if constexpr (R > 1) s1 = q45k_block<kFiveBit>(block0 + row_step, a, group_sums, &m1);
    if constexpr (R > 2) s2 = q45k_block<kFiveBit>(block0 + 2 * row_step, a, group_sums, &m2);
    if constexpr (R > 3) s3 = q45k_block<kFiveBit>(block0 + 3 * row_step, a, group_sums, &m3);
    const __m128i sumi = reduce4(s0, s1, s2, s3);
    const __m128i summ = _mm_hadd_epi32(_mm_hadd_epi32(m0, m1), _mm_hadd_epi32(m2, m3));
    const __m256 dd = load_d_pairs<R>(block0, row_step);
    const __m128 da = _mm_set1_ps(a.d);
    // Lane by lane Q45K's acc + fma(d * da, sumi, -((dmin * da) * summ)).
    const __m128 m = _mm_xor_ps(
        _mm_mul_ps(_mm_mul_ps(_mm256_extractf128_ps(dd, 1), da), _mm_cvtepi32_ps(summ)), sign_bit);
    acc = _mm_add_ps(
        acc, _mm_fmadd_ps(_mm_mul_ps(_mm256_castps256_ps128(dd), da), _mm_cvtepi32_ps(sumi), m));
  }
  alignas(16) float out[4];
  _mm_store_ps(out, acc);
  for (int r = 0; r < R; ++r) t.y[r] = out[r];
}

// The 128 values of half h (0, 1) of a Q6_K super-block as unsigned bytes (0..63), in 4 groups
// of 32: group s takes its low 4 bits from ql (low, then high nibbles of two 32-byte runs) and
// bits 4..5 from bits 2s..2s+1 of qh (16-bit shifts by at most 4 stay within each byte there).
inline void q6k_half(const uint8_t* ql, const uint8_t* qh, int h, __m256i (&q)[4]) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  const __m256i hbits = loadu256(qh + 32 * h);
  const __m256i raw0 = loadu256(ql + 64 * h);
  const __m256i raw1 = loadu256(ql + 64 * h + 32);
  q[0] = _mm256_or_si256(_mm256_and_si256(raw0, m4),
                         _mm256_and_si256(_mm256_slli_epi16(hbits, 4), m30));
  q[1] = _mm256_or_si256(_mm256_and_si256(raw1, m4),
                         _mm256_and_si256(_mm256_slli_epi16(hbits, 2), m30));
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw0, 4), m4),
                         _mm256_and_si256(hbits, m30));
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw1, 4), m4),
                         _mm256_and_si256(_mm256_srli_epi16(hbits, 2), m30));
}

// One Q6_K super-block of one row: the exact int32 sums of sc_k * (q - 32) * y (8 lanes).
inline __m256i q6k_block(const uint8_t* block, const ActQ8K& a) {
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  const uint8_t* sc = block + 192;
  // -32 * sum_k sc_k * bsums_k
  const __m256i offset = _mm256_madd_epi16(_mm256_cvtepi8_epi16(loadu128(sc)), loadu256(a.bsums));
  __m256i sum = _mm256_setzero_si256();
  for (int h = 0; h < 2; ++h) {
    const __m256i scales = _mm256_broadcastsi128_si256(
        _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc + 8 * h))));
    __m256i q[4];
    q6k_half(ql, qh, h, q);
    for (int s = 0; s < 4; ++s) {
      const __m256i p = _mm256_maddubs_epi16(q[s], loadu256(a.qs + 32 * (4 * h + s)));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p, pick(scales, kScalePick6.control[s])));
    }
  }
  return _mm256_sub_epi32(sum, _mm256_slli_epi32(offset, 5));
}

// kPairs: as q45k_gemv_tile's.
template <int R, bool kPairs = false>
void q6k_gemv_tile(const Tile& t) {
  static_assert(!kPairs || R <= 2);
  const int64_t n_blocks = t.n_cols / quant::kQK_K;
  const auto* act = reinterpret_cast<const ActQ8K*>(t.a);
  const size_t row_step = kPairs ? Q6K::kBytes : t.w_stride;
  __m128 acc = _mm_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const ActQ8K& a = act[b];
    const uint8_t* block0 = row_block<kPairs>(t, 0, b, Q6K::kBytes);
    prefetch_ahead<R, kPairs>(t, block0, Q6K::kBytes);
    const __m256i zero = _mm256_setzero_si256();
    const __m256i s0 = q6k_block(block0, a);
    const __m256i s1 = R > 1 ? q6k_block(block0 + row_step, a) : zero;
    const __m256i s2 = R > 2 ? q6k_block(block0 + 2 * row_step, a) : zero;
    const __m256i s3 = R > 3 ? q6k_block(block0 + 3 * row_step, a) : zero;
    const __m128i sumi = reduce4(s0, s1, s2, s3);
    int16_t dh[4] = {0, 0, 0, 0};
    for (int r = 0; r < R; ++r) std::memcpy(&dh[r], block0 + r * row_step + 208, 2);
    const __m128 d = _mm_cvtph_ps(_mm_setr_epi16(dh[0], dh[1], dh[2], dh[3], 0, 0, 0, 0));
    // Lane by lane Q6_K's fma(d * da, sumi, acc), q6k_gemm_tile's expression.
    acc = _mm_fmadd_ps(_mm_mul_ps(d, _mm_set1_ps(a.d)), _mm_cvtepi32_ps(sumi), acc);
  }
  alignas(16) float out[4];
  _mm_store_ps(out, acc);
  for (int r = 0; r < R; ++r) t.y[r] = out[r];
}

constexpr int kGemvRows = 2;

// ---- Small calls: R (1, or 2 for a row pair) weight rows x A (<= 8) activation rows ----
//
// The GEMV's work with each weight block unpacked once for the A activation rows (calls of a few
// rows, Kernel::small): per (weight row, super-block) the A rows' int32 sums are reduced
// into xmm quads (lanes = activation rows 4q..4q+3) and the f32 step runs lane by lane with the
// GEMV's expressions (d * da, (dmin * da) * summ, the fma, the add), so each result equals that
// activation row's GEMV bit for bit. Up to 8 rows take one pass: with tiles of 4 rows, calls of
// 5-8 took two and unpacked every weight block twice (a 5-token step cost as much as a 6-token
// one; docs/PERF.md, session 32).
constexpr int kSmallCols = 8;

// The xmm quads of activation rows a small tile of A rows carries.
template <int A>
constexpr int kQuads = (A + 3) / 4;

// The activation rows' blocks b of a small tile. dispatch_tile makes A = n_a; should a tile ever
// be wider, rows past n_a repeat row 0 (computed, never stored).
template <int A>
inline void small_act_blocks(const Tile& t, int64_t b, const ActQ8K* (&a)[A]) {
  for (int i = 0; i < A; ++i) {
    const int row = i < t.n_a ? i : 0;
    a[i] = reinterpret_cast<const ActQ8K*>(t.a + static_cast<size_t>(row) * t.a_stride) + b;
  }
}

// The scales of activation rows 4q..4q+3 (0 past A).
template <int A>
inline void small_act_scales(const ActQ8K* const (&a)[A], __m128 (&da)[kQuads<A>]) {
  for (int q = 0; q < kQuads<A>; ++q) {
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int i = 4 * q; i < std::min(A, 4 * q + 4); ++i) d[i - 4 * q] = a[i]->d;
    da[q] = _mm_loadu_ps(d);
  }
}

template <int R, int Q>
inline void store_small(const Tile& t, const __m128 (&acc)[R][Q]) {
  for (int r = 0; r < R; ++r) {
    for (int q = 0; q < Q; ++q) {
      alignas(16) float out[4];
      _mm_store_ps(out, acc[r][q]);
      for (int i = 4 * q; i < std::min(t.n_a, 4 * q + 4); ++i) {
        t.y[i * t.y_stride + r] = out[i - 4 * q];
      }
    }
  }
}

// q45k_block for A activation rows: the weight's groups unpacked once.
template <bool kFiveBit, int A>
inline void q45k_block_small(const uint8_t* block, const ActQ8K* const (&a)[A],
                             const __m128i (&group_sums)[A], __m256i (&sums)[4 * kQuads<A>],
                             __m128i (&mins)[4 * kQuads<A>]) {
  using F = Q45K<kFiveBit>;
  const ScaleMin sm = unpack_scale_min(block + 4);
  const __m256i scales = _mm256_broadcastsi128_si256(
      _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm.scale))));
  const __m128i min16 =
      _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm.min)));
  for (int i = 0; i < 4 * kQuads<A>; ++i) {
    sums[i] = _mm256_setzero_si256();
    mins[i] = i < A ? _mm_madd_epi16(min16, group_sums[i]) : _mm_setzero_si128();
  }
  const uint8_t* qs = block + F::kQsOffset;
  __m256i high = _mm256_setzero_si256();
  if constexpr (kFiveBit) high = loadu256(block + 16);
  for (int j2 = 0; j2 < 4; ++j2) {
    __m256i lo, hi;
    F::group_pair(qs, high, j2, &lo, &hi);
    const __m256i sc0 = pick(scales, kScalePick.control[2 * j2]);
    const __m256i sc1 = pick(scales, kScalePick.control[2 * j2 + 1]);
    for (int i = 0; i < A; ++i) {
      const __m256i p0 = _mm256_maddubs_epi16(lo, loadu256(a[i]->qs + 64 * j2));
      const __m256i p1 = _mm256_maddubs_epi16(hi, loadu256(a[i]->qs + 64 * j2 + 32));
      sums[i] = _mm256_add_epi32(
          sums[i], _mm256_add_epi32(_mm256_madd_epi16(p0, sc0), _mm256_madd_epi16(p1, sc1)));
    }
  }
}

template <bool kFiveBit, int R, int A, bool kPairs>
void q45k_small_tile(const Tile& t) {
  using F = Q45K<kFiveBit>;
  const int64_t n_blocks = t.n_cols / quant::kQK_K;
  constexpr int Q = kQuads<A>;
  const __m128 sign_bit = _mm_set1_ps(-0.0f);
  __m128 acc[R][Q];
  for (auto& row : acc) {
    for (auto& x : row) x = _mm_setzero_ps();
  }
  for (int64_t b = 0; b < n_blocks; ++b) {
    const ActQ8K* a[A];
    small_act_blocks<A>(t, b, a);
    __m128i group_sums[A];
    for (int i = 0; i < A; ++i) group_sums[i] = act_group_sums(*a[i]);
    __m128 da[Q];
    small_act_scales<A>(a, da);
    const uint8_t* block0 = row_block<kPairs>(t, 0, b, F::kBytes);
    prefetch_ahead<R, kPairs>(t, block0, F::kBytes);
    for (int r = 0; r < R; ++r) {
      const uint8_t* block = row_block<kPairs>(t, r, b, F::kBytes);
      __m256i s[4 * Q];
      __m128i m[4 * Q];
      q45k_block_small<kFiveBit, A>(block, a, group_sums, s, m);
      const __m128 d = _mm_set1_ps(load_f16(block));
      const __m128 dmin = _mm_set1_ps(load_f16(block + 2));
      for (int q = 0; q < Q; ++q) {
        const __m128i sumi = reduce4(s[4 * q], s[4 * q + 1], s[4 * q + 2], s[4 * q + 3]);
        const __m128i summ = _mm_hadd_epi32(_mm_hadd_epi32(m[4 * q], m[4 * q + 1]),
                                            _mm_hadd_epi32(m[4 * q + 2], m[4 * q + 3]));
        // Lane by lane the GEMV's acc + fma(d * da, sumi, -((dmin * da) * summ)).
        const __m128 mt =
            _mm_xor_ps(_mm_mul_ps(_mm_mul_ps(dmin, da[q]), _mm_cvtepi32_ps(summ)), sign_bit);
        acc[r][q] =
            _mm_add_ps(acc[r][q], _mm_fmadd_ps(_mm_mul_ps(d, da[q]), _mm_cvtepi32_ps(sumi), mt));
      }
    }
  }
  store_small<R, Q>(t, acc);
}

// q6k_block for A activation rows: the weight's values unpacked once.
template <int A>
inline void q6k_block_small(const uint8_t* block, const ActQ8K* const (&a)[A],
                            __m256i (&sums)[4 * kQuads<A>]) {
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  const uint8_t* sc = block + 192;
  const __m256i sc16 = _mm256_cvtepi8_epi16(loadu128(sc));
  for (int i = 0; i < 4 * kQuads<A>; ++i) sums[i] = _mm256_setzero_si256();
  for (int h = 0; h < 2; ++h) {
    const __m256i scales = _mm256_broadcastsi128_si256(
        _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc + 8 * h))));
    __m256i q[4];
    q6k_half(ql, qh, h, q);
    for (int g = 0; g < 4; ++g) {
      const __m256i scale = pick(scales, kScalePick6.control[g]);
      for (int i = 0; i < A; ++i) {
        const __m256i p = _mm256_maddubs_epi16(q[g], loadu256(a[i]->qs + 32 * (4 * h + g)));
        sums[i] = _mm256_add_epi32(sums[i], _mm256_madd_epi16(p, scale));
      }
    }
  }
  // -32 * sum_k sc_k * bsums_k, per activation row.
  for (int i = 0; i < A; ++i) {
    const __m256i offset = _mm256_madd_epi16(sc16, loadu256(a[i]->bsums));
    sums[i] = _mm256_sub_epi32(sums[i], _mm256_slli_epi32(offset, 5));
  }
}

template <int R, int A, bool kPairs>
void q6k_small_tile(const Tile& t) {
  const int64_t n_blocks = t.n_cols / quant::kQK_K;
  constexpr int Q = kQuads<A>;
  __m128 acc[R][Q];
  for (auto& row : acc) {
    for (auto& x : row) x = _mm_setzero_ps();
  }
  for (int64_t b = 0; b < n_blocks; ++b) {
    const ActQ8K* a[A];
    small_act_blocks<A>(t, b, a);
    __m128 da[Q];
    small_act_scales<A>(a, da);
    const uint8_t* block0 = row_block<kPairs>(t, 0, b, Q6K::kBytes);
    prefetch_ahead<R, kPairs>(t, block0, Q6K::kBytes);
    for (int r = 0; r < R; ++r) {
      const uint8_t* block = row_block<kPairs>(t, r, b, Q6K::kBytes);
      __m256i s[4 * Q];
      q6k_block_small<A>(block, a, s);
      const __m128 d = _mm_set1_ps(load_f16(block + 208));
      for (int q = 0; q < Q; ++q) {
        const __m128i sumi = reduce4(s[4 * q], s[4 * q + 1], s[4 * q + 2], s[4 * q + 3]);
        // Lane by lane the GEMV's fma(d * da, sumi, acc).
        acc[r][q] = _mm_fmadd_ps(_mm_mul_ps(d, da[q]), _mm_cvtepi32_ps(sumi), acc[r][q]);
      }
    }
  }
  store_small<R, Q>(t, acc);
}

// ---- Q6_K GEMM against interleaved activations (ActQ8Kx8) ----
//
// Tile: R weight rows x NG groups of 8 activation rows, the rows one after another within each
// super-block (see the top). Per super-block a weight row is unpacked once to 256 unsigned bytes
// (0..63) on the stack, with its 16 sub-block scales as broadcast int16 vectors. Per group of 8
// activation rows and sub-block k (16 values = 4-byte groups 4k..4k+3): one vpmaddubsw per 4-byte
// group multiplies the broadcast weight bytes with the same 4 positions of the 8 rows (lanes =
// rows); two such results are summed in int16 (2 * 2 * 63 * 128 < 2^15), then vpmaddwd by sc_k
// gives int32. The -32 offset is 32 * sum_k sc_k * bsums_k, 8 vpmaddwd on interleaved bsum pairs.
// The integer per (row, activation row, super-block) is the GEMV's exactly, and the f32 step is the
// same fma.
constexpr int kGemmRows = 8;  // weight rows per GEMM tile, Q6_K and Q4_K/Q5_K (see the top)
constexpr int kGemmGroups = 4;

template <int R, int NG, bool kPairs>
void q6k_gemm_tile(const Tile& t) {
  const int64_t n_blocks = t.n_cols / quant::kQK_K;
  const size_t group_stride = 8 * t.a_stride;
  alignas(32) float acc[R][NG][8] = {};
  alignas(32) uint8_t w[quant::kQK_K];
  alignas(32) int16_t sc[16][16];      // sc[k] = sub-block k's scale in all 16 lanes
  alignas(32) int16_t sc_pair[8][16];  // (sc[2p], sc[2p+1]) repeated
  for (int64_t b = 0; b < n_blocks; ++b) {
    const ActQ8Kx8* a[NG];
    for (int g = 0; g < NG; ++g) {
      a[g] = reinterpret_cast<const ActQ8Kx8*>(t.a + g * group_stride) + b;
    }
    // Rows one at a time (not unrolled), so only one row's isum/summ need registers; acc waits
    // in L1 between super-blocks.
#pragma GCC unroll 1
    for (int r = 0; r < R; ++r) {
      const uint8_t* block = row_block<kPairs>(t, r, b, Q6K::kBytes);
      Q6K::Prep prep;
      Q6K::prepare(block, &prep);
      unpack_super_block<Q6K>(prep, w);
      const auto* scales = reinterpret_cast<const int8_t*>(block + 192);
      for (int k = 0; k < 16; ++k) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(sc[k]), _mm256_set1_epi16(scales[k]));
      }
      for (int p = 0; p < 8; ++p) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(sc_pair[p]), q6k_scale_pair(scales, p));
      }
      const __m256 dw = _mm256_set1_ps(prep.d);
      __m256i isum[NG];
      for (int g = 0; g < NG; ++g) isum[g] = _mm256_setzero_si256();
      for (int k = 0; k < 16; ++k) {
        __m256i wb[4];
        for (int u = 0; u < 4; ++u) wb[u] = broadcast_u32(w + 16 * k + 4 * u);
        const __m256i scale = _mm256_load_si256(reinterpret_cast<const __m256i*>(sc[k]));
        for (int g = 0; g < NG; ++g) {
          const __m256i* ag = reinterpret_cast<const __m256i*>(a[g]->qs[4 * k]);
          const __m256i s0 =
              _mm256_add_epi16(_mm256_maddubs_epi16(wb[0], _mm256_load_si256(ag)),
                               _mm256_maddubs_epi16(wb[1], _mm256_load_si256(ag + 1)));
          const __m256i s1 =
              _mm256_add_epi16(_mm256_maddubs_epi16(wb[2], _mm256_load_si256(ag + 2)),
                               _mm256_maddubs_epi16(wb[3], _mm256_load_si256(ag + 3)));
          isum[g] = _mm256_add_epi32(isum[g], _mm256_add_epi32(_mm256_madd_epi16(s0, scale),
                                                               _mm256_madd_epi16(s1, scale)));
        }
      }
      for (int g = 0; g < NG; ++g) {
        __m256i offset = _mm256_setzero_si256();
        for (int p = 0; p < 8; ++p) {
          const __m256i bs = _mm256_load_si256(reinterpret_cast<const __m256i*>(a[g]->bsums[p]));
          offset = _mm256_add_epi32(
              offset, _mm256_madd_epi16(
                          bs, _mm256_load_si256(reinterpret_cast<const __m256i*>(sc_pair[p]))));
        }
        const __m256 da = _mm256_load_ps(a[g]->d);
        const __m256i sumi = _mm256_sub_epi32(isum[g], _mm256_slli_epi32(offset, 5));
        _mm256_store_ps(acc[r][g], _mm256_fmadd_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(sumi),
                                                   _mm256_load_ps(acc[r][g])));
      }
    }
  }
  for (int r = 0; r < R; ++r) store_row_groups(acc[r], t.n_a, t.y + r, t.y_stride);
}

template <bool kPairs = false>
void q6k_gemm(const Tile& t) {
  dispatch_tile<kGemmRows, kGemmGroups, 8>(t, [&t](auto r, auto g) {
    q6k_gemm_tile<decltype(r)::value, decltype(g)::value, kPairs>(t);
  });
}

// ---- Q4_K / Q5_K GEMM against interleaved activations (ActQ8Kx8) ----
//
// Tile: R weight rows x NG groups of 8 activation rows, walked as q6k_gemm_tile's. Per
// super-block a row is unpacked once to 256 unsigned bytes (0..15 / 0..31) on the stack. Per
// sub-block j (32 values = 4-byte groups 8j..8j+7) the 8 broadcast weight groups stay in registers
// for the NG activation groups; vpmaddubsw products are summed in int16 (Q4_K: all 8, 8 * 2 * 15 *
// 128 < 2^15; Q5_K: 4 at a time, 4 * 2 * 31 * 128 < 2^15), then vpmaddwd by scale_j gives int32.
// The min term is sum_j min_j * (bsums[2j] + bsums[2j+1]): one vpmaddwd per j on the interleaved
// bsum pair against (min_j, min_j). Integers and the f32 step are the GEMV's (q45k_gemv_tile).
template <bool kFiveBit, int R, int NG, bool kPairs>
void q45k_gemm_tile(const Tile& t) {
  using F = Q45K<kFiveBit>;
  constexpr int kSum16 = kFiveBit ? 4 : 8;
  const int64_t n_blocks = t.n_cols / quant::kQK_K;
  const size_t group_stride = 8 * t.a_stride;
  alignas(32) float acc[R][NG][8] = {};
  alignas(32) uint8_t w[quant::kQK_K];
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const ActQ8Kx8* a[NG];
    for (int g = 0; g < NG; ++g) {
      a[g] = reinterpret_cast<const ActQ8Kx8*>(t.a + g * group_stride) + b;
    }
    // Rows one at a time (not unrolled), so only one row's isum/summ need registers; acc waits
    // in L1 between super-blocks.
#pragma GCC unroll 1
    for (int r = 0; r < R; ++r) {
      const uint8_t* block = row_block<kPairs>(t, r, b, F::kBytes);
      typename F::Prep prep;
      F::prepare(block, &prep);
      unpack_super_block<F>(prep, w);
      __m256i isum[NG];
      __m256i summ[NG];
      for (int g = 0; g < NG; ++g) {
        isum[g] = _mm256_setzero_si256();
        summ[g] = _mm256_setzero_si256();
      }
      for (int j = 0; j < 8; ++j) {
        __m256i wb[8];
        for (int u = 0; u < 8; ++u) wb[u] = broadcast_u32(w + 32 * j + 4 * u);
        const __m256i scale = _mm256_set1_epi16(prep.sm.scale[j]);
        for (int g = 0; g < NG; ++g) {
          const auto* ag = reinterpret_cast<const __m256i*>(a[g]->qs[8 * j]);
          for (int u0 = 0; u0 < 8; u0 += kSum16) {
            __m256i s16 = _mm256_maddubs_epi16(wb[u0], _mm256_load_si256(ag + u0));
            for (int u = u0 + 1; u < u0 + kSum16; ++u) {
              s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(wb[u], _mm256_load_si256(ag + u)));
            }
            isum[g] = _mm256_add_epi32(isum[g], _mm256_madd_epi16(s16, scale));
          }
        }
      }
      // The min terms in a loop of their own: inside the one above they spilled its accumulators.
      for (int j = 0; j < 8; ++j) {
        const __m256i min = _mm256_set1_epi16(prep.sm.min[j]);
        for (int g = 0; g < NG; ++g) {
          const __m256i bs = _mm256_load_si256(reinterpret_cast<const __m256i*>(a[g]->bsums[j]));
          summ[g] = _mm256_add_epi32(summ[g], _mm256_madd_epi16(bs, min));
        }
      }
      const __m256 d = _mm256_set1_ps(prep.d);
      const __m256 dmin = _mm256_set1_ps(prep.dmin);
      for (int g = 0; g < NG; ++g) {
        const __m256 da = _mm256_load_ps(a[g]->d);
        // acc + fma(d * da, sumi, -((dmin * da) * summ)), as q45k_gemv_tile.
        const __m256 m = _mm256_xor_ps(
            _mm256_mul_ps(_mm256_mul_ps(dmin, da), _mm256_cvtepi32_ps(summ[g])), sign_bit);
        _mm256_store_ps(acc[r][g], _mm256_add_ps(_mm256_load_ps(acc[r][g]),
                                                 _mm256_fmadd_ps(_mm256_mul_ps(d, da),
                                                                 _mm256_cvtepi32_ps(isum[g]), m)));
      }
    }
  }
  for (int r = 0; r < R; ++r) store_row_groups(acc[r], t.n_a, t.y + r, t.y_stride);
}

template <bool kFiveBit, bool kPairs = false>
void q45k_gemm(const Tile& t) {
  dispatch_tile<kGemmRows, kGemmGroups, 8>(t, [&t](auto r, auto g) {
    q45k_gemm_tile<kFiveBit, decltype(r)::value, decltype(g)::value, kPairs>(t);
  });
}

// Short rows (Qwen2.5-1.5B's 1536-column projections) go row by row: see kGemvRowByRowMaxCols.
template <bool kFiveBit>
void q45k_gemv(const Tile& t) {
  if (t.n_cols <= kGemvRowByRowMaxCols) {
    return gemv_row_by_row(t, [](const Tile& row) { q45k_gemv_tile<kFiveBit, 1>(row); });
  }
  dispatch_tile<kGemvRows, 1>(
      t, [&t](auto r, auto) { q45k_gemv_tile<kFiveBit, decltype(r)::value>(t); });
}

// A tile of the row-pair layout is one pair (the GEMV's tile height is 2).
template <bool kFiveBit>
void q45k_pairs_gemv(const Tile& t) {
  dispatch_tile<2, 1>(
      t, [&t](auto r, auto) { q45k_gemv_tile<kFiveBit, decltype(r)::value, true>(t); });
}

void q6k_pairs_gemv(const Tile& t) {
  dispatch_tile<2, 1>(t, [&t](auto r, auto) { q6k_gemv_tile<decltype(r)::value, true>(t); });
}

// Small calls: one weight row (the row layout) or one pair (kPairs) x up to 8 activation rows.
template <bool kFiveBit, bool kPairs = false>
void q45k_small(const Tile& t) {
  dispatch_tile<kPairs ? 2 : 1, kSmallCols>(t, [&t](auto r, auto a) {
    q45k_small_tile<kFiveBit, decltype(r)::value, decltype(a)::value, kPairs>(t);
  });
}

template <bool kPairs = false>
void q6k_small(const Tile& t) {
  dispatch_tile<kPairs ? 2 : 1, kSmallCols>(t, [&t](auto r, auto a) {
    q6k_small_tile<decltype(r)::value, decltype(a)::value, kPairs>(t);
  });
}

void q6k_gemv(const Tile& t) {
  if (t.n_cols <= kGemvRowByRowMaxCols) {
    return gemv_row_by_row(t, [](const Tile& row) { q6k_gemv_tile<1>(row); });
  }
  dispatch_tile<kGemvRows, 1>(t, [&t](auto r, auto) { q6k_gemv_tile<decltype(r)::value>(t); });
}

// Calls of 2..kSmallMaxM activation rows take the small tiles (Kernel::small) instead of the
// GEMM, which pads them to a group of 8 and is compute-bound: on the 1.5B (AVX2 EPYC, 2 threads)
// a step of 2-8 tokens cost 140-146 ms against 34-36 ms for one; with the small tiles 2 / 3 / 4 /
// 6 / 8 tokens take 52-55 / 70-75 / 76-82 / 128-142 / 147-151 ms, and 8 decoding sequences ran
// at 48.7 tok/s against the GEMM's 35-41 (bench-engine; docs/PERF.md, session 24). With tiles
// of 8 rows instead of 4 (session 32, Zen 4 with LLMS_ISA=avx2), 5 / 6 / 8 tokens 96 / 100-104 /
// 122-124 -> 79 / 88-91 / 95-98 ms.
constexpr int kSmallMaxM = 8;

constexpr Kernel kQ4_K = with_small_calls(
    {ActKind::kQ8Kx8, kGemvRows, kGemmRows, 8 * kGemmGroups, &q45k_gemv<false>, &q45k_gemm<false>},
    kSmallMaxM, 1, kSmallCols, &q45k_small<false>);
constexpr Kernel kQ5_K = with_small_calls(
    {ActKind::kQ8Kx8, kGemvRows, kGemmRows, 8 * kGemmGroups, &q45k_gemv<true>, &q45k_gemm<true>},
    kSmallMaxM, 1, kSmallCols, &q45k_small<true>);
constexpr Kernel kQ6_K = with_small_calls(
    {ActKind::kQ8Kx8, kGemvRows, kGemmRows, 8 * kGemmGroups, &q6k_gemv, &q6k_gemm<>}, kSmallMaxM, 1,
    kSmallCols, &q6k_small<>);

constexpr Kernel kPairsQ4_K = with_small_calls({ActKind::kQ8Kx8, 2, kGemmRows, 8 * kGemmGroups,
                                                &q45k_pairs_gemv<false>, &q45k_gemm<false, true>},
                                               kSmallMaxM, 2, kSmallCols, &q45k_small<false, true>);
constexpr Kernel kPairsQ5_K = with_small_calls({ActKind::kQ8Kx8, 2, kGemmRows, 8 * kGemmGroups,
                                                &q45k_pairs_gemv<true>, &q45k_gemm<true, true>},
                                               kSmallMaxM, 2, kSmallCols, &q45k_small<true, true>);
constexpr Kernel kPairsQ6_K = with_small_calls(
    {ActKind::kQ8Kx8, 2, kGemmRows, 8 * kGemmGroups, &q6k_pairs_gemv, &q6k_gemm<true>}, kSmallMaxM,
    2, kSmallCols, &q6k_small<true>);

}  // namespace

const Kernel* find_pairs_avx2(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kQ4_K:
      return &kPairsQ4_K;
    case gguf::GgmlType::kQ5_K:
      return &kPairsQ5_K;
    case gguf::GgmlType::kQ6_K:
      return &kPairsQ6_K;
    default:
      return nullptr;
  }
}

const Kernel* find_kquant_avx2(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kQ4_K:
      return &kQ4_K;
    case gguf::GgmlType::kQ5_K:
      return &kQ5_K;
    case gguf::GgmlType::kQ6_K:
      return &kQ6_K;
    default:
      return nullptr;
  }
}

}  // namespace llms::kernels::detail
