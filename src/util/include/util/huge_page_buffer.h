// util/huge_page_buffer: a large zero-filled anonymous allocation that asks the kernel for
// transparent huge pages (RAII, movable).
//
// Why: decode streams hundreds of MB of repacked weights and KV blocks; with 4 KiB pages every
// 4 KiB of a stream is a new TLB entry (a page walk, and the end of what a hardware prefetcher
// follows), with 2 MiB pages one entry covers 512 times as much. Linux with THP in "madvise"
// mode (Debian's default) gives huge pages only to ranges marked MADV_HUGEPAGE before they are
// first touched, which std::vector cannot do.
//
// Contract: data() is 2 MiB-aligned, holds size() bytes, reads as zero until written, and costs
// no resident memory until touched (pages are faulted in on first use). Where the kernel has no
// THP the buffer works the same on ordinary pages. A zero size allocates nothing (data() is
// null). Throws llms::Error(kInvalidArgument) when the memory cannot be reserved.
#pragma once

#include <cstddef>
#include <cstdint>

namespace llms {

class HugePageBuffer {
 public:
  static constexpr size_t kHugePage = size_t{2} << 20;

  HugePageBuffer() = default;
  explicit HugePageBuffer(size_t bytes);
  HugePageBuffer(HugePageBuffer&& other) noexcept;
  HugePageBuffer& operator=(HugePageBuffer&& other) noexcept;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;
  ~HugePageBuffer();

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void reset() noexcept;

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // bytes mapped from data_ (size_ rounded up to whole huge pages)
};

}  // namespace llms
