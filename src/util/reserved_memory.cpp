#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "util/error.h"
#include "util/reserved_array.h"

namespace llms {

ReservedMemory::ReservedMemory(size_t bytes, Pages pages) {
  if (bytes == 0) return;
  void* raw = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) {
    throw Error(Error::Kind::kInvalidArgument,
                "cannot reserve " + std::to_string(bytes) + " bytes: " + std::strerror(errno));
  }
  data_ = raw;
  size_ = bytes;
  if (pages == Pages::kHugePastFirst) {
    // Advice only: without THP the range keeps ordinary pages.
    const auto base = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t from = (base + kHugePage) / kHugePage * kHugePage + kHugePage;
    if (from < base + bytes)
      (void)madvise(reinterpret_cast<void*>(from), base + bytes - from, MADV_HUGEPAGE);
  }
}

ReservedMemory::~ReservedMemory() {
  if (data_ != nullptr) munmap(data_, size_);
}

}  // namespace llms
