// kernels/matmul_grouped_avx2: AVX2 GEMV and GEMM tiles for Q4_0, Q5_0 and Q8_0 matrices in
// 16-row groups (WeightLayout::kRowGroups16; bytes in row_groups_layout.h), taken as two halves
// of 8 rows. Each kernel type (Grouped<Q4_0 / Q5_0>, GroupedQ8_0) gives unpack (one part of a
// block, 16 values of every row) and part_dot (16 activation bytes against it); the tiles are
// shared.
//
// One ymm holds 4 consecutive weights of each of a half's 8 rows (unsigned, 0..15 / 0..31), and
// vpmaddubsw against 4 activation bytes broadcast from memory gives each row's two pair sums in
// its 32-bit lane; the 4 of a block part add in int16 without overflow before one vpmaddwd
// makes them int32, so 8 vpmaddubsw and 2 vpmaddwd give the 8 rows' integer dots of a block,
// with no horizontal sum. Unpacking costs an and (or a shift and an and) per vector for the
// nibbles and, for Q5_0, a shift, an and and an or for the fifth bits, stored transposed so that
// bit j of byte k is the fifth bit of byte k of vector j. In the row layout the same work is a
// nibble split, a byte spread of the 32 fifth bits per row and block, and reductions across
// lanes: on Zen 3 the Q5_0 GEMV was bound by that arithmetic, not by DRAM (docs/PERF.md).
//
// A block is taken as two parts of 16 values, each part's 4 vectors of both halves at once
// (8 ymm): on Zen 3 a broadcast from memory takes a vector-pipe uop besides its load, like an
// add, and with both halves in registers each broadcast serves 16 rows instead of 8 (Q5_0 GEMM
// +16-20 % in cache; docs/PERF.md).
//
// Each (row, block) dot is the exact integer the row-layout kernels compute (offset * sum(q_a)
// subtracted for the unsigned weights: 8, 16) and the f32 step is the same expression,
// acc = fma(float(idot), dw * da, acc), block after block, so a grouped matrix gives bit for bit
// what the row layout gives on the AVX2 table, GEMV and GEMM alike.
#include "matmul_kernels.h"
#include "row_groups_layout.h"
#include "simd_avx2.h"

namespace llms::kernels::detail {
namespace {

using namespace avx2;

constexpr int kHalfRows = kGroupRows / 2;

// The f32 scales of the 8 rows of half h of grouped block gb.
inline __m256 half_scales(const uint8_t* gb, int h) {
  return _mm256_cvtph_ps(loadu128(gb + 16 * h));
}

// Bit j of each byte of `bits` moved to bit 4, the rest cleared (16-bit shifts: for j <= 4 a
// left shift by 4 - j and for j > 4 a right shift by j - 4 keep every byte's bits in the byte).
template <int J>
inline __m256i fifth_bit(__m256i bits) {
  static_assert(J >= 0 && J < 8);
  const __m256i fifth = _mm256_set1_epi8(0x10);
  if constexpr (J < 4) {
    return _mm256_and_si256(_mm256_slli_epi16(bits, 4 - J), fifth);
  } else if constexpr (J == 4) {
    return _mm256_and_si256(bits, fifth);
  } else {
    return _mm256_and_si256(_mm256_srli_epi16(bits, J - 4), fifth);
  }
}

// A kernel type F takes a grouped block gb as two parts P = 0, 1: values 16P..16P+15 of each
// row, i.e. vectors 4P..4P+3 of each half. It gives
//   unpack<P>(gb, v):          v[h][k] = vector 4P + k of half h, the unsigned operand of
//                              vpmaddubsw;
//   part_dot<P>(v, gb, q, d):  d[h] = the int32 dots of half h's 8 rows with activation bytes
//                              q[16P..16P+16) (each broadcast serves both halves);
// and kHasOffset: unsigned weights carry (1 << kOffsetShift) * sum(q_a), subtracted from each
// dot (kOffsetShift is defined only where kHasOffset).

// Q4_0 and Q5_0 (unsigned weights with an offset).
template <gguf::GgmlType kType>
struct Grouped {
  static constexpr bool kHasFifthBit = kType == gguf::GgmlType::kQ5_0;
  static constexpr size_t kBlockBytes = kGroupRows * grouped_type_block_bytes(kType);
  static constexpr bool kHasOffset = true;
  static constexpr int kOffsetShift = kHasFifthBit ? 4 : 3;
  // The 4 pair sums of vpmaddubsw of one part add in int16 without overflow.
  static_assert(4 * 2 * 31 * 127 < (1 << 15));

  template <int P>
  static void unpack(const uint8_t* gb, __m256i (&v)[2][4]) {
    const __m256i low = _mm256_set1_epi8(0x0f);
    for (int h = 0; h < 2; ++h) {
      // Quant vector p holds values 4p..4p+3 in its low nibbles (vector p) and 16+4p..16+4p+3
      // in its high nibbles (vector 4 + p).
      const uint8_t* quants = gb + grouped_quants_offset(kType) + 32 * h;
      for (int p = 0; p < 4; ++p) {
        const __m256i q = loadu256(quants + 64 * p);
        v[h][p] = _mm256_and_si256(P == 0 ? q : _mm256_srli_epi16(q, 4), low);
      }
      if constexpr (kHasFifthBit) {
        const __m256i bits = loadu256(gb + kGroupScaleBytes + 32 * h);
        v[h][0] = _mm256_or_si256(v[h][0], fifth_bit<4 * P + 0>(bits));
        v[h][1] = _mm256_or_si256(v[h][1], fifth_bit<4 * P + 1>(bits));
        v[h][2] = _mm256_or_si256(v[h][2], fifth_bit<4 * P + 2>(bits));
        v[h][3] = _mm256_or_si256(v[h][3], fifth_bit<4 * P + 3>(bits));
      }
    }
  }

  template <int P>
  static void part_dot(const __m256i (&v)[2][4], const uint8_t* /*gb*/, const uint8_t* q,
                       __m256i (&d)[2]) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i b = broadcast_u32(q + 16 * P);
    __m256i s0 = _mm256_maddubs_epi16(v[0][0], b);
    __m256i s1 = _mm256_maddubs_epi16(v[1][0], b);
    for (int k = 1; k < 4; ++k) {
      b = broadcast_u32(q + 16 * P + 4 * k);
      s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(v[0][k], b));
      s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(v[1][k], b));
    }
    d[0] = _mm256_madd_epi16(s0, ones);
    d[1] = _mm256_madd_epi16(s1, ones);
  }
};

// Q8_0 (signed weights, no offset). Its unpacked form is |w| (the unsigned operand of
// vpmaddubsw); w itself is read from the block again for the sign of each product: |w| * (a
// with w's sign). |w| <= 128 and |a| <= 127, so a pair sum fits in int16 but two do not: one
// vpmaddwd per vector.
struct GroupedQ8_0 {
  static constexpr size_t kBlockBytes = kGroupRows * sizeof(quant::BlockQ8_0);
  static constexpr bool kHasOffset = false;
  static const uint8_t* quants(const uint8_t* gb, int h) { return gb + kGroupScaleBytes + 32 * h; }

  template <int P>
  static void unpack(const uint8_t* gb, __m256i (&v)[2][4]) {
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 4; ++k) {
        v[h][k] = _mm256_abs_epi8(loadu256(quants(gb, h) + 64 * (4 * P + k)));
      }
    }
  }

  template <int P>
  static void part_dot(const __m256i (&w_abs)[2][4], const uint8_t* gb, const uint8_t* q,
                       __m256i (&d)[2]) {
    const __m256i ones = _mm256_set1_epi16(1);
    d[0] = _mm256_setzero_si256();
    d[1] = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {
      const __m256i b = broadcast_u32(q + 16 * P + 4 * k);
      for (int h = 0; h < 2; ++h) {
        const __m256i signed_a = _mm256_sign_epi8(b, loadu256(quants(gb, h) + 64 * (4 * P + k)));
        d[h] = _mm256_add_epi32(
            d[h], _mm256_madd_epi16(_mm256_maddubs_epi16(w_abs[h][k], signed_a), ones));
      }
    }
  }
};

// The first n of 8 lanes of acc to y (a partial last group has fewer than 16 rows).
inline void store_rows(__m256 acc, int n, float* y) {
  if (n >= kHalfRows) return _mm256_storeu_ps(y, acc);
  alignas(32) float lanes[kHalfRows];
  _mm256_store_ps(lanes, acc);
  for (int i = 0; i < n; ++i) y[i] = lanes[i];
}

// Activation rows per GEMM tile. A block part's 8 unpacked vectors stay in registers for all of
// them; part 0's int32 dots and the accumulators wait in memory (each touched once per block).
// 16 rather than 8 rows share each unpacking: +6 % for Q5_0, +5 % for Q8_0 in cache (PERF.md).
constexpr int kGemmActRows = 16;

// Bytes ahead (address order) a tile prefetches: a group's blocks are one stream, read from
// memory once (later activation tiles of a GEMM find it in cache).
constexpr size_t kPrefetchBytes = 2048;

// 16 weight rows (one group) x NA activation rows; the GEMV is NA = 1. Per block: part 0's
// int32 dots for every activation row, then part 1's, their sum less the offset, and the f32
// step acc = fma(float(idot), dw * da, acc) of the row layout.
template <class F, int NA>
void gemm_tile(const Tile& t) {
  const int64_t n_blocks = t.n_cols / quant::kQK;
  __m256 acc[NA][2];
  for (int n = 0; n < NA; ++n) acc[n][0] = acc[n][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* gb = t.w + b * F::kBlockBytes;
    prefetch(gb + kPrefetchBytes, F::kBlockBytes);
    const ActQ8* act[NA];
    for (int n = 0; n < NA; ++n) act[n] = reinterpret_cast<const ActQ8*>(t.a + n * t.a_stride) + b;
    __m256i idot_part0[NA][2];
    {
      __m256i v[2][4];
      F::template unpack<0>(gb, v);
      for (int n = 0; n < NA; ++n) {
        F::template part_dot<0>(v, gb, reinterpret_cast<const uint8_t*>(act[n]->qs),
                                idot_part0[n]);
      }
    }
    __m256i v[2][4];
    F::template unpack<1>(gb, v);
    const __m256 dw[2] = {half_scales(gb, 0), half_scales(gb, 1)};
    for (int n = 0; n < NA; ++n) {
      __m256i idot[2];
      F::template part_dot<1>(v, gb, reinterpret_cast<const uint8_t*>(act[n]->qs), idot);
      const __m256 da = _mm256_set1_ps(act[n]->d);
      __m256i offset = _mm256_setzero_si256();
      if constexpr (F::kHasOffset) offset = _mm256_set1_epi32(act[n]->sum << F::kOffsetShift);
      for (int h = 0; h < 2; ++h) {
        idot[h] = _mm256_add_epi32(idot_part0[n][h], idot[h]);
        if constexpr (F::kHasOffset) idot[h] = _mm256_sub_epi32(idot[h], offset);
        acc[n][h] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(idot[h]), _mm256_mul_ps(dw[h], da), acc[n][h]);
      }
    }
  }
  for (int n = 0; n < NA && n < t.n_a; ++n) {
    float* y = t.y + n * t.y_stride;
    store_rows(acc[n][0], t.n_w, y);
    if (t.n_w > kHalfRows) store_rows(acc[n][1], t.n_w - kHalfRows, y + kHalfRows);
  }
}

template <class F>
void gemm(const Tile& t) {
  dispatch_tile<1, kGemmActRows>(t, [&t](auto, auto n) { gemm_tile<F, decltype(n)::value>(t); });
}

template <class F>
constexpr Kernel make() {
  return Kernel{ActKind::kQ8, kGroupRows, kGroupRows, kGemmActRows, &gemm_tile<F, 1>, &gemm<F>};
}

constexpr Kernel q4_0 = make<Grouped<gguf::GgmlType::kQ4_0>>();
constexpr Kernel q5_0 = make<Grouped<gguf::GgmlType::kQ5_0>>();
constexpr Kernel q8_0 = make<GroupedQ8_0>();

}  // namespace

const Kernel* find_grouped_avx2(gguf::GgmlType type) {
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
