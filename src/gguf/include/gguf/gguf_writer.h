// gguf/gguf_writer: builds a valid GGUF (v3 by default, or v2) file in memory or on disk.
//
// Contract: everything the writer emits is a file the GGUF reader accepts and llama.cpp can load.
// It refuses (llms::Error kInvalidArgument, naming the key or tensor) any input that would make an
// invalid file: an empty or over-long key, a general.alignment that is not a u32 power of two,
// an empty, over-long or duplicate tensor name, an unknown tensor type, a shape with 0 or more
// than 4 dimensions, a zero or overflowing dimension, a first dimension that is not a whole number
// of blocks, or data whose size differs from the size the type and shape require.
//
// Layout written: header, metadata in insertion order, tensor infos in insertion order, zero
// padding to the alignment, then each tensor's data at an aligned offset, each tensor (the last
// one too) followed by zero padding to the alignment, as llama.cpp and gguf-py write it.
//
// Setting a key that is already set replaces its value and keeps its position.
// general.alignment is an ordinary key with one rule: it must be a u32 power of two in
// [1, kMaxAlignment]; set_alignment() is shorthand for setting it. When unset, the file uses the
// format's default of 32 and the key is not written.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/ggml_type.h"
#include "gguf/gguf_file.h"

namespace llms::gguf {

// One metadata value ready to be written: a scalar, a string, or an array whose elements all
// have one type (for arrays of arrays, each inner array carries its own element type and length).
// Held in its encoded form, so building deep or large values costs only their bytes.
class WriteValue {
 public:
  static WriteValue u8(uint8_t v);
  static WriteValue i8(int8_t v);
  static WriteValue u16(uint16_t v);
  static WriteValue i16(int16_t v);
  static WriteValue u32(uint32_t v);
  static WriteValue i32(int32_t v);
  static WriteValue f32(float v);
  static WriteValue boolean(bool v);
  static WriteValue string(std::string_view v);
  static WriteValue u64(uint64_t v);
  static WriteValue i64(int64_t v);
  static WriteValue f64(double v);

  // Arrays of scalars and strings.
  static WriteValue u8s(std::span<const uint8_t> v);
  static WriteValue i8s(std::span<const int8_t> v);
  static WriteValue u16s(std::span<const uint16_t> v);
  static WriteValue i16s(std::span<const int16_t> v);
  static WriteValue u32s(std::span<const uint32_t> v);
  static WriteValue i32s(std::span<const int32_t> v);
  static WriteValue f32s(std::span<const float> v);
  static WriteValue bools(std::span<const bool> v);
  static WriteValue u64s(std::span<const uint64_t> v);
  static WriteValue i64s(std::span<const int64_t> v);
  static WriteValue f64s(std::span<const double> v);
  static WriteValue strings(std::span<const std::string> v);
  static WriteValue strings(std::span<const std::string_view> v);

  // A general array: every item must have type `element_type` (throws kInvalidArgument
  // otherwise). This is how arrays of arrays are built; an empty array may have any element type.
  static WriteValue array(ValueType element_type, std::span<const WriteValue> items);

  // A copy of a value read from a GGUF file (for tools that rewrite a file, like quantize).
  static WriteValue from(const Value& value);

  ValueType type() const { return type_; }
  // For arrays: the element type and the number of elements.
  ValueType element_type() const { return element_type_; }
  uint64_t size() const { return count_; }
  // The value's encoding as it follows the u32 value type in a file.
  const std::vector<uint8_t>& encoded() const { return encoded_; }

 private:
  WriteValue(ValueType type, std::vector<uint8_t> encoded)
      : type_(type), encoded_(std::move(encoded)) {}
  template <typename T>
  static WriteValue scalar_array(ValueType element_type, std::span<const T> v);

  ValueType type_;
  ValueType element_type_ = ValueType::kUint8;
  uint64_t count_ = 0;
  std::vector<uint8_t> encoded_;
};

class GgufWriter {
 public:
  static constexpr uint32_t kDefaultAlignment = 32;
  static constexpr uint32_t kMaxAlignment = 1u << 20;
  static constexpr size_t kMaxKeyBytes = 65535;      // the GGUF spec's limit on key length
  static constexpr size_t kMaxTensorNameBytes = 63;  // llama.cpp's GGML_MAX_NAME - 1
  static constexpr uint32_t kMaxDims = 4;

  // version: 2 or 3 (the layouts are the same); throws kInvalidArgument otherwise.
  explicit GgufWriter(uint32_t version = 3);

  // Metadata.
  void set(std::string_view key, WriteValue value);
  void set_u8(std::string_view key, uint8_t v) { set(key, WriteValue::u8(v)); }
  void set_i8(std::string_view key, int8_t v) { set(key, WriteValue::i8(v)); }
  void set_u16(std::string_view key, uint16_t v) { set(key, WriteValue::u16(v)); }
  void set_i16(std::string_view key, int16_t v) { set(key, WriteValue::i16(v)); }
  void set_u32(std::string_view key, uint32_t v) { set(key, WriteValue::u32(v)); }
  void set_i32(std::string_view key, int32_t v) { set(key, WriteValue::i32(v)); }
  void set_f32(std::string_view key, float v) { set(key, WriteValue::f32(v)); }
  void set_bool(std::string_view key, bool v) { set(key, WriteValue::boolean(v)); }
  void set_string(std::string_view key, std::string_view v) { set(key, WriteValue::string(v)); }
  void set_u64(std::string_view key, uint64_t v) { set(key, WriteValue::u64(v)); }
  void set_i64(std::string_view key, int64_t v) { set(key, WriteValue::i64(v)); }
  void set_f64(std::string_view key, double v) { set(key, WriteValue::f64(v)); }
  void set_strings(std::string_view key, std::span<const std::string> v) {
    set(key, WriteValue::strings(v));
  }
  void set_i32s(std::string_view key, std::span<const int32_t> v) { set(key, WriteValue::i32s(v)); }
  void set_f32s(std::string_view key, std::span<const float> v) { set(key, WriteValue::f32s(v)); }
  // Copies every key of `file` except general.alignment (the writer lays out its own data).
  void copy_metadata(const GgufFile& file);
  // Removes a key; returns whether it was set.
  bool erase(std::string_view key);
  bool has(std::string_view key) const;
  size_t n_kv() const { return kvs_.size(); }

  // Alignment of the data section and of every tensor offset (general.alignment).
  void set_alignment(uint32_t alignment) { set_u32(kAlignmentKey, alignment); }
  uint32_t alignment() const { return alignment_; }

  // Tensors. `ne` lists the dimensions, ne[0] the contiguous one; data.size() must equal
  // ggml_row_bytes(type, product of ne). add_tensor copies the bytes; add_tensor_view keeps a view
  // and the caller keeps the bytes alive until the last to_bytes()/write().
  void add_tensor(std::string_view name, GgmlType type, std::span<const uint64_t> ne,
                  std::span<const uint8_t> data);
  void add_tensor(std::string_view name, GgmlType type, std::span<const uint64_t> ne,
                  std::vector<uint8_t>&& data);
  void add_tensor_view(std::string_view name, GgmlType type, std::span<const uint64_t> ne,
                       std::span<const uint8_t> data);
  size_t n_tensors() const { return tensors_.size(); }

  // The size of the file to_bytes()/write() produce, and the absolute offset of its data section.
  uint64_t file_size() const;
  uint64_t data_offset() const;

  std::vector<uint8_t> to_bytes() const;
  // Writes to `path` through a temporary file in the same directory renamed into place, so a
  // failed write never leaves a partial file under `path`. Throws Error(kIo) naming the path.
  void write(const std::filesystem::path& path) const;

 private:
  static constexpr std::string_view kAlignmentKey = "general.alignment";

  struct Kv {
    std::string key;
    WriteValue value;
  };
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<uint64_t> ne;
    std::vector<uint8_t> owned;  // the bytes, unless `view` holds them
    std::span<const uint8_t> view;
    bool is_view = false;
    std::span<const uint8_t> bytes() const { return is_view ? view : owned; }
  };
  class Sink;

  Tensor& add_tensor_checked(std::string_view name, GgmlType type, std::span<const uint64_t> ne,
                             size_t n_data_bytes);
  uint64_t header_size() const;
  void emit(Sink& sink) const;

  uint32_t version_;
  uint32_t alignment_ = kDefaultAlignment;
  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
};

}  // namespace llms::gguf
