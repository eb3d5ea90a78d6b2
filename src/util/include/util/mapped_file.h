// util/mapped_file: a read-only memory map of a whole file (RAII).
//
// Model weights are used in place from the map, so the map outlives every view handed out from
// it; owners keep the MappedFile alive (it is movable, not copyable). An empty file maps to an
// empty span without calling mmap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

namespace llms {

class MappedFile {
 public:
  // Throws llms::Error (kIo / kNotFound) naming the path and the OS reason.
  static MappedFile open(const std::filesystem::path& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  uint64_t size() const { return size_; }

 private:
  MappedFile(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  void reset() noexcept;

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace llms
