// gguf/gguf_file: a validated, read-only view of a GGUF (v2 or v3) file.
//
// Contract: open() / from_bytes() either return a file whose every metadata value, tensor shape,
// byte size and offset has been checked with overflow-safe 64-bit arithmetic against the bytes
// that exist, or throw llms::Error(kInvalidFile / kUnsupported) with a message that names the key
// or tensor and what is wrong. After a successful open nothing can read out of bounds: tensor
// data spans lie inside the file, tensors do not overlap, names are unique.
//
// Values are views into the file's bytes (strings, arrays of scalars), so a Value lives only as
// long as the GgufFile it came from. This keeps memory proportional to the file: a hostile array
// of a billion bytes costs no more than the bytes themselves.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/ggml_type.h"

namespace llms::gguf {

enum class ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

std::string_view value_type_name(ValueType type);
bool is_integer_type(ValueType type);

// One metadata value: a scalar, a string, or an array (possibly of arrays).
class Value {
 public:
  ValueType type() const { return type_; }

  // Scalars. Each returns std::nullopt when the value is not of a compatible type: as_uint and
  // as_int accept every integer type whose value fits; as_float accepts floats and integers.
  std::optional<uint64_t> as_uint() const;
  std::optional<int64_t> as_int() const;
  std::optional<double> as_float() const;
  std::optional<bool> as_bool() const;
  std::optional<std::string_view> as_string() const;

  // Arrays (type() == kArray).
  ValueType element_type() const { return element_type_; }
  uint64_t size() const { return count_; }
  // Element i of an array of scalars / strings / arrays; i must be < size().
  Value element(uint64_t i) const;

  // Whole-array conversions; std::nullopt when this is not an array of a compatible type.
  std::optional<std::vector<std::string>> to_strings() const;
  std::optional<std::vector<double>> to_floats() const;
  std::optional<std::vector<int64_t>> to_ints() const;

  // A short human-readable rendering (long arrays and strings are abbreviated).
  std::string to_display_string(size_t max_items = 8) const;

 private:
  friend class GgufParser;
  ValueType type_ = ValueType::kUint8;
  ValueType element_type_ = ValueType::kUint8;
  uint64_t count_ = 0;       // array length
  uint64_t scalar_bits_ = 0; // scalar payload, little-endian bits widened to 64
  const uint8_t* data_ = nullptr;  // string bytes, or the first element of a scalar array
  uint64_t string_size_ = 0;
  std::shared_ptr<const std::vector<std::string_view>> strings_;  // array of strings
  std::shared_ptr<const std::vector<Value>> items_;               // array of arrays
};

struct KeyValue {
  std::string key;
  Value value;
};

struct TensorInfo {
  std::string name;
  GgmlType type = GgmlType::kF32;
  uint32_t n_dims = 0;
  std::array<uint64_t, 4> ne = {1, 1, 1, 1};  // ne[0] is the contiguous (fastest) dimension
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  uint64_t offset = 0;  // from the start of the tensor data section
};

class GgufFile {
 public:
  // Maps the file and validates it; throws llms::Error on any problem.
  static GgufFile open(const std::filesystem::path& path);
  // Validates bytes held in memory (tests, fuzzing); the bytes are copied.
  static GgufFile from_bytes(std::span<const uint8_t> bytes);

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  uint32_t version() const;
  uint64_t alignment() const;
  uint64_t data_offset() const;  // absolute offset of the tensor data section
  uint64_t file_size() const;

  const std::vector<KeyValue>& metadata() const;
  const Value* find(std::string_view key) const;

  // Typed look-ups: std::nullopt when the key is absent; throw Error(kInvalidFile) naming the key
  // when it is present with an incompatible type.
  std::optional<uint64_t> get_uint(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<std::vector<std::string>> get_strings(std::string_view key) const;
  std::optional<std::vector<double>> get_floats(std::string_view key) const;
  std::optional<std::vector<int64_t>> get_ints(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const;
  const TensorInfo* find_tensor(std::string_view name) const;
  std::span<const uint8_t> tensor_data(const TensorInfo& tensor) const;

 private:
  friend class GgufParser;
  struct Impl;
  explicit GgufFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace llms::gguf
