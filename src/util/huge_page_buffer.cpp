#include "util/huge_page_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "util/error.h"

namespace llms {

HugePageBuffer::HugePageBuffer(size_t bytes) {
  if (bytes == 0) return;
  if (bytes > SIZE_MAX - 2 * kHugePage) {
    throw Error(Error::Kind::kInvalidArgument,
                "cannot reserve " + std::to_string(bytes) + " bytes: size overflows");
  }
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  // Map one huge page more than needed, then unmap the unaligned head and the tail, so the
  // range starts on a 2 MiB boundary (mmap itself only promises 4 KiB alignment).
  const size_t span = rounded + kHugePage;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) {
    throw Error(Error::Kind::kInvalidArgument,
                "cannot reserve " + std::to_string(bytes) + " bytes: " + std::strerror(errno));
  }
  const auto base = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (base + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > base) munmap(raw, aligned - base);
  const uintptr_t end = base + span;
  if (end > aligned + rounded)
    munmap(reinterpret_cast<void*>(aligned + rounded), end - aligned - rounded);
  data_ = reinterpret_cast<uint8_t*>(aligned);
  size_ = bytes;
  mapped_ = rounded;
  // Advice only: a kernel without THP refuses it and the buffer keeps ordinary pages.
  (void)madvise(data_, mapped_, MADV_HUGEPAGE);
}

HugePageBuffer::HugePageBuffer(HugePageBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

HugePageBuffer::~HugePageBuffer() { reset(); }

void HugePageBuffer::reset() noexcept {
  if (data_ != nullptr) munmap(data_, mapped_);
  data_ = nullptr;
  size_ = 0;
  mapped_ = 0;
}

}  // namespace llms
