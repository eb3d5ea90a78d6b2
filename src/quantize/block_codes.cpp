// quantize/block_codes: see block_codes.h; the layouts are those documented in quant/blocks.h.
#include "quantize/block_codes.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "quant/blocks.h"
#include "quant/float_convert.h"
#include "quant/k_blocks.h"
#include "util/error.h"

namespace llms::quantize {

namespace {

using gguf::GgmlType;
using quant::fp16_to_fp32;

[[noreturn]] void unsupported(GgmlType type) {
  throw Error(Error::Kind::kUnsupported,
              "no per-element code access for " + std::string(gguf::ggml_type_name(type)));
}

// Legacy 32-element blocks: low nibble of qs[j] is element j, high nibble element j + 16.
int legacy_nibble(const uint8_t* qs, int j) { return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4; }
void set_legacy_nibble(uint8_t* qs, int j, int v) {
  if (j < 16) {
    qs[j] = static_cast<uint8_t>((qs[j] & 0xf0) | v);
  } else {
    qs[j - 16] = static_cast<uint8_t>((qs[j - 16] & 0x0f) | (v << 4));
  }
}

// Q4_K/Q5_K: element e's low nibble is in qs[32 * (e / 64) + e % 32], low half for e % 64 < 32.
int k_nibble(const uint8_t* qs, int e) {
  const uint8_t b = qs[32 * (e / 64) + e % 32];
  return (e % 64) < 32 ? b & 15 : b >> 4;
}
void set_k_nibble(uint8_t* qs, int e, int v) {
  uint8_t& b = qs[32 * (e / 64) + e % 32];
  b = (e % 64) < 32 ? static_cast<uint8_t>((b & 0xf0) | v)
                    : static_cast<uint8_t>((b & 0x0f) | (v << 4));
}

// Q6_K: low 4 bits of e = 128h + 64k + l are nibble k of ql[64h + l]; high 2 bits of
// e = 128h + 32s + l are bits [2s, 2s+1] of qh[32h + l].
int q6_code(const quant::BlockQ6_K& b, int e) {
  const int h = e / 128;
  const int r = e % 128;
  const uint8_t low_byte = b.ql[64 * h + r % 64];
  const int low = r < 64 ? low_byte & 15 : low_byte >> 4;
  const int high = (b.qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
  return low | (high << 4);
}
void set_q6_code(quant::BlockQ6_K& b, int e, int v) {
  const int h = e / 128;
  const int r = e % 128;
  uint8_t& low_byte = b.ql[64 * h + r % 64];
  low_byte = r < 64 ? static_cast<uint8_t>((low_byte & 0xf0) | (v & 15))
                    : static_cast<uint8_t>((low_byte & 0x0f) | ((v & 15) << 4));
  uint8_t& high_byte = b.qh[32 * h + r % 32];
  const int shift = 2 * (r / 32);
  high_byte = static_cast<uint8_t>((high_byte & ~(3 << shift)) | (((v >> 4) & 3) << shift));
}

}  // namespace

int CodeGrid::nearest(float v) const {
  if (step == 0.0f) return std::clamp(0, code_min, code_max);
  const float q = (v - offset) / step;
  if (!(q >= static_cast<float>(code_min))) return code_min;
  if (q >= static_cast<float>(code_max)) return code_max;
  return static_cast<int>(std::nearbyint(q));
}

bool has_code_access(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ5_0:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
      return true;
    default:
      return false;
  }
}

CodeGrid code_grid(GgmlType type, const void* block, int j) {
  switch (type) {
    case GgmlType::kQ4_0: {
      const float d = fp16_to_fp32(static_cast<const quant::BlockQ4_0*>(block)->d);
      return {d, -8.0f * d, 0, 15};
    }
    case GgmlType::kQ5_0: {
      const float d = fp16_to_fp32(static_cast<const quant::BlockQ5_0*>(block)->d);
      return {d, -16.0f * d, 0, 31};
    }
    case GgmlType::kQ8_0:
      return {fp16_to_fp32(static_cast<const quant::BlockQ8_0*>(block)->d), 0.0f, -128, 127};
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K: {
      // Q4_K and Q5_K share the d, dmin, scales prefix.
      const auto* b = static_cast<const quant::BlockQ4_K*>(block);
      uint8_t scale = 0;
      uint8_t min = 0;
      quant::k_scale_min(j / 32, b->scales, &scale, &min);
      return {fp16_to_fp32(b->d) * static_cast<float>(scale),
              -(fp16_to_fp32(b->dmin) * static_cast<float>(min)), 0,
              type == GgmlType::kQ4_K ? 15 : 31};
    }
    case GgmlType::kQ6_K: {
      const auto* b = static_cast<const quant::BlockQ6_K*>(block);
      const float step = fp16_to_fp32(b->d) * static_cast<float>(b->scales[j / 16]);
      return {step, -32.0f * step, 0, 63};
    }
    default:
      unsupported(type);
  }
}

int get_code(GgmlType type, const void* block, int j) {
  switch (type) {
    case GgmlType::kQ4_0:
      return legacy_nibble(static_cast<const quant::BlockQ4_0*>(block)->qs, j);
    case GgmlType::kQ5_0: {
      const auto* b = static_cast<const quant::BlockQ5_0*>(block);
      return legacy_nibble(b->qs, j) | (((b->qh[j / 8] >> (j % 8)) & 1) << 4);
    }
    case GgmlType::kQ8_0:
      return static_cast<const quant::BlockQ8_0*>(block)->qs[j];
    case GgmlType::kQ4_K:
      return k_nibble(static_cast<const quant::BlockQ4_K*>(block)->qs, j);
    case GgmlType::kQ5_K: {
      const auto* b = static_cast<const quant::BlockQ5_K*>(block);
      return k_nibble(b->qs, j) | (((b->qh[j % 32] >> (j / 32)) & 1) << 4);
    }
    case GgmlType::kQ6_K:
      return q6_code(*static_cast<const quant::BlockQ6_K*>(block), j);
    default:
      unsupported(type);
  }
}

void set_code(GgmlType type, void* block, int j, int code) {
  const CodeGrid grid = code_grid(type, block, j);
  const int v = std::clamp(code, grid.code_min, grid.code_max);
  switch (type) {
    case GgmlType::kQ4_0:
      set_legacy_nibble(static_cast<quant::BlockQ4_0*>(block)->qs, j, v);
      return;
    case GgmlType::kQ5_0: {
      auto* b = static_cast<quant::BlockQ5_0*>(block);
      set_legacy_nibble(b->qs, j, v & 15);
      b->qh[j / 8] = static_cast<uint8_t>((b->qh[j / 8] & ~(1 << (j % 8))) | ((v >> 4) << (j % 8)));
      return;
    }
    case GgmlType::kQ8_0:
      static_cast<quant::BlockQ8_0*>(block)->qs[j] = static_cast<int8_t>(v);
      return;
    case GgmlType::kQ4_K:
      set_k_nibble(static_cast<quant::BlockQ4_K*>(block)->qs, j, v);
      return;
    case GgmlType::kQ5_K: {
      auto* b = static_cast<quant::BlockQ5_K*>(block);
      set_k_nibble(b->qs, j, v & 15);
      const int bit = j / 32;
      b->qh[j % 32] = static_cast<uint8_t>((b->qh[j % 32] & ~(1 << bit)) | ((v >> 4) << bit));
      return;
    }
    case GgmlType::kQ6_K:
      set_q6_code(*static_cast<quant::BlockQ6_K*>(block), j, v);
      return;
    default:
      unsupported(type);
  }
}

}  // namespace llms::quantize
