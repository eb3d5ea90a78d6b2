// kernels/matmul_kquant_avx512: the VNNI GEMM tiles for Q4_K, Q5_K and Q6_K over the same
// ActQ8Kx8 groups as the AVX2 GEMMs (matmul_kquant_avx2.cpp), and 1-row VNNI GEMVs (below the
// GEMMs) over the same ActQ8K rows as the AVX2 GEMVs.
//
// GEMM: per super-block each weight row is unpacked once to 256 unsigned bytes
// (kquant_unpack_avx2.h). Per sub-block (32 values for Q4_K/Q5_K, 16 for Q6_K) and group of 8
// activation rows, vpdpbusd sums the products of 4 broadcast weight bytes with the same 4 positions
// of the 8 rows into the rows' int32 lanes (two chains, then added), and one vpmulld applies the
// sub-block scale: where AVX2 needs a vpmaddubsw per 4-byte group, int16 adds and a vpmaddwd by the
// scale. The min term (Q4_K/Q5_K) and the -32 offset (Q6_K) come from the interleaved bsums exactly
// as in the AVX2 tiles. Each integer is the AVX2 tiles' and the GEMV's exactly and the f32 step is
// the same expression, so a GEMM row equals its GEMV bit for bit.
//
// GEMM tile: R weight rows x NG groups of 8 activation rows, per sub-block row after row (a
// row's broadcast weight groups stay in registers across the NG groups; AVX-512VL's 32 ymm
// registers hold the R * NG accumulators).
// clang-format off
#include "simd_avx512.h"  // first: see the note there on <immintrin.h>
// clang-format on

#include <algorithm>

#include "kquant_unpack_avx2.h"
#include "matmul_kernels.h"

namespace llms::kernels::detail {
namespace {

using namespace avx2;

constexpr int kGemmRows = 2;
constexpr int kGemmGroups = 4;

// The exact int32 dots of n_u 4-byte weight groups at w (broadcast) with the activation
// registers ag[0..n_u) of one group of 8 rows, in two chains.
template <int kU>
inline __m256i dot_groups(const uint8_t* w, const __m256i* ag) {
  __m256i even = _mm256_setzero_si256();
  __m256i odd = _mm256_setzero_si256();
  for (int u = 0; u < kU; u += 2) {
    even = _mm256_dpbusd_epi32(even, broadcast_u32(w + 4 * u), _mm256_load_si256(ag + u));
    odd = _mm256_dpbusd_epi32(odd, broadcast_u32(w + 4 * u + 4), _mm256_load_si256(ag + u + 1));
  }
  return _mm256_add_epi32(even, odd);
}

// isum[r][g] += scale_of(r, k) * (exact dots of sub-block k of unpacked row w[r] with the 8 rows
// of activation group a[g]) for every sub-block k of kSize values (Q4_K/Q5_K 32, Q6_K 16).
template <int kSize, int R, int NG, class ScaleOf>
inline void add_scaled_sub_blocks(const uint8_t (&w)[R][quant::kQK_K],
                                  const ActQ8Kx8* const (&a)[NG], ScaleOf&& scale_of,
                                  __m256i (&isum)[R][NG]) {
  constexpr int kGroups = kSize / 4;  // 4-byte weight groups per sub-block
  for (int k = 0; k < quant::kQK_K / kSize; ++k) {
    __m256i scale[R];
    for (int r = 0; r < R; ++r) scale[r] = _mm256_set1_epi32(scale_of(r, k));
    // Row-major: one row's broadcast weight groups stay live across the NG groups (with the
    // rows inner, GCC hoisted all R rows' broadcasts and spilled them).
    for (int r = 0; r < R; ++r) {
      for (int g = 0; g < NG; ++g) {
        const auto* ag = reinterpret_cast<const __m256i*>(a[g]->qs[kGroups * k]);
        const __m256i dot = dot_groups<kGroups>(w[r] + kSize * k, ag);
        isum[r][g] = _mm256_add_epi32(isum[r][g], _mm256_mullo_epi32(dot, scale[r]));
      }
    }
  }
}

template <bool kFiveBit, int R, int NG>
void q45k_gemm_tile(const Tile& t) {
  using F = Q45K<kFiveBit>;
  const int64_t n_blocks = t.n_cols / quant::kQK_K;
  const size_t group_stride = 8 * t.a_stride;
  __m256 acc[R][NG];
  for (int r = 0; r < R; ++r) {
    for (int g = 0; g < NG; ++g) acc[r][g] = _mm256_setzero_ps();
  }
  alignas(32) uint8_t w[R][quant::kQK_K];
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n_blocks; ++b) {
    typename F::Prep prep[R];
    for (int r = 0; r < R; ++r) {
      F::prepare(t.w + r * t.w_stride + b * F::kBytes, &prep[r]);
      unpack_super_block<F>(prep[r], w[r]);
    }
    const ActQ8Kx8* a[NG];
    __m256i isum[R][NG];
    for (int g = 0; g < NG; ++g) {
      a[g] = reinterpret_cast<const ActQ8Kx8*>(t.a + g * group_stride) + b;
      for (int r = 0; r < R; ++r) isum[r][g] = _mm256_setzero_si256();
    }
    add_scaled_sub_blocks<32>(
        w, a, [&](int r, int j) { return int{prep[r].sm.scale[j]}; }, isum);
    for (int r = 0; r < R; ++r) {
      const __m256 d = _mm256_set1_ps(prep[r].d);
      const __m256 dmin = _mm256_set1_ps(prep[r].dmin);
      __m256i mins[8];
      for (int j = 0; j < 8; ++j) mins[j] = _mm256_set1_epi16(prep[r].sm.min[j]);
      for (int g = 0; g < NG; ++g) {
        __m256i summ = _mm256_setzero_si256();
        for (int j = 0; j < 8; ++j) {
          const __m256i bs = _mm256_load_si256(reinterpret_cast<const __m256i*>(a[g]->bsums[j]));
          summ = _mm256_add_epi32(summ, _mm256_madd_epi16(bs, mins[j]));
        }
        const __m256 da = _mm256_load_ps(a[g]->d);
        // acc + fma(d * da, sumi, -((dmin * da) * summ)), as the AVX2 tiles.
        const __m256 m = _mm256_xor_ps(
            _mm256_mul_ps(_mm256_mul_ps(dmin, da), _mm256_cvtepi32_ps(summ)), sign_bit);
        acc[r][g] = _mm256_add_ps(
            acc[r][g], _mm256_fmadd_ps(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(isum[r][g]), m));
      }
    }
  }
  for (int r = 0; r < R; ++r) store_row_groups(acc[r], t.n_a, t.y + r, t.y_stride);
}

template <int R, int NG>
void q6k_gemm_tile(const Tile& t) {
  const int64_t n_blocks = t.n_cols / quant::kQK_K;
  const size_t group_stride = 8 * t.a_stride;
  __m256 acc[R][NG];
  for (int r = 0; r < R; ++r) {
    for (int g = 0; g < NG; ++g) acc[r][g] = _mm256_setzero_ps();
  }
  alignas(32) uint8_t w[R][quant::kQK_K];
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int8_t* scales[R];
    __m256 dw[R];
    for (int r = 0; r < R; ++r) {
      const uint8_t* block = t.w + r * t.w_stride + b * Q6K::kBytes;
      Q6K::Prep prep;
      Q6K::prepare(block, &prep);
      unpack_super_block<Q6K>(prep, w[r]);
      scales[r] = reinterpret_cast<const int8_t*>(block + 192);
      dw[r] = _mm256_set1_ps(prep.d);
    }
    const ActQ8Kx8* a[NG];
    __m256i isum[R][NG];
    for (int g = 0; g < NG; ++g) {
      a[g] = reinterpret_cast<const ActQ8Kx8*>(t.a + g * group_stride) + b;
      for (int r = 0; r < R; ++r) isum[r][g] = _mm256_setzero_si256();
    }
    add_scaled_sub_blocks<16>(
        w, a, [&](int r, int k) { return int{scales[r][k]}; }, isum);
    for (int r = 0; r < R; ++r) {
      __m256i pairs[8];
      for (int p = 0; p < 8; ++p) pairs[p] = q6k_scale_pair(scales[r], p);
      for (int g = 0; g < NG; ++g) {
        // The -32 offset: 32 * sum_k sc_k * bsums_k, from the interleaved bsum pairs.
        __m256i offset = _mm256_setzero_si256();
        for (int p = 0; p < 8; ++p) {
          const __m256i bs = _mm256_load_si256(reinterpret_cast<const __m256i*>(a[g]->bsums[p]));
          offset = _mm256_add_epi32(offset, _mm256_madd_epi16(bs, pairs[p]));
        }
        const __m256i sumi = _mm256_sub_epi32(isum[r][g], _mm256_slli_epi32(offset, 5));
        const __m256 da = _mm256_load_ps(a[g]->d);
        acc[r][g] = _mm256_fmadd_ps(_mm256_mul_ps(dw[r], da), _mm256_cvtepi32_ps(sumi), acc[r][g]);
      }
    }
  }
  for (int r = 0; r < R; ++r) store_row_groups(acc[r], t.n_a, t.y + r, t.y_stride);
}

template <bool kFiveBit>
void q45k_gemm(const Tile& t) {
  dispatch_tile<kGemmRows, kGemmGroups, 8>(t, [&t](auto r, auto g) {
    q45k_gemm_tile<kFiveBit, decltype(r)::value, decltype(g)::value>(t);
  });
}

void q6k_gemm(const Tile& t) {
  dispatch_tile<kGemmRows, kGemmGroups, 8>(
      t, [&t](auto r, auto g) { q6k_gemm_tile<decltype(r)::value, decltype(g)::value>(t); });
}

// ---- Q4_K / Q5_K GEMV: one weight row at a time, VNNI ----
//
// The AVX2 GEMV's 1-row tile spends more instructions on scales and reductions than on the dot
// product: on Zen 4 it ran ~34 cycles per super-block with the weights in cache, which an
// llvm-mca model puts at the 6-wide dispatch (about 120 instructions). Here (~96), per
// super-block:
//   - the 8 sub-block scales go to a small stack array as int16 pairs (2 stores) and come back
//     as vpbroadcastd loads, where the AVX2 tile spends a vpshufb per sub-block;
//   - vpdpwssd adds each vpmaddubsw pair sum times its scale into the int32 sum (vpmaddwd + vpaddd
//     in AVX2);
//   - the activation's group sums (bsums[2j] + bsums[2j+1]) are made once per call for all rows;
//   - the int32 sums of the scale and min terms are reduced together into one xmm.
// The integers are the AVX2 tiles' exactly and the f32 step is the same expression, so a row
// equals the GEMM's (and the AVX2 GEMV's) bit for bit.

// Rows per GEMV call (Q4_K/Q5_K: the group sums are shared by these rows).
constexpr int kGemvRows = 8;
// Super-blocks whose group sums are made at a time (longer rows are walked in column chunks, each
// row's blocks still in order).
constexpr int64_t kGroupSumBlocks = 64;

// Q45K's f32 term of one super-block, fma(d * da, sumi, -((dmin * da) * summ)), from sums (8
// int32 lanes of scaled products) and mins (4 int32 lanes of min terms); the caller adds it to
// the row's sum (acc + term, the GEMM's order). The two reductions share their shuffles.
inline float q45k_term(__m256i sums, __m128i mins, const uint8_t* block, float da) {
  const __m128i t = _mm_add_epi32(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
  // [t0 + t2, t1 + t3, m0 + m2, m1 + m3], then lane 0 = sumi and lane 2 = summ.
  const __m128i u = _mm_add_epi32(_mm_unpacklo_epi64(t, mins), _mm_unpackhi_epi64(t, mins));
  const __m128 f = _mm_cvtepi32_ps(_mm_add_epi32(u, _mm_shuffle_epi32(u, _MM_SHUFFLE(2, 3, 0, 1))));
  // [d, 0, dmin, 0] from the block's two f16s, times da.
  const uint32_t dpair = load_u32(block);
  const uint64_t spread = (dpair & 0xffffu) | (uint64_t{dpair >> 16} << 32);
  const __m128 dd =
      _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<int64_t>(spread))), _mm_set1_ps(da));
  const __m128 m =
      _mm_xor_ps(_mm_movehl_ps(_mm_setzero_ps(), _mm_mul_ps(dd, f)), _mm_set1_ps(-0.0f));
  return _mm_cvtss_f32(_mm_fmadd_ss(dd, f, m));
}

// Bytes ahead (in address order) that the GEMV prefetches: rows are contiguous, so this runs a
// few short rows ahead (Zen 4, 2 threads, weights from DRAM: 1536 x 1536 and 8960 x 1536 from
// about 29-31 to 33-35 GB/s; noisy).
constexpr size_t kGemvPrefetchBytes = 4096;

// Q45K's term of one super-block of one row (activation a, group sums gs).
template <bool kFiveBit>
inline float q45k_gemv_block(const uint8_t* block, const ActQ8K& a, const int16_t* gs) {
  using F = Q45K<kFiveBit>;
  const PackedScaleMin sm = packed_scale_min(block + 4);
  // pairs[j] = scale_j * 0x10001, the int16 pair vpdpwssd multiplies by.
  alignas(32) int32_t pairs[8];
  const __m128i s16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sm.scale)));
  _mm_store_si128(reinterpret_cast<__m128i*>(pairs), _mm_unpacklo_epi16(s16, s16));
  _mm_store_si128(reinterpret_cast<__m128i*>(pairs + 4), _mm_unpackhi_epi16(s16, s16));
  // The stores must reach memory and the broadcasts below read them back: vpbroadcastd from
  // memory is a load, without the shuffle uop of a broadcast from a register (the compiler
  // would otherwise forward the values through registers).
  asm volatile("" ::: "memory");
  const __m128i mins =
      _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sm.min))),
                     _mm_load_si128(reinterpret_cast<const __m128i*>(gs)));
  const uint8_t* qs = block + F::kQsOffset;
  __m256i high = _mm256_setzero_si256();
  if constexpr (kFiveBit) high = loadu256(block + 16);
  // Two chains (even and odd sub-blocks) for vpdpwssd's latency.
  __m256i even = _mm256_setzero_si256();
  __m256i odd = _mm256_setzero_si256();
  for (int j2 = 0; j2 < 4; ++j2) {
    __m256i lo, hi;
    F::group_pair(qs, high, j2, &lo, &hi);
    const __m256i p0 = _mm256_maddubs_epi16(lo, loadu256(a.qs + 64 * j2));
    const __m256i p1 = _mm256_maddubs_epi16(hi, loadu256(a.qs + 64 * j2 + 32));
    even = _mm256_dpwssd_epi32(even, p0, _mm256_set1_epi32(pairs[2 * j2]));
    odd = _mm256_dpwssd_epi32(odd, p1, _mm256_set1_epi32(pairs[2 * j2 + 1]));
  }
  return q45k_term(_mm256_add_epi32(even, odd), mins, block, a.d);
}

template <bool kFiveBit>
void q45k_gemv(const Tile& t) {
  using F = Q45K<kFiveBit>;
  const int64_t n_blocks = t.n_cols / quant::kQK_K;
  const auto* act = reinterpret_cast<const ActQ8K*>(t.a);
  float acc[kGemvRows] = {};
  alignas(16) int16_t group_sums[kGroupSumBlocks][8];
  for (int64_t b0 = 0; b0 < n_blocks; b0 += kGroupSumBlocks) {
    const int64_t b1 = std::min(n_blocks, b0 + kGroupSumBlocks);
    for (int64_t b = b0; b < b1; ++b) {
      _mm_store_si128(reinterpret_cast<__m128i*>(group_sums[b - b0]), act_group_sums(act[b]));
    }
    for (int r = 0; r < t.n_w; ++r) {
      const uint8_t* row = t.w + r * t.w_stride;
      float row_acc = acc[r];
      for (int64_t b = b0; b < b1; ++b) {
        const uint8_t* block = row + b * F::kBytes;
        prefetch(block + kGemvPrefetchBytes, F::kBytes);
        row_acc = row_acc + q45k_gemv_block<kFiveBit>(block, act[b], group_sums[b - b0]);
      }
      acc[r] = row_acc;
    }
  }
  for (int r = 0; r < t.n_w; ++r) t.y[r] = acc[r];
}

// ---- Q6_K GEMV: one weight row at a time, VNNI ----
//
// As the AVX2 1-row tile (a vpshufb picks each 32-group's pair of sub-block scales; the -32
// offset from the bsums), with fewer instructions: the 6-bit values are put together by one
// vpternlogd each (low nibble from ql, bits 4-5 from qh pre-masked so that bits 6-7 are clear),
// vpdpwssd adds the scaled pair sums, and the reduction is one hsum. Integers and the f32 step
// are the AVX2 tile's.
inline float q6k_gemv_block(float acc, const uint8_t* block, const ActQ8K& a) {
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  const uint8_t* sc = block + 192;
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i m33 = _mm256_set1_epi8(0x33);
  // -32 * sum_k sc_k * bsums_k
  const __m256i offset = _mm256_madd_epi16(_mm256_cvtepi8_epi16(loadu128(sc)), loadu256(a.bsums));
  __m256i even = _mm256_setzero_si256();
  __m256i odd = _mm256_setzero_si256();
  for (int h = 0; h < 2; ++h) {
    const __m256i scales = _mm256_broadcastsi128_si256(
        _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc + 8 * h))));
    const __m256i hbits = loadu256(qh + 32 * h);
    // Fields f0..f3 (bits 0-1, 2-3, 4-5, 6-7 of each qh byte) of groups 0..3: f0 and f2 in h02
    // (bits 0-1 and 4-5), f1 and f3 in h13, so that shifting by 4 (16-bit) puts f0 / f1 at
    // bits 4-5 with bits 6-7 clear; bits 0-3 are taken from ql.
    const __m256i h02 = _mm256_and_si256(hbits, m33);
    const __m256i h13 = _mm256_and_si256(_mm256_srli_epi16(hbits, 2), m33);
    const __m256i raw0 = loadu256(ql + 64 * h);
    const __m256i raw1 = loadu256(ql + 64 * h + 32);
    // 0xe4: C ? A : B with C = 0x0f (A's bits 0-3, B's bits 4-7).
    const __m256i q[4] = {_mm256_ternarylogic_epi32(raw0, _mm256_slli_epi16(h02, 4), m4, 0xe4),
                          _mm256_ternarylogic_epi32(raw1, _mm256_slli_epi16(h13, 4), m4, 0xe4),
                          _mm256_ternarylogic_epi32(_mm256_srli_epi16(raw0, 4), h02, m4, 0xe4),
                          _mm256_ternarylogic_epi32(_mm256_srli_epi16(raw1, 4), h13, m4, 0xe4)};
    for (int s = 0; s < 4; s += 2) {
      const __m256i p0 = _mm256_maddubs_epi16(q[s], loadu256(a.qs + 32 * (4 * h + s)));
      const __m256i p1 = _mm256_maddubs_epi16(q[s + 1], loadu256(a.qs + 32 * (4 * h + s + 1)));
      even = _mm256_dpwssd_epi32(even, p0, pick(scales, kScalePick6.control[s]));
      odd = _mm256_dpwssd_epi32(odd, p1, pick(scales, kScalePick6.control[s + 1]));
    }
  }
  const __m256i sum = _mm256_sub_epi32(_mm256_add_epi32(even, odd), _mm256_slli_epi32(offset, 5));
  // Q6_K's fma(d * da, sumi, acc), as q6k_gemm_tile.
  const __m128 dd = _mm_set_ss(load_f16(block + 208) * a.d);
  return _mm_cvtss_f32(
      _mm_fmadd_ss(dd, _mm_cvtsi32_ss(_mm_setzero_ps(), hsum_i32(sum)), _mm_set_ss(acc)));
}

void q6k_gemv(const Tile& t) {
  const int64_t n_blocks = t.n_cols / quant::kQK_K;
  const auto* act = reinterpret_cast<const ActQ8K*>(t.a);
  for (int r = 0; r < t.n_w; ++r) {
    const uint8_t* row = t.w + r * t.w_stride;
    float acc = 0.0f;
    for (int64_t b = 0; b < n_blocks; ++b) {
      const uint8_t* block = row + b * Q6K::kBytes;
      prefetch(block + kGemvPrefetchBytes, Q6K::kBytes);
      acc = q6k_gemv_block(acc, block, act[b]);
    }
    t.y[r] = acc;
  }
}

// The AVX2 kernel of the type with this file's GEMM in place of its own.
Kernel with_vnni_gemm(gguf::GgmlType type, TileFn gemm_fn) {
  return with_gemm(*find_kquant_avx2(type), kGemmRows, 8 * kGemmGroups, gemm_fn);
}

Kernel with_vnni_gemv(Kernel kernel, int gemv_rows, TileFn gemv_fn) {
  kernel.gemv_rows = gemv_rows;
  kernel.gemv = gemv_fn;
  return kernel;
}

}  // namespace

const Kernel* find_kquant_avx512(gguf::GgmlType type) {
  using gguf::GgmlType;
  static const Kernel q4_k = with_vnni_gemv(with_vnni_gemm(GgmlType::kQ4_K, &q45k_gemm<false>),
                                            kGemvRows, &q45k_gemv<false>);
  static const Kernel q5_k = with_vnni_gemv(with_vnni_gemm(GgmlType::kQ5_K, &q45k_gemm<true>),
                                            kGemvRows, &q45k_gemv<true>);
  // Q6_K rows of any length one at a time: on Zen 4 the AVX2 GEMV's 2-row tile over long rows
  // streamed worse from DRAM than its 1-row tile (2 threads, 2 alternated runs: 896x4864
  // 15.8 / 20.3 -> 29.8 / 30.9 GB/s, 1536x8960 22.8 / 24.1 -> 27.7 / 32.5).
  static const Kernel q6_k =
      with_vnni_gemv(with_vnni_gemm(GgmlType::kQ6_K, &q6k_gemm), kGemvRows, &q6k_gemv);
  switch (type) {
    case GgmlType::kQ4_K:
      return &q4_k;
    case GgmlType::kQ5_K:
      return &q5_k;
    case GgmlType::kQ6_K:
      return &q6_k;
    default:
      return nullptr;
  }
}

}  // namespace llms::kernels::detail
