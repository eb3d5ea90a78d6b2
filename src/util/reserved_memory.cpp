#include <sys/mman.h>

#include <algorithm>
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
  // Advice only: without THP the whole range keeps ordinary pages. With THP "always", the part
  // meant for ordinary pages is told so, or its first touch would fault in a whole 2 MiB.
  const auto base = reinterpret_cast<uintptr_t>(raw);
  uintptr_t huge_from = base + bytes;
  if (pages == Pages::kHugePastFirst) {
    // The first huge-page boundary at least 2 MiB in.
    huge_from = std::min(huge_from, (base + 2 * kHugePage - 1) / kHugePage * kHugePage);
    if (huge_from < base + bytes) {
      (void)madvise(reinterpret_cast<void*>(huge_from), base + bytes - huge_from, MADV_HUGEPAGE);
    }
  }
  (void)madvise(raw, huge_from - base, MADV_NOHUGEPAGE);
}

ReservedMemory::~ReservedMemory() {
  if (data_ != nullptr) munmap(data_, size_);
}

}  // namespace llms
