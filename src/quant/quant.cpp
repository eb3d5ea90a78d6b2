// quant/quant: dispatch from a GgmlType to the block codecs, with the size checks of quant.h.
//
// One table names, per type, the dequantizer and the quantizer (nullptr where we have none),
// so can_dequantize/can_quantize and the dispatchers cannot disagree.
#include "quant/quant.h"

#include <cstring>
#include <string>

#include "quant/float_convert.h"
#include "quant/k_blocks.h"
#include "quant/legacy_blocks.h"
#include "util/checked_math.h"
#include "util/error.h"

namespace llms::quant {

namespace {

using DequantizeFn = void (*)(const void* src, float* dst, int64_t n_blocks);
using QuantizeFn = void (*)(const float* src, void* dst, int64_t n_blocks);

void copy_f32_in(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void copy_f32_out(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

struct Codec {
  GgmlType type;
  DequantizeFn dequantize;
  QuantizeFn quantize;
};

constexpr Codec kCodecs[] = {
    {GgmlType::kF32, copy_f32_in, copy_f32_out},
    {GgmlType::kF16, fp16_to_fp32_row, fp32_to_fp16_row},
    {GgmlType::kBF16, bf16_to_fp32_row, fp32_to_bf16_row},
    {GgmlType::kQ4_0, dequantize_q4_0, quantize_q4_0},
    {GgmlType::kQ4_1, dequantize_q4_1, quantize_q4_1},
    {GgmlType::kQ5_0, dequantize_q5_0, quantize_q5_0},
    {GgmlType::kQ5_1, dequantize_q5_1, quantize_q5_1},
    {GgmlType::kQ8_0, dequantize_q8_0, quantize_q8_0},
    {GgmlType::kQ8_1, dequantize_q8_1, quantize_q8_1},
    {GgmlType::kQ2_K, dequantize_q2_K, quantize_q2_K},
    {GgmlType::kQ3_K, dequantize_q3_K, quantize_q3_K},
    {GgmlType::kQ4_K, dequantize_q4_K, quantize_q4_K},
    {GgmlType::kQ5_K, dequantize_q5_K, quantize_q5_K},
    {GgmlType::kQ6_K, dequantize_q6_K, quantize_q6_K},
    {GgmlType::kQ8_K, dequantize_q8_K, quantize_q8_K},
};

const Codec* find_codec(GgmlType type) {
  for (const auto& codec : kCodecs) {
    if (codec.type == type) return &codec;
  }
  return nullptr;
}

std::string type_label(GgmlType type) {
  const auto raw = static_cast<uint32_t>(type);
  if (const auto info = gguf::ggml_type_info(raw)) return std::string(info->name);
  return "unknown GGML type id " + std::to_string(raw);
}

[[noreturn]] void throw_unsupported(GgmlType type, const char* what) {
  throw Error(Error::Kind::kUnsupported,
              std::string(what) + " of tensor type " + type_label(type) + " is not supported");
}

// Validates n for `type` and returns the number of blocks it spans.
int64_t checked_blocks(GgmlType type, int64_t n, const char* what) {
  const auto info = gguf::ggml_type_info(static_cast<uint32_t>(type));
  if (!info) throw_unsupported(type, what);
  if (n < 0 || n % info->block_size != 0) {
    throw Error(Error::Kind::kInvalidArgument,
                std::string(what) + " of " + type_label(type) + ": element count " +
                    std::to_string(n) + " is not a non-negative multiple of the block size " +
                    std::to_string(info->block_size));
  }
  return n / info->block_size;
}

void check_pointers(GgmlType type, const void* src, const void* dst, int64_t n, const char* what) {
  if (n > 0 && (src == nullptr || dst == nullptr)) {
    throw Error(Error::Kind::kInvalidArgument,
                std::string(what) + " of " + type_label(type) + ": null source or destination");
  }
}

}  // namespace

bool can_dequantize(GgmlType type) { return find_codec(type) != nullptr; }

bool can_quantize(GgmlType type) {
  const Codec* codec = find_codec(type);
  return codec != nullptr && codec->quantize != nullptr;
}

uint64_t quantized_row_bytes(GgmlType type, int64_t n) {
  const int64_t n_blocks = checked_blocks(type, n, "row size");
  const auto bytes =
      checked_mul(static_cast<uint64_t>(n_blocks), gguf::ggml_type_info(type).type_size);
  if (!bytes) {
    throw Error(Error::Kind::kInvalidArgument, "row size of " + type_label(type) + ": " +
                                                   std::to_string(n) +
                                                   " elements overflow 64 bits");
  }
  return *bytes;
}

void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
  const Codec* codec = find_codec(type);
  if (codec == nullptr) throw_unsupported(type, "dequantization");
  const int64_t n_blocks = checked_blocks(type, n, "dequantization");
  check_pointers(type, src, dst, n, "dequantization");
  codec->dequantize(src, dst, n_blocks);
}

void quantize_row(GgmlType type, const float* src, void* dst, int64_t n) {
  const Codec* codec = find_codec(type);
  if (codec == nullptr || codec->quantize == nullptr) throw_unsupported(type, "quantization");
  const int64_t n_blocks = checked_blocks(type, n, "quantization");
  check_pointers(type, src, dst, n, "quantization");
  codec->quantize(src, dst, n_blocks);
}

}  // namespace llms::quant
