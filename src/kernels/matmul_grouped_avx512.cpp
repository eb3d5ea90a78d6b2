// kernels/matmul_grouped_avx512: VNNI GEMV and GEMM tiles for Q4_0, Q5_0 and Q8_0 matrices in
// 16-row groups (WeightLayout::kRowGroups16; bytes in row_groups_layout.h).
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
using avx512::loadu512;

// The 8 weight vectors of a grouped block: v[j] = values 4j..4j+3 of the 16 rows, unsigned.
template <gguf::GgmlType kType>
struct Grouped {
  static constexpr size_t kBlockBytes = kGroupRows * grouped_type_block_bytes(kType);
  static constexpr int kOffsetShift =
      kType == gguf::GgmlType::kQ4_0 ? 3 : kType == gguf::GgmlType::kQ5_0 ? 4 : 7;

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
        const __m512i fifth = _mm512_set1_epi8(0x10);
        for (int j = 0; j < 8; ++j) {
          uint64_t bits;
          std::memcpy(&bits, gb + kGroupScaleBytes + 8 * j, 8);
          v[j] = _mm512_mask_add_epi8(v[j], _cvtu64_mask64(bits), v[j], fifth);
        }
      }
    }
  }

  static __m512 scales(const uint8_t* gb) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gb)));
  }
};

inline __m512i broadcast4(const int8_t* p) {
  return _mm512_set1_epi32(static_cast<int>(load_u32(reinterpret_cast<const uint8_t*>(p))));
}

// acc += the f32 step of one activation block against the 16 rows' unpacked block v: the dot in
// two vpdpbusd chains (their latency is several cycles), the offset correction, then the fma.
template <int kOffsetShift>
inline __m512 block_step(const __m512i (&v)[8], __m512 dw, const ActQ8& a, __m512 acc) {
  __m512i even = _mm512_setzero_si512();
  __m512i odd = _mm512_setzero_si512();
  for (int j = 0; j < 8; j += 2) {
    even = _mm512_dpbusd_epi32(even, v[j], broadcast4(a.qs + 4 * j));
    odd = _mm512_dpbusd_epi32(odd, v[j + 1], broadcast4(a.qs + 4 * j + 4));
  }
  const __m512i dot =
      _mm512_sub_epi32(_mm512_add_epi32(even, odd), _mm512_set1_epi32(a.sum << kOffsetShift));
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw, _mm512_set1_ps(a.d)), acc);
}

inline __mmask16 row_mask(int n_w) { return static_cast<__mmask16>((1u << n_w) - 1u); }

// Bytes ahead (address order) the GEMV prefetches: a group's blocks are one stream.
constexpr size_t kGemvPrefetchBytes = 4096;

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
    acc = block_step<F::kOffsetShift>(v, F::scales(gb), act[b], acc);
  }
  _mm512_mask_storeu_ps(t.y, row_mask(t.n_w), acc);
}

// Activation rows per GEMM tile: the 8 unpacked weight vectors, NA accumulators and the two
// dot chains of the row in flight fit in the 32 zmm registers.
constexpr int kGemmActRows = 8;

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
      acc[n] = block_step<F::kOffsetShift>(v, dw, *a, acc[n]);
    }
  }
  const __mmask16 mask = row_mask(t.n_w);
  for (int n = 0; n < NA && n < t.n_a; ++n) _mm512_mask_storeu_ps(t.y + n * t.y_stride, mask, acc[n]);
}

template <gguf::GgmlType kType>
void gemm(const Tile& t) {
  dispatch_tile<1, kGemmActRows>(
      t, [&t](auto, auto n) { gemm_tile<kType, decltype(n)::value>(t); });
}

template <gguf::GgmlType kType>
constexpr Kernel make() {
  return Kernel{ActKind::kQ8, kGroupRows, kGroupRows, kGemmActRows, &gemv<kType>, &gemm<kType>};
}

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
    default:
      return nullptr;
  }
}

}  // namespace llms::kernels::detail
