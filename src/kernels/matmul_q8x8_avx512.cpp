// kernels/matmul_q8x8_avx512: VNNI GEMV and GEMM tiles for Q4_0, Q5_0 and Q8_0, in the AVX2
// tiles' layouts (ActQ8 rows for the GEMV, ActQ8x8 groups for the GEMM; matmul_q8x8_avx2.cpp).
//
// vpdpbusd multiplies 4 unsigned weight bytes, broadcast, with the same 4 positions of 8
// activation rows and adds the 4 products into each row's int32 lane: one instruction where AVX2
// needs vpmaddubsw + vpmaddwd (+ vpsignb for Q8_0), and no int16 step that could overflow. Every
// weight is taken unsigned: Q4_0/Q5_0 as stored (0..15, 0..31), Q8_0 as w + 128 (w ^ 0x80), and
// offset * sum(q_a) (ActQ8 carries the sum) is subtracted: 8, 16 and 128 for the three types.
// The block dot is then the same exact integer the AVX2 tiles and the GEMV compute, and the f32
// step is the same expression, acc = fma(float(idot), dw * da, acc), so a GEMM row equals its
// GEMV bit for bit.
//
// GEMV: as the AVX2 row tile (4 weight rows, their int32 dots reduced by vphaddd into one xmm,
// one f32 step for the 4 rows), with vpdpbusd for the products and Q5_0's fifth bits set by a
// masked add from a k-mask instead of a shuffle/compare expansion. Q8_0's short rows go one at a
// time through gemv_row (4 blocks of the row per vphaddd pass, then the f32 steps in order).
//
// GEMM tile: R weight rows x NG groups of 8 activation rows. vpdpbusd's latency is several cycles,
// so each (row, group) pair sums its 8 products in two chains and the tile keeps R * NG * 2
// chains in flight; AVX-512VL's 32 ymm registers hold them without spills.
// clang-format off
#include "simd_avx512.h"  // first: see the note there on <immintrin.h>
// clang-format on

#include "matmul_kernels.h"

namespace llms::kernels::detail {
namespace {

using namespace avx2;

struct Q4_0 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ4_0);
  static constexpr int kOffsetShift = 3;        // offset 8
  static constexpr bool kGemvRowByRow = false;  // bound by its unpacking: the 4-row tile pays
  static __m256i unpack(const uint8_t* b) { return unpack_nibbles(b + 2); }
};

struct Q5_0 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ5_0);
  static constexpr int kOffsetShift = 4;  // offset 16
  static constexpr bool kGemvRowByRow = false;
  static __m256i unpack(const uint8_t* b) {
    const __m256i low = unpack_nibbles(b + 6);
    return _mm256_mask_add_epi8(low, _cvtu32_mask32(load_u32(b + 2)), low, _mm256_set1_epi8(0x10));
  }
};

struct Q8_0 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ8_0);
  static constexpr int kOffsetShift = 7;       // w + 128: |sum(q_a)| * 128 <= 32 * 127 * 128 fits
  static constexpr bool kGemvRowByRow = true;  // short rows: see kGemvRowByRowMaxCols
  static __m256i unpack(const uint8_t* b) {
    return _mm256_xor_si256(loadu256(b + 2), _mm256_set1_epi8(static_cast<char>(0x80)));
  }
};

template <class F, int R, int NG>
void gemm_tile(const Tile& t) {
  const int64_t n_blocks = t.n_cols / quant::kQK;
  const size_t group_stride = 8 * t.a_stride;
  __m256 acc[R][NG];
  for (int r = 0; r < R; ++r) {
    for (int g = 0; g < NG; ++g) acc[r][g] = _mm256_setzero_ps();
  }
  alignas(32) uint8_t w[R][32];
  for (int64_t b = 0; b < n_blocks; ++b) {
    __m256 dw[R];
    for (int r = 0; r < R; ++r) {
      const uint8_t* block = t.w + r * t.w_stride + b * F::kBytes;
      _mm256_store_si256(reinterpret_cast<__m256i*>(w[r]), F::unpack(block));
      dw[r] = _mm256_set1_ps(load_f16(block));
    }
    for (int g = 0; g < NG; ++g) {
      const auto* a = reinterpret_cast<const ActQ8x8*>(t.a + g * group_stride) + b;
      __m256i av[8];
      for (int j = 0; j < 8; ++j) {
        av[j] = _mm256_load_si256(reinterpret_cast<const __m256i*>(a->qs[j]));
      }
      const __m256 da = _mm256_load_ps(a->d);
      const __m256i corr = _mm256_slli_epi32(
          _mm256_load_si256(reinterpret_cast<const __m256i*>(a->sum)), F::kOffsetShift);
      for (int r = 0; r < R; ++r) {
        __m256i even = _mm256_setzero_si256();
        __m256i odd = _mm256_setzero_si256();
        for (int j = 0; j < 8; j += 2) {
          even = _mm256_dpbusd_epi32(even, broadcast_u32(w[r] + 4 * j), av[j]);
          odd = _mm256_dpbusd_epi32(odd, broadcast_u32(w[r] + 4 * j + 4), av[j + 1]);
        }
        const __m256i dot = _mm256_sub_epi32(_mm256_add_epi32(even, odd), corr);
        acc[r][g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(dw[r], da), acc[r][g]);
      }
    }
  }
  for (int r = 0; r < R; ++r) store_row_groups(acc[r], t.n_a, t.y + r, t.y_stride);
}

// Bytes ahead (address order) that the row-by-row GEMV prefetches (as the K-quant GEMVs).
constexpr size_t kGemvRowPrefetchBytes = 4096;

// The multi-row GEMV prefetches each row's block this many tiles ahead into L2 (Zen 4, Q5_0
// 4864 x 896 and 896 x 896 from DRAM at 2 threads, 3 alternated runs: one tile ahead into L1
// ~17 GB/s median, 8 tiles into L2 ~22, none ~11).
constexpr int kGemvPrefetchTiles = 8;

template <class F, int R>
void gemv_tile(const Tile& t) {
  const int64_t n_blocks = t.n_cols / quant::kQK;
  const auto* act = reinterpret_cast<const ActQ8*>(t.a);
  __m128 acc = _mm_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const __m256i y = loadu256(act[b].qs);
    __m256i p[4];
    uint16_t dh[4] = {0, 0, 0, 0};
    for (int r = 0; r < 4; ++r) {
      if (r >= R) {
        p[r] = _mm256_setzero_si256();
        continue;
      }
      const uint8_t* block = t.w + r * t.w_stride + b * F::kBytes;
      _mm_prefetch(reinterpret_cast<const char*>(block + kGemvPrefetchTiles * R * t.w_stride),
                   _MM_HINT_T1);
      p[r] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), F::unpack(block), y);
      dh[r] = load_u16(block);
    }
    const __m128 dw = _mm_cvtph_ps(
        _mm_setr_epi16(static_cast<int16_t>(dh[0]), static_cast<int16_t>(dh[1]),
                       static_cast<int16_t>(dh[2]), static_cast<int16_t>(dh[3]), 0, 0, 0, 0));
    // Lanes of h: [0..3] = rows 0..3 over the low 4 int32 lanes, [4..7] over the high 4.
    const __m256i h =
        _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
    __m128i dot = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    dot = _mm_sub_epi32(dot, _mm_set1_epi32(act[b].sum << F::kOffsetShift));
    acc = _mm_fmadd_ps(_mm_cvtepi32_ps(dot), _mm_mul_ps(dw, _mm_set1_ps(act[b].d)), acc);
  }
  alignas(16) float out[4];
  _mm_store_ps(out, acc);
  for (int r = 0; r < R; ++r) t.y[r] = out[r];
}

// One weight row, 4 blocks per pass: their int32 dots reduced by vphaddd into one xmm (lanes =
// blocks) where the 1-row gemv_tile reduces one block against three zero rows; the f32 steps
// then run block after block, acc = fma(float(idot), dw * da, acc), as in every tile.
template <class F>
void gemv_row(const Tile& t) {
  const int64_t n_blocks = t.n_cols / quant::kQK;
  const auto* act = reinterpret_cast<const ActQ8*>(t.a);
  __m128 acc = _mm_setzero_ps();
  int64_t b = 0;
  for (; b + 4 <= n_blocks; b += 4) {
    const uint8_t* blocks = t.w + b * F::kBytes;
    prefetch(blocks + kGemvRowPrefetchBytes, 4 * F::kBytes);
    __m256i p[4];
    for (int k = 0; k < 4; ++k) {
      p[k] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), F::unpack(blocks + k * F::kBytes),
                                 loadu256(act[b + k].qs));
    }
    const __m256i h =
        _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
    __m128i dot = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    const __m128i sums = _mm_setr_epi32(act[b].sum, act[b + 1].sum, act[b + 2].sum, act[b + 3].sum);
    dot = _mm_sub_epi32(dot, _mm_slli_epi32(sums, F::kOffsetShift));
    const __m128 dw = _mm_cvtph_ps(_mm_setr_epi16(
        static_cast<int16_t>(load_u16(blocks)), static_cast<int16_t>(load_u16(blocks + F::kBytes)),
        static_cast<int16_t>(load_u16(blocks + 2 * F::kBytes)),
        static_cast<int16_t>(load_u16(blocks + 3 * F::kBytes)), 0, 0, 0, 0));
    const __m128 da = _mm_setr_ps(act[b].d, act[b + 1].d, act[b + 2].d, act[b + 3].d);
    __m128 x = _mm_cvtepi32_ps(dot);
    __m128 w = _mm_mul_ps(dw, da);
    for (int k = 0; k < 4; ++k) {
      acc = _mm_fmadd_ss(x, w, acc);
      x = _mm_castsi128_ps(_mm_srli_si128(_mm_castps_si128(x), 4));
      w = _mm_castsi128_ps(_mm_srli_si128(_mm_castps_si128(w), 4));
    }
  }
  for (; b < n_blocks; ++b) {
    const uint8_t* block = t.w + b * F::kBytes;
    const int idot = hsum_i32(
        _mm256_dpbusd_epi32(_mm256_setzero_si256(), F::unpack(block), loadu256(act[b].qs)));
    const __m128 x = _mm_set_ss(static_cast<float>(idot - (act[b].sum << F::kOffsetShift)));
    acc = _mm_fmadd_ss(x, _mm_set_ss(load_f16(block) * act[b].d), acc);
  }
  t.y[0] = _mm_cvtss_f32(acc);
}

constexpr int kGemvRows = 4;

template <class F>
void gemv(const Tile& t) {
  // Q8_0 short rows one after another, as the AVX2 GEMV.
  if constexpr (F::kGemvRowByRow) {
    if (t.n_cols <= kGemvRowByRowMaxCols) {
      return gemv_row_by_row(t, [](const Tile& row) { gemv_row<F>(row); });
    }
  }
  dispatch_tile<kGemvRows, 1>(t, [&t](auto r, auto) { gemv_tile<F, decltype(r)::value>(t); });
}

constexpr int kGemmRows = 2;
constexpr int kGemmGroups = 4;

template <class F>
void gemm(const Tile& t) {
  dispatch_tile<kGemmRows, kGemmGroups, 8>(
      t, [&t](auto r, auto g) { gemm_tile<F, decltype(r)::value, decltype(g)::value>(t); });
}

template <class F>
constexpr Kernel make() {
  return Kernel{ActKind::kQ8x8, kGemvRows, kGemmRows, 8 * kGemmGroups, &gemv<F>, &gemm<F>};
}

constexpr Kernel q4_0 = make<Q4_0>();
constexpr Kernel q5_0 = make<Q5_0>();
constexpr Kernel q8_0 = make<Q8_0>();

}  // namespace

const Kernel* find_q8x8_avx512(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kQ4_0:
      return &q4_0;
    case gguf::GgmlType::kQ5_0:
      return &q5_0;
    case gguf::GgmlType::kQ8_0:
      return &q8_0;
    default:
      return nullptr;
  }
}

}  // namespace llms::kernels::detail
