// kernels/matmul_grouped_avx512: VNNI GEMV and GEMM tiles for Q4_0, Q5_0, Q8_0 and Q4_K
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
  for (int n = 0; n < NA && n < t.n_a; ++n)
    _mm512_mask_storeu_ps(t.y + n * t.y_stride, mask, acc[n]);
}

template <gguf::GgmlType kType>
void gemm(const Tile& t) {
  dispatch_tile<1, kGemmActRows>(t,
                                 [&t](auto, auto n) { gemm_tile<kType, decltype(n)::value>(t); });
}

template <gguf::GgmlType kType>
constexpr Kernel make() {
  return Kernel{ActKind::kQ8, kGroupRows, kGroupRows, kGemmActRows, &gemv<kType>, &gemm<kType>};
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

template <int NA>
void q4k_tile(const Tile& t, size_t prefetch_bytes) {
  constexpr size_t kBlockBytes = kGroupRows * sizeof(quant::BlockQ4_K);
  const int64_t n_blocks = t.n_cols / quant::kQK_K;
  const __m512i low = _mm512_set1_epi8(0x0f);
  const __m512 sign_bit = _mm512_set1_ps(-0.0f);
  __m512 acc[NA];
  for (int n = 0; n < NA; ++n) acc[n] = _mm512_setzero_ps();
  Q4kScales sm;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* gb = t.w + b * kBlockBytes;
    avx2::prefetch(gb + prefetch_bytes, kBlockBytes);
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
          even = _mm512_dpbusd_epi32(even, v[q], broadcast4(qs + 4 * q));
          odd = _mm512_dpbusd_epi32(odd, v[q + 1], broadcast4(qs + 4 * q + 4));
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

void q4k_gemv(const Tile& t) { q4k_tile<1>(t, kGemvPrefetchBytes); }

void q4k_gemm(const Tile& t) {
  dispatch_tile<1, kQ4kActRows>(
      t, [&t](auto, auto n) { q4k_tile<decltype(n)::value>(t, kGemmPrefetchBytes); });
}

constexpr Kernel q4_k{ActKind::kQ8K, kGroupRows, kGroupRows, kQ4kActRows, &q4k_gemv, &q4k_gemm};

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
    default:
      return nullptr;
  }
}

}  // namespace llms::kernels::detail
