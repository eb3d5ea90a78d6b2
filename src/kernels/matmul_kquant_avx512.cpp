// kernels/matmul_kquant_avx512: the VNNI GEMM tiles for Q4_K, Q5_K and Q6_K over the same
// ActQ8Kx8 groups as the AVX2 GEMMs (matmul_kquant_avx2.cpp); the GEMV stays the AVX2 one.
//
// Per super-block each weight row is unpacked once to 256 unsigned bytes (kquant_unpack_avx2.h).
// Per sub-block (32 values for Q4_K/Q5_K, 16 for Q6_K) and group of 8 activation rows, vpdpbusd
// sums the products of 4 broadcast weight bytes with the same 4 positions of the 8 rows into the
// rows' int32 lanes (two chains, then added), and one vpmulld applies the sub-block scale: where
// AVX2 needs a vpmaddubsw per 4-byte group, int16 adds and a vpmaddwd by the scale. The min term
// (Q4_K/Q5_K) and the -32 offset (Q6_K) come from the interleaved bsums exactly as in the AVX2
// tiles. Each integer is the AVX2 tiles' and the GEMV's exactly and the f32 step is the same
// expression, so a GEMM row equals its GEMV bit for bit.
//
// Tile: R weight rows x NG groups of 8 activation rows (each group's activation loads shared by
// the R rows; AVX-512VL's 32 ymm registers hold the R * NG accumulators).
// clang-format off
#include "simd_avx512.h"  // first: see the note there on <immintrin.h>
// clang-format on

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
    for (int g = 0; g < NG; ++g) {
      const auto* ag = reinterpret_cast<const __m256i*>(a[g]->qs[kGroups * k]);
      for (int r = 0; r < R; ++r) {
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

// The AVX2 kernel of the type with this file's GEMM in place of its own.
Kernel with_vnni_gemm(gguf::GgmlType type, TileFn gemm_fn) {
  return with_gemm(*find_kquant_avx2(type), kGemmRows, 8 * kGemmGroups, gemm_fn);
}

}  // namespace

const Kernel* find_kquant_avx512(gguf::GgmlType type) {
  using gguf::GgmlType;
  static const Kernel q4_k = with_vnni_gemm(GgmlType::kQ4_K, &q45k_gemm<false>);
  static const Kernel q5_k = with_vnni_gemm(GgmlType::kQ5_K, &q45k_gemm<true>);
  static const Kernel q6_k = [] {
    Kernel k = with_vnni_gemm(GgmlType::kQ6_K, &q6k_gemm);
    // Q6_K rows of any length one at a time (the AVX2 GEMV's 1-row tile): on Zen 4 its 2-row
    // tile over long rows streamed worse from DRAM (2 threads, 2 alternated runs: 896x4864
    // 15.8 / 20.3 -> 29.8 / 30.9 GB/s, 1536x8960 22.8 / 24.1 -> 27.7 / 32.5).
    k.gemv_rows = 1;
    return k;
  }();
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
