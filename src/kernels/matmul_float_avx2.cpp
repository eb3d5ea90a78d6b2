// kernels/matmul_float_avx2: AVX2 tiles for F32, F16 and BF16 weights against f32 activations.
//
// 8 columns at a time: the weights are widened to f32 once (vcvtph2ps for F16, a 16-bit shift
// for BF16) and reused for every activation row of the tile; the column tail (n_cols not a
// multiple of 8) is summed in scalar after the vector part, identically in every tile shape.
#include <cmath>

#include "matmul_kernels.h"
#include "simd_avx2.h"

namespace llms::kernels::detail {
namespace {

using namespace avx2;

struct F32 {
  static constexpr size_t kBytes = 4;
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
  static __m256 load8(const uint8_t* p) { return _mm256_cvtph_ps(loadu128(p)); }
  static float load1(const uint8_t* p) { return load_f16(p); }
};

struct BF16 {
  static constexpr size_t kBytes = 2;
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

template <class F, int R, int C>
void tile(const Tile& t) {
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

constexpr int kGemvRows = 4;
constexpr int kGemmRows = 4;
constexpr int kGemmCols = 2;

template <class F, int kRows, int kCols>
void dispatch(const Tile& t) {
  dispatch_tile<kRows, kCols>(
      t, [&t](auto r, auto c) { tile<F, decltype(r)::value, decltype(c)::value>(t); });
}

template <class F>
void gemv(const Tile& t) {
  dispatch<F, kGemvRows, 1>(t);
}

template <class F>
void gemm(const Tile& t) {
  dispatch<F, kGemmRows, kGemmCols>(t);
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
