// util/reserved_array: a fixed-capacity array whose memory is reserved up front and committed
// page by page as it is touched.
//
// Why: an automaton built on demand grows while other threads read it. A std::vector moves its
// elements when it grows; this array never moves, so a reader may index any element another
// thread published (through the owner's own release/acquire) while more are being written, and
// indexing is one multiply-add, as in a flat vector. The whole capacity is mapped at once with
// MAP_NORESERVE: only the pages written become resident, so a generous capacity costs address
// space, not memory.
//
// Contract: T is trivially copyable and an all-zero T is its initial value (elements read as
// zero until written). Ordinary pages for the first 2 MiB (most arrays stay small), and where
// asked transparent huge pages past them: an array that grows large then takes one page fault
// per 2 MiB instead of one per 4 KiB. Throws llms::Error(kInvalidArgument) when the address
// space cannot be reserved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace llms {

// The untyped mapping behind ReservedArray.
class ReservedMemory {
 public:
  static constexpr size_t kHugePage = size_t{2} << 20;
  enum class Pages : uint8_t { kOrdinary, kHugePastFirst };

  ReservedMemory() = default;
  explicit ReservedMemory(size_t bytes, Pages pages = Pages::kOrdinary);
  ReservedMemory(const ReservedMemory&) = delete;
  ReservedMemory& operator=(const ReservedMemory&) = delete;
  ~ReservedMemory();

  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

template <typename T>
class ReservedArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  explicit ReservedArray(size_t capacity,
                         ReservedMemory::Pages pages = ReservedMemory::Pages::kOrdinary)
      : memory_(bytes_for(capacity), pages),
        data_(static_cast<T*>(memory_.data())),
        capacity_(capacity) {}

  T& operator[](size_t i) const { return data_[i]; }
  T* data() const { return data_; }
  size_t capacity() const { return capacity_; }

 private:
  static size_t bytes_for(size_t capacity) {
    // An impossible size makes the mapping fail with a clear error instead of wrapping around.
    return capacity > SIZE_MAX / sizeof(T) ? SIZE_MAX : capacity * sizeof(T);
  }

  ReservedMemory memory_;
  T* data_;
  size_t capacity_;
};

}  // namespace llms
