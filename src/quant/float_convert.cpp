// quant/float_convert: row helpers over the scalar conversions of float_convert.h. The 16-bit
// side is read and written with memcpy because it may be unaligned (mapped file data).
#include "quant/float_convert.h"

#include <cstring>

namespace llms::quant {

namespace {

uint16_t load_u16(const void* base, int64_t i) {
  uint16_t v;
  std::memcpy(&v, static_cast<const unsigned char*>(base) + 2 * i, sizeof v);
  return v;
}

void store_u16(void* base, int64_t i, uint16_t v) {
  std::memcpy(static_cast<unsigned char*>(base) + 2 * i, &v, sizeof v);
}

}  // namespace

void fp16_to_fp32_row(const void* src, float* dst, int64_t n_elements) {
  for (int64_t i = 0; i < n_elements; ++i) dst[i] = fp16_to_fp32(load_u16(src, i));
}

void fp32_to_fp16_row(const float* src, void* dst, int64_t n_elements) {
  for (int64_t i = 0; i < n_elements; ++i) store_u16(dst, i, fp32_to_fp16(src[i]));
}

void bf16_to_fp32_row(const void* src, float* dst, int64_t n_elements) {
  for (int64_t i = 0; i < n_elements; ++i) dst[i] = bf16_to_fp32(load_u16(src, i));
}

void fp32_to_bf16_row(const float* src, void* dst, int64_t n_elements) {
  for (int64_t i = 0; i < n_elements; ++i) store_u16(dst, i, fp32_to_bf16(src[i]));
}

}  // namespace llms::quant
