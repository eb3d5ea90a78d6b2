// gguf/safetensors_file: validated, read-only views of safetensors files, single or sharded.
//
// Format: an 8-byte little-endian u64 N, then N bytes of UTF-8 JSON (one object), then the data
// buffer. Every key of the object except "__metadata__" (a string -> string map) names a tensor:
// {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, offsets relative to the data
// buffer, shape row-major (shape.back() is the contiguous dimension: the reverse of GGUF's ne).
//
// Contract: open() / from_bytes() either return a file whose every tensor has a known dtype, a
// shape whose element and byte counts fit in 64 bits, and a byte range that lies inside the data
// buffer, matches shape x dtype size exactly and overlaps no other tensor; or they throw
// llms::Error (kInvalidFile, or kUnsupported for dtypes we know of but do not read) with a
// message naming the tensor or field. The header is parsed by a streaming reader that never
// builds a JSON tree, limits nesting depth and tensor rank, and refuses duplicate keys (so a name
// cannot silently mean two tensors). Gaps between tensors and trailing bytes are allowed.
//
// Tensor data spans point into the file's bytes and live as long as the SafetensorsFile. The data
// buffer starts at 8 + N, which the official writer pads to a multiple of 8, but a hostile or
// foreign file may not: readers that need aligned access must check or copy.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace llms::gguf {

// Element types of safetensors, named as in the file.
enum class Dtype : uint8_t {
  kBool,
  kU8,
  kI8,
  kF8_E5M2,
  kF8_E4M3,
  kF8_E8M0,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kF64,
  kI64,
  kU64,
  kC64,  // complex: two F32
};

std::string_view dtype_name(Dtype dtype);  // "F32", "BF16", "F8_E4M3", ...
std::optional<Dtype> dtype_from_name(std::string_view name);
uint32_t dtype_size(Dtype dtype);  // bytes per element
std::span<const Dtype> all_dtypes();

// Hard limits on what a header may contain (far above any real file).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = uint64_t{100} << 20;  // 100 MiB
inline constexpr size_t kMaxSafetensorsJsonDepth = 32;
inline constexpr size_t kMaxSafetensorsRank = 32;

struct SafetensorsTensor {
  std::string name;
  Dtype dtype = Dtype::kF32;
  std::vector<uint64_t> shape;  // row-major; empty for a scalar
  uint64_t n_elements = 0;      // product of shape (1 for a scalar)
  uint64_t n_bytes = 0;         // n_elements * dtype_size(dtype)
  uint64_t offset = 0;          // from the start of the data buffer
};

class SafetensorsFile {
 public:
  // Maps the file read-only and validates it; throws llms::Error naming the path and problem.
  static SafetensorsFile open(const std::filesystem::path& path);
  // Validates bytes held in memory (tests, fuzzing); the bytes are copied. `source` names them
  // in error messages.
  static SafetensorsFile from_bytes(std::span<const uint8_t> bytes,
                                    std::string_view source = "<memory>");

  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  ~SafetensorsFile();

  const std::string& source() const;  // the path, or the label given to from_bytes
  uint64_t file_size() const;
  uint64_t header_size() const;  // N
  uint64_t data_offset() const;  // 8 + N: absolute offset of the data buffer
  uint64_t data_size() const;    // bytes in the data buffer

  // Sorted by name; names are unique. Pointers into this vector stay valid while the file
  // lives, including across moves of the SafetensorsFile.
  const std::vector<SafetensorsTensor>& tensors() const;
  const SafetensorsTensor* find_tensor(std::string_view name) const;  // nullptr when absent
  // The tensor's bytes inside the file. Throws kInvalidArgument when `tensor` does not lie
  // inside this file's data buffer (e.g. it came from another file).
  std::span<const uint8_t> tensor_data(const SafetensorsTensor& tensor) const;

  const std::map<std::string, std::string>& metadata() const;  // "__metadata__", may be empty

 private:
  struct Impl;
  explicit SafetensorsFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Safetensors weights split over shard files by model.safetensors.index.json
// ({"weight_map": {tensor: shard file name}}), or a single file seen through the same interface.
//
// Contract: every shard is opened (and validated) once; every tensor of the weight map exists in
// the shard it names; shard names are plain file names in the index's directory (no '/', '\',
// '..', control characters), so an index cannot reach outside it. The tensor set is exactly the
// weight map (tensors a shard holds but the map does not name are not visible); for a single
// file it is every tensor of the file.
class ShardedSafetensors {
 public:
  // `path` is a directory (holding model.safetensors.index.json, else model.safetensors), an
  // index .json file, or a single .safetensors file.
  static ShardedSafetensors open(const std::filesystem::path& path);

  ShardedSafetensors(ShardedSafetensors&&) noexcept;
  ShardedSafetensors& operator=(ShardedSafetensors&&) noexcept;
  ~ShardedSafetensors();

  struct Entry {
    const SafetensorsTensor* tensor;  // owned by shard(shard_index)
    size_t shard_index;
  };

  bool is_sharded() const;  // true when read through an index file
  size_t n_shards() const;
  const SafetensorsFile& shard(size_t index) const;
  const std::filesystem::path& shard_path(size_t index) const;

  const std::vector<Entry>& tensors() const;                          // sorted by tensor name
  const SafetensorsTensor* find_tensor(std::string_view name) const;  // nullptr when absent
  // Bytes of a tensor returned by find_tensor()/tensors(); throws kInvalidArgument otherwise.
  std::span<const uint8_t> tensor_data(const SafetensorsTensor& tensor) const;

 private:
  struct Impl;
  explicit ShardedSafetensors(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace llms::gguf
