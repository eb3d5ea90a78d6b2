// tests/support/gguf_bytes: see gguf_bytes.h. Fields are written byte by byte, so the output is
// little-endian whatever the host.
#include "gguf_bytes.h"

#include <bit>
#include <stdexcept>

namespace llms::testing {

namespace {

void put_le(std::vector<uint8_t>& out, uint64_t v, int n_bytes) {
  for (int i = 0; i < n_bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void patch_le(std::vector<uint8_t>& out, size_t at, uint64_t v, int n_bytes) {
  if (at + static_cast<size_t>(n_bytes) > out.size()) {
    throw std::out_of_range("GgufBytes: patch past the end");
  }
  for (int i = 0; i < n_bytes; ++i) out[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

uint64_t read_le(std::span<const uint8_t> bytes, size_t at, int n_bytes) {
  if (at + static_cast<size_t>(n_bytes) > bytes.size()) {
    throw std::out_of_range("GgufBytes: read past the end");
  }
  uint64_t v = 0;
  for (int i = 0; i < n_bytes; ++i) v |= static_cast<uint64_t>(bytes[at + i]) << (8 * i);
  return v;
}

}  // namespace

GgufBytes& GgufBytes::u8(uint8_t v) {
  put_le(bytes_, v, 1);
  return *this;
}
GgufBytes& GgufBytes::u16(uint16_t v) {
  put_le(bytes_, v, 2);
  return *this;
}
GgufBytes& GgufBytes::u32(uint32_t v) {
  put_le(bytes_, v, 4);
  return *this;
}
GgufBytes& GgufBytes::u64(uint64_t v) {
  put_le(bytes_, v, 8);
  return *this;
}
GgufBytes& GgufBytes::i32(int32_t v) { return u32(static_cast<uint32_t>(v)); }
GgufBytes& GgufBytes::i64(int64_t v) { return u64(static_cast<uint64_t>(v)); }
GgufBytes& GgufBytes::f32(float v) { return u32(std::bit_cast<uint32_t>(v)); }
GgufBytes& GgufBytes::f64(double v) { return u64(std::bit_cast<uint64_t>(v)); }

GgufBytes& GgufBytes::str(std::string_view s) { return str_claiming(s.size(), s); }

GgufBytes& GgufBytes::str_claiming(uint64_t claimed_length, std::string_view bytes) {
  u64(claimed_length);
  return raw(bytes);
}

GgufBytes& GgufBytes::raw(std::span<const uint8_t> bytes) {
  bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
  return *this;
}

GgufBytes& GgufBytes::raw(std::string_view bytes) {
  bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
  return *this;
}

GgufBytes& GgufBytes::fill(size_t n, uint8_t byte) {
  bytes_.insert(bytes_.end(), n, byte);
  return *this;
}

GgufBytes& GgufBytes::pad_to(uint64_t alignment) {
  if (alignment == 0) throw std::invalid_argument("GgufBytes: pad_to(0)");
  while (bytes_.size() % alignment != 0) bytes_.push_back(0);
  return *this;
}

GgufBytes& GgufBytes::header(uint64_t n_tensors, uint64_t n_kv, uint32_t version) {
  raw("GGUF");
  u32(version);
  u64(n_tensors);
  return u64(n_kv);
}

GgufBytes& GgufBytes::key(std::string_view k, uint32_t value_type) {
  str(k);
  return u32(value_type);
}

GgufBytes& GgufBytes::array_header(uint32_t element_type, uint64_t count) {
  u32(element_type);
  return u64(count);
}

GgufBytes& GgufBytes::tensor_info(std::string_view name, std::initializer_list<uint64_t> ne,
                                  uint32_t ggml_type, uint64_t offset) {
  str(name);
  u32(static_cast<uint32_t>(ne.size()));
  for (uint64_t d : ne) u64(d);
  u32(ggml_type);
  return u64(offset);
}

GgufBytes& GgufBytes::put_u32_at(size_t at, uint32_t v) {
  patch_le(bytes_, at, v, 4);
  return *this;
}

GgufBytes& GgufBytes::put_u64_at(size_t at, uint64_t v) {
  patch_le(bytes_, at, v, 8);
  return *this;
}

std::vector<uint8_t> GgufBytes::prefix(size_t n) const {
  if (n > bytes_.size()) throw std::out_of_range("GgufBytes: prefix past the end");
  return {bytes_.begin(), bytes_.begin() + static_cast<std::ptrdiff_t>(n)};
}

void put_u32_at(std::vector<uint8_t>& bytes, size_t at, uint32_t v) { patch_le(bytes, at, v, 4); }
void put_u64_at(std::vector<uint8_t>& bytes, size_t at, uint64_t v) { patch_le(bytes, at, v, 8); }
uint32_t get_u32_at(std::span<const uint8_t> bytes, size_t at) {
  return static_cast<uint32_t>(read_le(bytes, at, 4));
}
uint64_t get_u64_at(std::span<const uint8_t> bytes, size_t at) { return read_le(bytes, at, 8); }

}  // namespace llms::testing
