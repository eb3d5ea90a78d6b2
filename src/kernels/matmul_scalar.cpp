// kernels/matmul_scalar: the plain scalar reference of every matmul weight type.
//
// Each row-dot evaluates the format's integer identity directly, block by block:
//   legacy (blocks of 32, activation ActQ8 with scale da and integer sum S):
//     Q4_0: dw * da * (sum q*y - 8 S)      Q5_0: dw * da * (sum q*y - 16 S)
//     Q4_1: dw * da * sum q*y + mw * da * S  (Q5_1 likewise)      Q8_0: dw * da * sum q*y
//   K-quants (super-blocks of 256, activation Q8_K with scale da and 16-sums bsums):
//     Q4_K/Q5_K: d * da * sum_j sc_j * (sum q*y over sub-block j) - dmin * da * sum_j m_j * B_j
//     Q6_K:      d * da * sum_k sc_k * (sum (q - 32) * y over sub-block k)
//   F32/F16/BF16: the f32 dot in double.
// The SIMD kernels compute the same integers, so they differ from this only in f32 rounding.
#include <cstring>

#include "matmul_kernels.h"
#include "quant/float_convert.h"
#include "quant/k_blocks.h"
#include "row_groups_layout.h"

namespace llms::kernels::detail {
namespace {

using quant::kQK;
using quant::kQK_K;

template <class Block>
Block load(const uint8_t* row, int64_t index) {
  Block block;
  std::memcpy(&block, row + index * static_cast<int64_t>(sizeof(Block)), sizeof(Block));
  return block;
}

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The 32 values of a legacy block as integers (offsets not applied).
template <class Block>
void unpack_legacy(const Block& block, int q[kQK]) {
  if constexpr (requires { block.qh; }) {
    const uint32_t qh = load_u32(block.qh);
    for (int j = 0; j < kQK / 2; ++j) {
      q[j] = (block.qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
      q[j + 16] = (block.qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
    }
  } else {
    for (int j = 0; j < kQK / 2; ++j) {
      q[j] = block.qs[j] & 0x0f;
      q[j + 16] = block.qs[j] >> 4;
    }
  }
}

template <class Block, int kOffset, bool kHasMin>
float dot_legacy(const uint8_t* w, const uint8_t* a, int64_t n_cols) {
  const auto* act = reinterpret_cast<const ActQ8*>(a);
  float sum = 0.0f;
  int q[kQK];
  for (int64_t b = 0; b < n_cols / kQK; ++b) {
    const auto block = load<Block>(w, b);
    unpack_legacy(block, q);
    int isum = 0;
    for (int j = 0; j < kQK; ++j) isum += q[j] * act[b].qs[j];
    isum -= kOffset * act[b].sum;
    const float dw = quant::fp16_to_fp32(block.d);
    sum += dw * act[b].d * static_cast<float>(isum);
    if constexpr (kHasMin) {
      sum += quant::fp16_to_fp32(block.m) * act[b].d * static_cast<float>(act[b].sum);
    }
  }
  return sum;
}

float dot_q8_0(const uint8_t* w, const uint8_t* a, int64_t n_cols) {
  const auto* act = reinterpret_cast<const ActQ8*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n_cols / kQK; ++b) {
    const auto block = load<quant::BlockQ8_0>(w, b);
    int isum = 0;
    for (int j = 0; j < kQK; ++j) isum += block.qs[j] * act[b].qs[j];
    sum += quant::fp16_to_fp32(block.d) * act[b].d * static_cast<float>(isum);
  }
  return sum;
}

// Q4_K and Q5_K share everything but the fifth bit.
template <class Block>
float dot_q45_k(const uint8_t* w, const uint8_t* a, int64_t n_cols) {
  const auto* act = reinterpret_cast<const ActQ8K*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n_cols / kQK_K; ++b) {
    const auto block = load<Block>(w, b);
    const ActQ8K& y = act[b];
    int sumi = 0;
    int summ = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc = 0;
      uint8_t mn = 0;
      quant::k_scale_min(j, block.scales, &sc, &mn);
      int dot = 0;
      for (int l = 0; l < 32; ++l) {
        const uint8_t byte = block.qs[32 * (j / 2) + l];
        int q = (j % 2 == 0) ? (byte & 0x0f) : (byte >> 4);
        if constexpr (requires { block.qh; }) q |= ((block.qh[l] >> j) & 1) << 4;
        dot += q * y.qs[32 * j + l];
      }
      sumi += sc * dot;
      summ += mn * (y.bsums[2 * j] + y.bsums[2 * j + 1]);
    }
    const float d = quant::fp16_to_fp32(block.d);
    const float dmin = quant::fp16_to_fp32(block.dmin);
    sum += d * y.d * static_cast<float>(sumi) - dmin * y.d * static_cast<float>(summ);
  }
  return sum;
}

float dot_q6_k(const uint8_t* w, const uint8_t* a, int64_t n_cols) {
  const auto* act = reinterpret_cast<const ActQ8K*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n_cols / kQK_K; ++b) {
    const auto block = load<quant::BlockQ6_K>(w, b);
    const ActQ8K& y = act[b];
    int sumi = 0;
    for (int k = 0; k < 16; ++k) {
      int dot = 0;
      for (int t = 0; t < 16; ++t) {
        const int e = 16 * k + t;
        const int h = e / 128;
        const int s = (e % 128) / 32;  // which 32-group of the half
        const int l = e % 32;
        const uint8_t low_byte = block.ql[64 * h + 32 * (s % 2) + l];
        const int low = s < 2 ? (low_byte & 0x0f) : (low_byte >> 4);
        const int high = (block.qh[32 * h + l] >> (2 * s)) & 3;
        dot += ((low | (high << 4)) - 32) * y.qs[e];
      }
      sumi += block.scales[k] * dot;
    }
    sum += quant::fp16_to_fp32(block.d) * y.d * static_cast<float>(sumi);
  }
  return sum;
}

template <gguf::GgmlType kType>
float dot_float(const uint8_t* w, const uint8_t* a, int64_t n_cols) {
  const auto* x = reinterpret_cast<const float*>(a);
  double sum = 0.0;
  for (int64_t c = 0; c < n_cols; ++c) {
    float v;
    if constexpr (kType == gguf::GgmlType::kF32) {
      std::memcpy(&v, w + 4 * c, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, w + 2 * c, 2);
      v = kType == gguf::GgmlType::kF16 ? quant::fp16_to_fp32(h) : quant::bf16_to_fp32(h);
    }
    sum += static_cast<double>(v) * x[c];
  }
  return static_cast<float>(sum);
}

using DotFn = float (*)(const uint8_t* w, const uint8_t* a, int64_t n_cols);

template <DotFn kDot>
void tile(const Tile& t) {
  for (int i = 0; i < t.n_a; ++i) {
    for (int r = 0; r < t.n_w; ++r) {
      t.y[i * t.y_stride + r] = kDot(t.w + r * t.w_stride, t.a + i * t.a_stride, t.n_cols);
    }
  }
}

template <DotFn kDot>
constexpr Kernel make(ActKind act) {
  return Kernel{act, 4, 4, 4, &tile<kDot>, &tile<kDot>};
}

// A 16-row group (WeightLayout::kRowGroups16): each row's blocks are read back out of the group
// one at a time and summed in the same order with the same expression as the row tile's kDot.
template <DotFn kDot, gguf::GgmlType kType>
void grouped_tile(const Tile& t) {
  constexpr size_t kBlock = grouped_type_block_bytes(kType);
  constexpr int64_t kValues = grouped_type_block_values(kType);
  constexpr size_t kActBlock = kValues == kQK ? sizeof(ActQ8) : sizeof(ActQ8K);
  uint8_t block[kBlock];
  const int64_t n_blocks = t.n_cols / kValues;
  for (int i = 0; i < t.n_a; ++i) {
    const uint8_t* a = t.a + i * t.a_stride;
    for (int r = 0; r < t.n_w; ++r) {
      float sum = 0.0f;
      for (int64_t b = 0; b < n_blocks; ++b) {
        get_row_block(kType, t.w + b * kGroupRows * kBlock, r, block);
        sum += kDot(block, a + b * kActBlock, kValues);
      }
      t.y[i * t.y_stride + r] = sum;
    }
  }
}

template <DotFn kDot, gguf::GgmlType kType>
constexpr Kernel make_grouped() {
  constexpr ActKind act = grouped_type_block_values(kType) == kQK ? ActKind::kQ8 : ActKind::kQ8K;
  return Kernel{
      act, kGroupRows, kGroupRows, 1, &grouped_tile<kDot, kType>, &grouped_tile<kDot, kType>};
}

// A row pair (WeightLayout::kRowPairs, kernels/row_pairs.h): each row's super-blocks are read
// where the pair put them and summed in the row tile's order with kDot's expression.
template <DotFn kDot, size_t kBlock>
void pairs_tile(const Tile& t) {
  const int64_t n_blocks = t.n_cols / kQK_K;
  for (int i = 0; i < t.n_a; ++i) {
    const uint8_t* a = t.a + i * t.a_stride;
    for (int r = 0; r < t.n_w; ++r) {
      const uint8_t* first = t.w + (r & ~1) * t.w_stride + (r & 1) * kBlock;
      float sum = 0.0f;
      for (int64_t b = 0; b < n_blocks; ++b) {
        sum += kDot(first + 2 * b * kBlock, a + b * sizeof(ActQ8K), kQK_K);
      }
      t.y[i * t.y_stride + r] = sum;
    }
  }
}

template <DotFn kDot, size_t kBlock>
constexpr Kernel make_pairs() {
  return Kernel{ActKind::kQ8K, 2, 2, 4, &pairs_tile<kDot, kBlock>, &pairs_tile<kDot, kBlock>};
}

constexpr Kernel kQ4_0 = make<&dot_legacy<quant::BlockQ4_0, 8, false>>(ActKind::kQ8);
constexpr Kernel kQ4_1 = make<&dot_legacy<quant::BlockQ4_1, 0, true>>(ActKind::kQ8);
constexpr Kernel kQ5_0 = make<&dot_legacy<quant::BlockQ5_0, 16, false>>(ActKind::kQ8);
constexpr Kernel kQ5_1 = make<&dot_legacy<quant::BlockQ5_1, 0, true>>(ActKind::kQ8);
constexpr Kernel kQ8_0 = make<&dot_q8_0>(ActKind::kQ8);
constexpr Kernel kQ4_K = make<&dot_q45_k<quant::BlockQ4_K>>(ActKind::kQ8K);
constexpr Kernel kQ5_K = make<&dot_q45_k<quant::BlockQ5_K>>(ActKind::kQ8K);
constexpr Kernel kQ6_K = make<&dot_q6_k>(ActKind::kQ8K);
constexpr Kernel kF32 = make<&dot_float<gguf::GgmlType::kF32>>(ActKind::kF32);
constexpr Kernel kF16 = make<&dot_float<gguf::GgmlType::kF16>>(ActKind::kF32);
constexpr Kernel kBF16 = make<&dot_float<gguf::GgmlType::kBF16>>(ActKind::kF32);
constexpr Kernel kGroupedQ4_0 =
    make_grouped<&dot_legacy<quant::BlockQ4_0, 8, false>, gguf::GgmlType::kQ4_0>();
constexpr Kernel kGroupedQ5_0 =
    make_grouped<&dot_legacy<quant::BlockQ5_0, 16, false>, gguf::GgmlType::kQ5_0>();
constexpr Kernel kGroupedQ8_0 = make_grouped<&dot_q8_0, gguf::GgmlType::kQ8_0>();
constexpr Kernel kGroupedQ4_K = make_grouped<&dot_q45_k<quant::BlockQ4_K>, gguf::GgmlType::kQ4_K>();
constexpr Kernel kGroupedQ6_K = make_grouped<&dot_q6_k, gguf::GgmlType::kQ6_K>();
constexpr Kernel kPairsQ4_K = make_pairs<&dot_q45_k<quant::BlockQ4_K>, sizeof(quant::BlockQ4_K)>();
constexpr Kernel kPairsQ5_K = make_pairs<&dot_q45_k<quant::BlockQ5_K>, sizeof(quant::BlockQ5_K)>();
constexpr Kernel kPairsQ6_K = make_pairs<&dot_q6_k, sizeof(quant::BlockQ6_K)>();

}  // namespace

const Kernel* find_kernel_scalar(gguf::GgmlType type) {
  using gguf::GgmlType;
  switch (type) {
    case GgmlType::kF32:
      return &kF32;
    case GgmlType::kF16:
      return &kF16;
    case GgmlType::kBF16:
      return &kBF16;
    case GgmlType::kQ4_0:
      return &kQ4_0;
    case GgmlType::kQ4_1:
      return &kQ4_1;
    case GgmlType::kQ5_0:
      return &kQ5_0;
    case GgmlType::kQ5_1:
      return &kQ5_1;
    case GgmlType::kQ8_0:
      return &kQ8_0;
    case GgmlType::kQ4_K:
      return &kQ4_K;
    case GgmlType::kQ5_K:
      return &kQ5_K;
    case GgmlType::kQ6_K:
      return &kQ6_K;
    default:
      return nullptr;
  }
}

const Kernel* find_grouped_scalar(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kQ4_0:
      return &kGroupedQ4_0;
    case gguf::GgmlType::kQ5_0:
      return &kGroupedQ5_0;
    case gguf::GgmlType::kQ8_0:
      return &kGroupedQ8_0;
    case gguf::GgmlType::kQ4_K:
      return &kGroupedQ4_K;
    case gguf::GgmlType::kQ6_K:
      return &kGroupedQ6_K;
    default:
      return nullptr;
  }
}

const Kernel* find_pairs_scalar(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kQ4_K:
      return &kPairsQ4_K;
    case gguf::GgmlType::kQ5_K:
      return &kPairsQ5_K;
    case gguf::GgmlType::kQ6_K:
      return &kPairsQ6_K;
    default:
      return nullptr;
  }
}

}  // namespace llms::kernels::detail
