// kernels/matmul_q8x8_avx2: AVX2 GEMV and GEMM tiles for Q4_0, Q5_0 (32-element blocks with a
// fixed offset, no min) and Q8_0 (signed, no offset) against 8-bit activations (ActQ8 rows for
// GEMV, ActQ8x8 groups for GEMM).
//
// Arithmetic (the same for every tile shape, so a GEMM row equals the GEMV of that row bit for
// bit): per (weight row, activation row, block) the dot of the 32 integer weights with the 32
// activation bytes is summed exactly in int32 (the weights are taken unsigned, 0..15 / 0..31, and
// offset * sum(q_a), which ActQ8 carries, is subtracted), then
//   acc = fma(float(idot), dw * da, acc)   block after block, in f32.
//
// GEMV (decode): 4 weight rows at once; the 4 int32 dots are reduced with vphaddd into one xmm,
// so the f32 scale and accumulate work is shared by the 4 rows.
//
// GEMM (prefill, batched decode): a tile is 1 weight row x 32 activation rows (4 groups of 8;
// measured faster than 2 x 16 and 4 x 8: the 8 broadcast weight groups stay in registers).
// Activations are interleaved per group of 8 rows (ActQ8x8: 4 consecutive bytes of each row side
// by side), so one vpmaddubsw multiplies 4 weights of one row, broadcast, with the same 4
// positions of 8 activation rows, and the 8 lanes of the int32 result are the 8 rows' dots: no
// horizontal sums, and each weight block is unpacked once per 32 activation rows. Q4_0/Q5_0
// products are small enough to sum 8 / 4 vpmaddubsw results in int16 before one vpmaddwd.
// Q8_0 (q8_0_gemm_tile) needs |w| and a vpsignb per product, and a vpmaddwd per product.
#include <cstring>

#include "matmul_kernels.h"
#include "simd_avx2.h"

namespace llms::kernels::detail {
namespace {

using namespace avx2;

struct Q4_0 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ4_0);
  static constexpr int32_t kOffset = 8;
  static constexpr int kOffsetShift = 3;
  static constexpr int kSum16 = 8;  // 8 * 2 * 15 * 127 < 2^15
  static constexpr bool kSigned = false;
  static __m256i unpack(const uint8_t* b) { return unpack_nibbles(b + 2); }
};

struct Q5_0 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ5_0);
  static constexpr int32_t kOffset = 16;
  static constexpr int kOffsetShift = 4;
  static constexpr int kSum16 = 4;  // 4 * 2 * 31 * 127 < 2^15
  static constexpr bool kSigned = false;
  static __m256i unpack(const uint8_t* b) {
    return _mm256_or_si256(unpack_nibbles(b + 6), bits_to_0x10(load_u32(b + 2)));
  }
};

// Q8_0: signed weights, no offset (rows_tile for the GEMV; its own GEMM tile, q8_0_gemm_tile).
struct Q8_0 {
  static constexpr size_t kBytes = sizeof(quant::BlockQ8_0);
  static constexpr int32_t kOffset = 0;
  static constexpr bool kSigned = true;
  static __m256i unpack(const uint8_t* b) { return loadu256(b + 2); }
};

// ---- GEMV, and Q8_0's GEMM ----

// R (<= 4) weight rows x C activation rows (ActQ8 rows); the GEMV is C = 1. Per block the R
// rows are unpacked once and their 4 int32 dots with each activation row reduced by vphaddd into
// one xmm (lanes = weight rows), so the scale and accumulate work is shared by the 4 rows. Q8_0's
// signed weights go through vpmaddubsw as |w| times y carrying w's sign.
template <class F, int R, int C>
void rows_tile(const Tile& t) {
  const int64_t n_blocks = t.n_cols / quant::kQK;
  __m128 acc[C];
  for (int i = 0; i < C; ++i) acc[i] = _mm_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    __m256i q[4];
    __m256i q_abs[4];
    uint16_t dh[4] = {0, 0, 0, 0};
    for (int r = 0; r < 4; ++r) {
      if (r >= R) {
        q[r] = q_abs[r] = _mm256_setzero_si256();
        continue;
      }
      const uint8_t* block = t.w + r * t.w_stride + b * F::kBytes;
      _mm_prefetch(reinterpret_cast<const char*>(block + R * t.w_stride), _MM_HINT_T0);
      q[r] = F::unpack(block);
      if constexpr (F::kSigned) q_abs[r] = _mm256_sign_epi8(q[r], q[r]);
      dh[r] = load_u16(block);
    }
    const __m128 dw = _mm_cvtph_ps(
        _mm_setr_epi16(static_cast<int16_t>(dh[0]), static_cast<int16_t>(dh[1]),
                       static_cast<int16_t>(dh[2]), static_cast<int16_t>(dh[3]), 0, 0, 0, 0));
    for (int i = 0; i < C; ++i) {
      const ActQ8& act = reinterpret_cast<const ActQ8*>(t.a + i * t.a_stride)[b];
      const __m256i y = loadu256(act.qs);
      __m256i p[4];
      for (int r = 0; r < 4; ++r) {
        if (r >= R) {
          p[r] = _mm256_setzero_si256();
        } else if constexpr (F::kSigned) {
          p[r] = dot_u8s8(q_abs[r], _mm256_sign_epi8(y, q[r]));
        } else {
          p[r] = dot_u8s8(q[r], y);
        }
      }
      // Lanes of h: [0..3] = rows 0..3 over the low 4 int32 lanes, [4..7] over the high 4.
      const __m256i h =
          _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
      __m128i dot = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
      if constexpr (F::kOffset != 0) {
        dot = _mm_sub_epi32(dot, _mm_set1_epi32(act.sum * F::kOffset));
      }
      acc[i] = _mm_fmadd_ps(_mm_cvtepi32_ps(dot), _mm_mul_ps(dw, _mm_set1_ps(act.d)), acc[i]);
    }
  }
  for (int i = 0; i < C; ++i) {
    alignas(16) float out[4];
    _mm_store_ps(out, acc[i]);
    for (int r = 0; r < R; ++r) t.y[i * t.y_stride + r] = out[r];
  }
}

// ---- GEMM ----

// Exact int32 dots of one unpacked weight block w (unsigned bytes, stored) with the 8 activation
// rows of a group (av = its 8 interleaved registers), before the offset correction.
template <class F>
inline __m256i group_dot(const uint8_t* w, const __m256i (&av)[8]) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i sum = _mm256_setzero_si256();
  for (int j0 = 0; j0 < 8; j0 += F::kSum16) {
    __m256i s16 = _mm256_maddubs_epi16(broadcast_u32(w + 4 * j0), av[j0]);
    for (int j = j0 + 1; j < j0 + F::kSum16; ++j) {
      s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(broadcast_u32(w + 4 * j), av[j]));
    }
    sum = _mm256_add_epi32(sum, _mm256_madd_epi16(s16, ones));
  }
  return sum;
}

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
      const __m256i q = F::unpack(block);
      _mm256_store_si256(reinterpret_cast<__m256i*>(w[r]), q);
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
        const __m256i dot = _mm256_sub_epi32(group_dot<F>(w[r], av), corr);
        acc[r][g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(dw[r], da), acc[r][g]);
      }
    }
  }
  for (int r = 0; r < R; ++r) store_row_groups(acc[r], t.n_a, t.y + r, t.y_stride);
}

// Q8_0 GEMM: 1 weight row x NG groups of 8 activation rows (ActQ8x8). Signed weights: per
// 4-byte weight group j the broadcast w and |w| (one vpabsb, shared by the NG groups), then per
// group vpmaddubsw(|w|, vpsignb(a, w)): |w| <= 128, |a| <= 127, so a pair sum is at most
// 2 * 128 * 127 < 2^15, but two cannot be added in int16, hence one vpmaddwd per product.
template <int R, int NG>
void q8_0_gemm_tile(const Tile& t) {
  const int64_t n_blocks = t.n_cols / quant::kQK;
  const size_t group_stride = 8 * t.a_stride;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R][NG];
  for (int r = 0; r < R; ++r) {
    for (int g = 0; g < NG; ++g) acc[r][g] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < n_blocks; ++b) {
    const ActQ8x8* a[NG];
    __m256i isum[R][NG];
    for (int g = 0; g < NG; ++g) {
      a[g] = reinterpret_cast<const ActQ8x8*>(t.a + g * group_stride) + b;
      for (int r = 0; r < R; ++r) isum[r][g] = _mm256_setzero_si256();
    }
    // Not unrolled: unrolled, GCC keeps all 32 products live and spills them before adding.
#pragma GCC unroll 1
    for (int j = 0; j < 8; ++j) {
      __m256i wb[R];
      __m256i wabs[R];
      for (int r = 0; r < R; ++r) {
        wb[r] = broadcast_u32(t.w + r * t.w_stride + b * Q8_0::kBytes + 2 + 4 * j);
        wabs[r] = _mm256_abs_epi8(wb[r]);
      }
      for (int g = 0; g < NG; ++g) {
        const __m256i av = _mm256_load_si256(reinterpret_cast<const __m256i*>(a[g]->qs[j]));
        for (int r = 0; r < R; ++r) {
          const __m256i p = _mm256_maddubs_epi16(wabs[r], _mm256_sign_epi8(av, wb[r]));
          isum[r][g] = _mm256_add_epi32(isum[r][g], _mm256_madd_epi16(p, ones));
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m256 dw = _mm256_set1_ps(load_f16(t.w + r * t.w_stride + b * Q8_0::kBytes));
      for (int g = 0; g < NG; ++g) {
        acc[r][g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r][g]),
                                    _mm256_mul_ps(dw, _mm256_load_ps(a[g]->d)), acc[r][g]);
      }
    }
  }
  for (int r = 0; r < R; ++r) store_row_groups(acc[r], t.n_a, t.y + r, t.y_stride);
}

constexpr int kGemvRows = 4;
constexpr int kGemmRows = 1;
constexpr int kGemmGroups = 4;

template <class F>
void gemv(const Tile& t) {
  // Q8_0 decodes fast enough to be bound by DRAM alone, so short rows go row by row (see
  // kGemvRowByRowMaxCols); Q4_0/Q5_0 are bound by their unpacking and keep the 4-row tile, whose
  // scale and reduction work is shared by the rows.
  if constexpr (F::kSigned) {
    if (t.n_cols <= kGemvRowByRowMaxCols) {
      return gemv_row_by_row(t, [](const Tile& row) { rows_tile<F, 1, 1>(row); });
    }
  }
  dispatch_tile<kGemvRows, 1>(
      t, [&t](auto r, auto c) { rows_tile<F, decltype(r)::value, decltype(c)::value>(t); });
}

constexpr int kQ8GemmRows = 1;  // measured: 1 x 32 >= 2 x 16, 2 x 32, 3 x 16
constexpr int kQ8GemmGroups = 4;
void q8_0_gemm(const Tile& t) {
  dispatch_tile<kQ8GemmRows, kQ8GemmGroups, 8>(
      t, [&t](auto r, auto g) { q8_0_gemm_tile<decltype(r)::value, decltype(g)::value>(t); });
}

template <class F>
void gemm(const Tile& t) {
  dispatch_tile<kGemmRows, kGemmGroups, 8>(
      t, [&t](auto r, auto g) { gemm_tile<F, decltype(r)::value, decltype(g)::value>(t); });
}

template <class F>
constexpr Kernel make() {
  return Kernel{ActKind::kQ8x8, kGemvRows, kGemmRows, 8 * kGemmGroups, &gemv<F>, &gemm<F>};
}

constexpr Kernel kQ4_0 = make<Q4_0>();
constexpr Kernel kQ5_0 = make<Q5_0>();
constexpr Kernel kQ8_0{ActKind::kQ8x8,    kGemvRows,   kQ8GemmRows,
                       8 * kQ8GemmGroups, &gemv<Q8_0>, &q8_0_gemm};

}  // namespace

const Kernel* find_q8x8_avx2(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kQ4_0:
      return &kQ4_0;
    case gguf::GgmlType::kQ5_0:
      return &kQ5_0;
    case gguf::GgmlType::kQ8_0:
      return &kQ8_0;
    default:
      return nullptr;
  }
}

}  // namespace llms::kernels::detail
