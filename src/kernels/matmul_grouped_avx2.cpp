// kernels/matmul_grouped_avx2: AVX2 GEMV and GEMM tiles for Q4_0, Q5_0 and Q8_0 matrices in
// 16-row groups (WeightLayout::kRowGroups16; bytes in row_groups_layout.h), taken as two halves
// of 8 rows. Each kernel type (Grouped<Q4_0 / Q5_0>, GroupedQ8_0) gives unpack (a half block to
// 8 vectors) and step (one activation block against them); the tiles are shared.
//
// One ymm holds 4 consecutive weights of each of a half's 8 rows (unsigned, 0..15 / 0..31), and
// vpmaddubsw against 4 activation bytes broadcast from memory gives each row's two pair sums in
// its 32-bit lane; kSum16 of those add in int16 without overflow before one vpmaddwd makes them
// int32, so 8 vpmaddubsw and 8 / kSum16 vpmaddwd give the 8 rows' integer dots of a block, with
// no horizontal sum. Unpacking costs an and (or a shift and an and) per vector for the nibbles
// and, for Q5_0, a shift, an and and an or for the fifth bits, stored transposed so that bit j
// of byte k is the fifth bit of byte k of vector j. In the row layout the same work is a nibble
// split, a byte spread of the 32 fifth bits per row and block, and reductions across lanes: on
// Zen 3 the Q5_0 GEMV was bound by that arithmetic, not by DRAM (docs/PERF.md).
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

// Q4_0 and Q5_0 (unsigned weights with an offset).
template <gguf::GgmlType kType>
struct Grouped {
  static constexpr bool kHasFifthBit = kType == gguf::GgmlType::kQ5_0;
  static constexpr size_t kBlockBytes = kGroupRows * grouped_type_block_bytes(kType);
  static constexpr int kOffsetShift = kHasFifthBit ? 4 : 3;
  // Pair sums of vpmaddubsw that add in int16: 4 * 2 * 31 * 127 and 8 * 2 * 15 * 127 < 2^15.
  static constexpr int kSum16 = kHasFifthBit ? 4 : 8;

  // v[j] = values 4j..4j+3 of the 8 rows of half h of grouped block gb, unsigned.
  static void unpack(const uint8_t* gb, int h, __m256i (&v)[8]) {
    const uint8_t* quants = gb + grouped_quants_offset(kType) + 32 * h;
    const __m256i low = _mm256_set1_epi8(0x0f);
    for (int p = 0; p < 4; ++p) {
      const __m256i q = loadu256(quants + 64 * p);
      v[p] = _mm256_and_si256(q, low);
      v[p + 4] = _mm256_and_si256(_mm256_srli_epi16(q, 4), low);
    }
    if constexpr (kHasFifthBit) {
      // Bit j of each byte moved to bit 4 (16-bit shifts: for j <= 4 a left shift by 4 - j and
      // for j > 4 a right shift by j - 4 keep every byte's bits within the byte at bit 4).
      const __m256i bits = loadu256(gb + kGroupScaleBytes + 32 * h);
      const __m256i fifth = _mm256_set1_epi8(0x10);
      v[0] = _mm256_or_si256(v[0], _mm256_and_si256(_mm256_slli_epi16(bits, 4), fifth));
      v[1] = _mm256_or_si256(v[1], _mm256_and_si256(_mm256_slli_epi16(bits, 3), fifth));
      v[2] = _mm256_or_si256(v[2], _mm256_and_si256(_mm256_slli_epi16(bits, 2), fifth));
      v[3] = _mm256_or_si256(v[3], _mm256_and_si256(_mm256_slli_epi16(bits, 1), fifth));
      v[4] = _mm256_or_si256(v[4], _mm256_and_si256(bits, fifth));
      v[5] = _mm256_or_si256(v[5], _mm256_and_si256(_mm256_srli_epi16(bits, 1), fifth));
      v[6] = _mm256_or_si256(v[6], _mm256_and_si256(_mm256_srli_epi16(bits, 2), fifth));
      v[7] = _mm256_or_si256(v[7], _mm256_and_si256(_mm256_srli_epi16(bits, 3), fifth));
    }
  }

  // acc += the f32 step of activation block a against half h's unpacked block v (scales dw).
  static __m256 step(const __m256i (&v)[8], const uint8_t* /*gb*/, int /*h*/, __m256 dw,
                     const ActQ8& a, __m256 acc) {
    const __m256i ones = _mm256_set1_epi16(1);
    const auto* q = reinterpret_cast<const uint8_t*>(a.qs);
    __m256i sum = _mm256_setzero_si256();
    for (int j0 = 0; j0 < 8; j0 += kSum16) {
      __m256i s16 = _mm256_maddubs_epi16(v[j0], broadcast_u32(q + 4 * j0));
      for (int j = j0 + 1; j < j0 + kSum16; ++j) {
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(v[j], broadcast_u32(q + 4 * j)));
      }
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(s16, ones));
    }
    const __m256i dot = _mm256_sub_epi32(sum, _mm256_set1_epi32(a.sum << kOffsetShift));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(dw, _mm256_set1_ps(a.d)), acc);
  }
};

// Q8_0 (signed weights, no offset). Its unpacked form is |w| (the unsigned operand of
// vpmaddubsw); w itself is read from the block again for the sign of each product: |w| * (a
// with w's sign). |w| <= 128 and |a| <= 127, so a pair sum fits in int16 but two do not: one
// vpmaddwd per vector.
struct GroupedQ8_0 {
  static constexpr size_t kBlockBytes = kGroupRows * sizeof(quant::BlockQ8_0);
  static const uint8_t* quants(const uint8_t* gb, int h) { return gb + kGroupScaleBytes + 32 * h; }

  static void unpack(const uint8_t* gb, int h, __m256i (&v)[8]) {
    for (int j = 0; j < 8; ++j) v[j] = _mm256_abs_epi8(loadu256(quants(gb, h) + 64 * j));
  }

  static __m256 step(const __m256i (&w_abs)[8], const uint8_t* gb, int h, __m256 dw, const ActQ8& a,
                     __m256 acc) {
    const __m256i ones = _mm256_set1_epi16(1);
    const auto* q = reinterpret_cast<const uint8_t*>(a.qs);
    const uint8_t* w = quants(gb, h);
    __m256i sum = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      const __m256i signed_a = _mm256_sign_epi8(broadcast_u32(q + 4 * j), loadu256(w + 64 * j));
      sum =
          _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(w_abs[j], signed_a), ones));
    }
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dw, _mm256_set1_ps(a.d)), acc);
  }
};

// The first n of 8 lanes of acc to y (a partial last group has fewer than 16 rows).
inline void store_rows(__m256 acc, int n, float* y) {
  if (n >= kHalfRows) return _mm256_storeu_ps(y, acc);
  alignas(32) float lanes[kHalfRows];
  _mm256_store_ps(lanes, acc);
  for (int i = 0; i < n; ++i) y[i] = lanes[i];
}

// Activation rows per GEMM tile. The unpacked half block (8 ymm) stays in registers for all of
// them; the accumulators live in memory between blocks (each is touched once per block).
constexpr int kGemmActRows = 8;

// Bytes ahead (address order) a tile prefetches: a group's blocks are one stream, read from
// memory once (later activation tiles of a GEMM find it in cache).
constexpr size_t kPrefetchBytes = 2048;

// 16 weight rows (one group) x NA activation rows; the GEMV is NA = 1.
template <class F, int NA>
void gemm_tile(const Tile& t) {
  const int64_t n_blocks = t.n_cols / quant::kQK;
  __m256 acc[2][NA];
  for (int h = 0; h < 2; ++h) {
    for (int n = 0; n < NA; ++n) acc[h][n] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* gb = t.w + b * F::kBlockBytes;
    prefetch(gb + kPrefetchBytes, F::kBlockBytes);
    for (int h = 0; h < 2; ++h) {
      __m256i v[8];
      F::unpack(gb, h, v);
      const __m256 dw = half_scales(gb, h);
      for (int n = 0; n < NA; ++n) {
        const auto* a = reinterpret_cast<const ActQ8*>(t.a + n * t.a_stride) + b;
        acc[h][n] = F::step(v, gb, h, dw, *a, acc[h][n]);
      }
    }
  }
  for (int n = 0; n < NA && n < t.n_a; ++n) {
    float* y = t.y + n * t.y_stride;
    store_rows(acc[0][n], t.n_w, y);
    if (t.n_w > kHalfRows) store_rows(acc[1][n], t.n_w - kHalfRows, y + kHalfRows);
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
