// tests/support/gguf_bytes: a low-level builder of hand-made, possibly corrupt, GGUF bytes.
//
// Nothing is validated: a test writes exactly the fields it wants (a wrong count, an unknown type,
// a length past the end, a bad offset) in little-endian order. The named helpers (header, kv_*,
// tensor_info) write well-formed pieces so a test only spells out the part it corrupts; at()
// and the put_*_at() patchers let a test remember where a field is and overwrite it later.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace llms::testing {

// GGUF value type ids (the reader's ValueType, as raw numbers, so tests can also write bad ones).
namespace gguf_type {
inline constexpr uint32_t kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6,
                          kBool = 7, kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12;
}  // namespace gguf_type

// GGML tensor type ids used by the tests.
namespace ggml_id {
inline constexpr uint32_t kF32 = 0, kF16 = 1, kQ8_0 = 8, kQ4_K = 12, kQ6_K = 14;
}  // namespace ggml_id

class GgufBytes {
 public:
  // Raw little-endian fields.
  GgufBytes& u8(uint8_t v);
  GgufBytes& u16(uint16_t v);
  GgufBytes& u32(uint32_t v);
  GgufBytes& u64(uint64_t v);
  GgufBytes& i32(int32_t v);
  GgufBytes& i64(int64_t v);
  GgufBytes& f32(float v);
  GgufBytes& f64(double v);
  // A GGUF string: u64 length, then the bytes (no NUL).
  GgufBytes& str(std::string_view s);
  // A string whose length field claims `claimed_length` but only `bytes` follow.
  GgufBytes& str_claiming(uint64_t claimed_length, std::string_view bytes);
  // Arbitrary bytes.
  GgufBytes& raw(std::span<const uint8_t> bytes);
  GgufBytes& raw(std::string_view bytes);
  GgufBytes& fill(size_t n, uint8_t byte = 0);
  // Zero bytes until size() is a multiple of `alignment`.
  GgufBytes& pad_to(uint64_t alignment);

  // Well-formed pieces.
  // Magic "GGUF", version, n_tensors, n_kv.
  GgufBytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3);
  // Key string + value type; the caller writes the value next.
  GgufBytes& key(std::string_view key, uint32_t value_type);
  GgufBytes& kv_u8(std::string_view k, uint8_t v) { return key(k, gguf_type::kU8).u8(v); }
  GgufBytes& kv_u32(std::string_view k, uint32_t v) { return key(k, gguf_type::kU32).u32(v); }
  GgufBytes& kv_i32(std::string_view k, int32_t v) { return key(k, gguf_type::kI32).i32(v); }
  GgufBytes& kv_u64(std::string_view k, uint64_t v) { return key(k, gguf_type::kU64).u64(v); }
  GgufBytes& kv_f32(std::string_view k, float v) { return key(k, gguf_type::kF32).f32(v); }
  GgufBytes& kv_string(std::string_view k, std::string_view v) {
    return key(k, gguf_type::kString).str(v);
  }
  // Array header: element type and count; the caller writes the elements next.
  GgufBytes& array_header(uint32_t element_type, uint64_t count);
  // Name, n_dims (= ne.size()), ne..., ggml type, offset.
  GgufBytes& tensor_info(std::string_view name, std::initializer_list<uint64_t> ne,
                         uint32_t ggml_type, uint64_t offset);

  // Overwrite a field written earlier, at byte offset `at`.
  GgufBytes& put_u32_at(size_t at, uint32_t v);
  GgufBytes& put_u64_at(size_t at, uint64_t v);

  // The current end (where the next field will be written).
  size_t at() const { return bytes_.size(); }
  size_t size() const { return bytes_.size(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  std::span<const uint8_t> span() const { return bytes_; }
  // The first n bytes (n <= size()).
  std::vector<uint8_t> prefix(size_t n) const;

 private:
  std::vector<uint8_t> bytes_;
};

// Little-endian patch helpers for byte vectors produced elsewhere (e.g. by GgufWriter).
void put_u32_at(std::vector<uint8_t>& bytes, size_t at, uint32_t v);
void put_u64_at(std::vector<uint8_t>& bytes, size_t at, uint64_t v);
uint32_t get_u32_at(std::span<const uint8_t> bytes, size_t at);
uint64_t get_u64_at(std::span<const uint8_t> bytes, size_t at);

}  // namespace llms::testing
