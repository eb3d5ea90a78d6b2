// kernels/matmul_float_avx2: AVX2 GEMV and GEMM for F32, F16 and BF16 weights against f32
// activations.
//
// Arithmetic (the same in every path and tile shape, so a GEMM row equals the GEMV of that
// activation row bit for bit, whatever the batch or the tile it falls in): for one (weight row,
// activation row) pair, lane l of one 8-lane f32 accumulator sums w[c] * x[c] over the columns
// c = l (mod 8) of the vector part (n_cols rounded down to 8), in column order, by FMA; the 8
// lanes are then added in hsum's order (simd_avx2.h), and the column tail (n_cols % 8) is added
// in scalar by FMA, in column order. Weights are widened to f32 exactly (vcvtph2ps for F16, a
// 16-bit shift for BF16), so where they are widened does not change any bit.
//
// GEMV (m = 1, decode, memory-bound): rows_tile, 4 weight rows at a time read in place, the
// next 4 rows prefetched. The GEMM of 1 or 2 activation rows uses it too (4 x 2).
//
// GEMM (prefill, batched decode; FMA-bound): the driver passes tiles of up to 16 weight rows x
// 48 activation rows. A tile is cut into panels of 4 weight rows, each run against micro-tiles of
// 3 activation rows (3q + 1 rows end in 2 + 2): the micro-kernel holds 4 x 3 = 12 ymm
// accumulators + 3 activation vectors + 1 weight vector, all 16 registers, and does 12 FMAs per
// 7 loads. Per k-chunk the panel loop is outside the activation loop, so a panel's weights (4
// rows x one chunk: 8 KiB of F16) stay in L1 for all the tile's activation rows, which stream from
// L2 (the driver keeps an activation chunk L2-sized). Each accumulator sums 8 columns per FMA,
// so a micro call eats the k dimension 8x faster than a BLIS-style broadcast kernel would; the
// k-chunks are therefore long (equal, <= 1024 columns), and between chunks the partial sums of
// the tile wait in a 24 KiB stack buffer (no heap).
//   - F16 is converted inside the micro-kernel: vcvtph2ps did not slow the FMA stream here, and
//     a separate widening pass cost more than it saved.
//   - BF16 (zero-extend + shift, which compete with the FMAs for vector ports: ~15% slower) is
//     widened once per panel and chunk into a 16 KiB stack buffer when the tile has at least 4
//     activation micro-tiles.
//   - The next panel's weights (or the next tile's first rows) are prefetched, a slice before
//     each activation micro-tile: rows of 1-2 KiB are too short for the hardware prefetcher.
//   - At the last chunk the accumulators are reduced 8 at a time (hsum8: hsum's additions) and
//     stored straight to y, the column tail added in scalar.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "matmul_kernels.h"
#include "simd_avx2.h"

namespace llms::kernels::detail {
namespace {

using namespace avx2;

// Weight formats: load8 widens 8 consecutive values to f32, load1 one value. kWidenInGemm: the
// GEMM widens a panel to f32 once per k-chunk instead of in every micro call.
struct F32 {
  static constexpr size_t kBytes = 4;
  static constexpr bool kWidenInGemm = false;
  static __m256 load8(const uint8_t* p) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  }
  static float load1(const uint8_t* p) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
};

struct F16 {
  static constexpr size_t kBytes = 2;
  static constexpr bool kWidenInGemm = false;
  static __m256 load8(const uint8_t* p) { return _mm256_cvtph_ps(loadu128(p)); }
  static float load1(const uint8_t* p) { return load_f16(p); }
};

struct BF16 {
  static constexpr size_t kBytes = 2;
  static constexpr bool kWidenInGemm = true;
  static __m256 load8(const uint8_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(loadu128(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static float load1(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
};

// ---- GEMV ----

constexpr int kGemvRows = 4;

// R weight rows x C activation rows, reading the weights in place with the next tile's rows
// prefetched alongside: the GEMV (C = 1), and the GEMM of 1 or 2 activation rows, where a
// panel would serve a single micro call.
template <class F, int R, int C>
void rows_tile(const Tile& t) {
  __m256 acc[R][C];
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < C; ++i) acc[r][i] = _mm256_setzero_ps();
  }
  const int64_t n_vec = t.n_cols / 8 * 8;
  for (int64_t c = 0; c < n_vec; c += 8) {
    __m256 w[R];
    for (int r = 0; r < R; ++r) {
      const uint8_t* p = t.w + r * t.w_stride + c * F::kBytes;
      if ((c * F::kBytes) % 64 == 0) {  // the next tile's rows, once per line
        _mm_prefetch(reinterpret_cast<const char*>(p + R * t.w_stride), _MM_HINT_T0);
      }
      w[r] = F::load8(p);
    }
    for (int i = 0; i < C; ++i) {
      const __m256 x = _mm256_loadu_ps(reinterpret_cast<const float*>(t.a + i * t.a_stride) + c);
      for (int r = 0; r < R; ++r) acc[r][i] = _mm256_fmadd_ps(w[r], x, acc[r][i]);
    }
  }
  for (int i = 0; i < C; ++i) {
    const auto* x = reinterpret_cast<const float*>(t.a + i * t.a_stride);
    for (int r = 0; r < R; ++r) {
      float sum = hsum(acc[r][i]);
      for (int64_t c = n_vec; c < t.n_cols; ++c) {
        sum = std::fma(F::load1(t.w + r * t.w_stride + c * F::kBytes), x[c], sum);
      }
      t.y[i * t.y_stride + r] = sum;
    }
  }
}

template <class F>
void gemv(const Tile& t) {
  // Decoding floats is cheap, so the GEMV is bound by DRAM: short rows go row by row (see
  // kGemvRowByRowMaxCols; F16 151936 x 896 from DRAM, 2 threads: 11.9-12.6 -> 14.8-16.2 GB/s).
  if (t.n_cols <= kGemvRowByRowMaxCols) {
    return gemv_row_by_row(t, [](const Tile& row) { rows_tile<F, 1, 1>(row); });
  }
  dispatch_tile<kGemvRows, 1>(
      t, [&t](auto r, auto c) { rows_tile<F, decltype(r)::value, decltype(c)::value>(t); });
}

// ---- GEMM ----

constexpr int kMicroRows = 4;  // weight rows of a panel and of the micro-kernel
constexpr int kMicroCols = 3;  // activation rows of the micro-kernel
constexpr int kGemmRows = 16;  // the tile the driver passes: 4 panels
constexpr int kGemmCols = 48;  // 16 activation micro-tiles
// Widen a BF16 panel only when it serves at least 4 micro-tiles (measured: with 2 or 3 the
// widening pass costs about what it saves).
constexpr int kWidenMinRows = 3 * kMicroCols;
// At most this many activation rows: the GEMM runs rows_tile (measured at m = 2: 73 vs 61
// GFLOP/s; at m = 3 the micro-kernels win, 73 vs 60).
constexpr int kRowsTileMaxCols = 2;
// The longest k-chunk, in columns: a 4-row panel of it is 8 KiB (F16) or 16 KiB (F32, widened
// BF16). Measured on the 896- and 4864-column shapes: 1024 beats 512 (fewer partial-sum round
// trips; 896 columns then need none) and 2048.
constexpr int64_t kMaxChunk = 1024;

// The horizontal sums of a..h as lanes 0..7, each in hsum's order
// ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)), so each equals hsum of its vector.
inline __m256 hsum8(__m256 a, __m256 b, __m256 c, __m256 d, __m256 e, __m256 f, __m256 g,
                    __m256 h) {
  // Lane half 0 of s_ae holds a's 4 sums v_j + v_{j+4}, lane half 1 e's; and so on.
  const __m256 s_ae =
      _mm256_add_ps(_mm256_permute2f128_ps(a, e, 0x20), _mm256_permute2f128_ps(a, e, 0x31));
  const __m256 s_bf =
      _mm256_add_ps(_mm256_permute2f128_ps(b, f, 0x20), _mm256_permute2f128_ps(b, f, 0x31));
  const __m256 s_cg =
      _mm256_add_ps(_mm256_permute2f128_ps(c, g, 0x20), _mm256_permute2f128_ps(c, g, 0x31));
  const __m256 s_dh =
      _mm256_add_ps(_mm256_permute2f128_ps(d, h, 0x20), _mm256_permute2f128_ps(d, h, 0x31));
  // Per lane half, (p0 + p2, p1 + p3) of x's 4 sums, then of y's.
  auto pair = [](__m256 x, __m256 y) {
    const __m256d xd = _mm256_castps_pd(x);
    const __m256d yd = _mm256_castps_pd(y);
    return _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(xd, yd)),
                         _mm256_castpd_ps(_mm256_unpackhi_pd(xd, yd)));
  };
  return _mm256_hadd_ps(pair(s_ae, s_bf), pair(s_cg, s_dh));
}

// Where one micro call works: weight rows [r0, r0 + R) and activation rows [i0, i0 + n_a) of the
// tile t, columns [c0, c0 + n); the weights of those columns at w (format L, rows w_stride
// apart: t's own rows, or a widened panel); partial sums of (r, i) at
// acc[(i * kGemmRows + r) * 8] (acc = the tile's buffer offset to (r0, i0)).
struct MicroArgs {
  const Tile* t;
  int r0;
  int i0;
  int n_a;  // activation rows of this call (C)
  int64_t c0;
  int64_t n;
  const uint8_t* w;
  size_t w_stride;
  float* acc;
  bool first;  // start from zero, not from acc
  bool last;   // the last k-chunk: reduce, add the column tail, store to y
};

// F: the tile's weight format (for the column tail); L: the format the main loop reads at w.
template <class F, class L, int R, int C>
void micro(const MicroArgs& m) {
  const Tile& t = *m.t;
  const uint8_t* x = t.a + m.i0 * t.a_stride + m.c0 * 4;
  __m256 acc[R][C];
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < C; ++i) {
      acc[r][i] = m.first ? _mm256_setzero_ps() : _mm256_load_ps(m.acc + (i * kGemmRows + r) * 8);
    }
  }
  for (int64_t c = 0; c < m.n; c += 8) {
    __m256 xv[C];
    for (int i = 0; i < C; ++i) {
      xv[i] = _mm256_loadu_ps(reinterpret_cast<const float*>(x + i * t.a_stride) + c);
    }
    for (int r = 0; r < R; ++r) {
      const __m256 wv = L::load8(m.w + r * m.w_stride + c * L::kBytes);
      for (int i = 0; i < C; ++i) acc[r][i] = _mm256_fmadd_ps(wv, xv[i], acc[r][i]);
    }
  }
  if (!m.last) {
    for (int r = 0; r < R; ++r) {
      for (int i = 0; i < C; ++i) _mm256_store_ps(m.acc + (i * kGemmRows + r) * 8, acc[r][i]);
    }
    return;
  }
  // sums[4 * i + r] = (r, i): two activation rows (8 accumulators) per hsum8, absent ones zero.
  alignas(32) float sums[4 * (C + 1)];
  for (int i = 0; i < C; i += 2) {
    __m256 v[8];
    for (int k = 0; k < 8; ++k) {
      const int r = k % 4;
      const int ii = i + k / 4;
      v[k] = r < R && ii < C ? acc[r % R][ii % C] : _mm256_setzero_ps();
    }
    _mm256_store_ps(sums + 4 * i, hsum8(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]));
  }
  const int64_t n_vec = m.c0 + m.n;
  for (int i = 0; i < C; ++i) {
    float* y = t.y + (m.i0 + i) * t.y_stride + m.r0;
    if (R == 4 && n_vec == t.n_cols) {
      _mm_storeu_ps(y, _mm_load_ps(sums + 4 * i));
      continue;
    }
    const auto* xi = reinterpret_cast<const float*>(t.a + (m.i0 + i) * t.a_stride);
    for (int r = 0; r < R; ++r) {
      const uint8_t* wr = t.w + (m.r0 + r) * t.w_stride;
      float sum = sums[4 * i + r];
      for (int64_t c = n_vec; c < t.n_cols; ++c) {
        sum = std::fma(F::load1(wr + c * F::kBytes), xi[c], sum);
      }
      y[r] = sum;
    }
  }
}

template <class F, class L>
void run_micro(const MicroArgs& m) {
  Tile shape{};
  shape.n_w = m.t->n_w - m.r0;
  shape.n_a = m.n_a;
  dispatch_tile<kMicroRows, kMicroCols>(
      shape, [&m](auto r, auto c) { micro<F, L, decltype(r)::value, decltype(c)::value>(m); });
}

// n_cols < 8: no vector part; the scalar tail from zero, as in the GEMV.
template <class F>
void gemm_tail_only(const Tile& t) {
  for (int i = 0; i < t.n_a; ++i) {
    const auto* x = reinterpret_cast<const float*>(t.a + i * t.a_stride);
    for (int r = 0; r < t.n_w; ++r) {
      float sum = 0.0f;
      for (int64_t c = 0; c < t.n_cols; ++c) {
        sum = std::fma(F::load1(t.w + r * t.w_stride + c * F::kBytes), x[c], sum);
      }
      t.y[i * t.y_stride + r] = sum;
    }
  }
}

// The GEMM of 1 or 2 activation rows: rows_tile on 4 weight rows at a time. Not inlined into
// gemm: there, GCC spilled its loop's registers (measured 67 vs 75 GFLOP/s at m = 2).
template <class F>
[[gnu::noinline]] void gemm_few_cols(const Tile& t) {
  for (int r0 = 0; r0 < t.n_w; r0 += kMicroRows) {
    Tile sub = t;
    sub.w = t.w + r0 * t.w_stride;
    sub.n_w = std::min(kMicroRows, t.n_w - r0);
    sub.y = t.y + r0;
    dispatch_tile<kMicroRows, kRowsTileMaxCols>(
        sub, [&sub](auto r, auto c) { rows_tile<F, decltype(r)::value, decltype(c)::value>(sub); });
  }
}

template <class F>
void gemm(const Tile& t) {
  const int64_t n_vec = t.n_cols / 8 * 8;
  if (n_vec == 0) return gemm_tail_only<F>(t);
  if (t.n_a <= kRowsTileMaxCols) return gemm_few_cols<F>(t);
  // k-chunks of equal length (a multiple of 8), at most kMaxChunk.
  const int64_t n_chunks = (n_vec + kMaxChunk - 1) / kMaxChunk;
  const int64_t chunk = (n_vec / 8 + n_chunks - 1) / n_chunks * 8;
  alignas(32) float acc_buf[kGemmCols * kGemmRows * 8];
  alignas(32) float panel[F::kWidenInGemm ? kMicroRows * kMaxChunk : 1];
  const bool is_widened = F::kWidenInGemm && t.n_a > kWidenMinRows;
  // Activation micro-tiles of 3 rows; n_a = 3q + 1 ends in 2 + 2 rather than 3 + 1.
  const int n_micro = (t.n_a + kMicroCols - 1) / kMicroCols;
  const bool is_split_end = t.n_a % kMicroCols == 1 && t.n_a > 1;
  MicroArgs m{};
  m.t = &t;
  for (int64_t c0 = 0; c0 < n_vec; c0 += chunk) {
    m.c0 = c0;
    m.n = std::min(chunk, n_vec - c0);
    m.first = c0 == 0;
    m.last = c0 + m.n == n_vec;
    for (int r0 = 0; r0 < t.n_w; r0 += kMicroRows) {
      m.r0 = r0;
      m.w = t.w + r0 * t.w_stride + c0 * F::kBytes;
      m.w_stride = t.w_stride;
      if (is_widened) {
        for (int r = 0; r < std::min(kMicroRows, t.n_w - r0); ++r) {
          for (int64_t c = 0; c < m.n; c += 8) {
            _mm256_store_ps(panel + r * kMaxChunk + c,
                            F::load8(m.w + r * t.w_stride + c * F::kBytes));
          }
        }
        m.w = reinterpret_cast<const uint8_t*>(panel);
        m.w_stride = kMaxChunk * sizeof(float);
      }
      // The panel that comes next: the next 4 rows, else the first rows at the next chunk, else
      // the first rows of the next tile (past the matrix at its end: prefetch is only a hint).
      const uint8_t* next = r0 + kMicroRows < t.n_w ? t.w + (r0 + kMicroRows) * t.w_stride
                            : !m.last               ? t.w
                                                    : t.w + kGemmRows * t.w_stride;
      next += (r0 + kMicroRows < t.n_w ? c0 : !m.last ? c0 + m.n : 0) * F::kBytes;
      const int64_t n_lines = (m.n * static_cast<int64_t>(F::kBytes) + 63) / 64 + 1;
      for (int k = 0; k < n_micro; ++k) {
        for (int64_t l = k * n_lines / n_micro; l < (k + 1) * n_lines / n_micro; ++l) {
          for (int r = 0; r < kMicroRows; ++r) {
            _mm_prefetch(reinterpret_cast<const char*>(next + r * t.w_stride + l * 64),
                         _MM_HINT_T0);
          }
        }
        m.i0 = k * kMicroCols;
        m.n_a = std::min(kMicroCols, t.n_a - m.i0);
        if (is_split_end && k >= n_micro - 2) {
          m.i0 = (n_micro - 2) * kMicroCols + (k - (n_micro - 2)) * 2;
          m.n_a = 2;
        }
        m.acc = acc_buf + (m.i0 * kGemmRows + r0) * 8;
        if (is_widened) {
          run_micro<F, F32>(m);
        } else {
          run_micro<F, F>(m);
        }
      }
    }
  }
}

template <class F>
constexpr Kernel make() {
  return Kernel{ActKind::kF32, kGemvRows, kGemmRows, kGemmCols, &gemv<F>, &gemm<F>};
}

constexpr Kernel kF32 = make<F32>();
constexpr Kernel kF16 = make<F16>();
constexpr Kernel kBF16 = make<BF16>();

}  // namespace

const Kernel* find_float_avx2(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kF32:
      return &kF32;
    case gguf::GgmlType::kF16:
      return &kF16;
    case gguf::GgmlType::kBF16:
      return &kBF16;
    default:
      return nullptr;
  }
}

}  // namespace llms::kernels::detail
