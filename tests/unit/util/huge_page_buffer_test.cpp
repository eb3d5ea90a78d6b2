// HugePageBuffer: 2 MiB-aligned, zero until written, writable to the last byte, movable, empty
// for size 0, a clear error for a size that cannot be mapped. Whether the kernel actually backs
// it with huge pages is its choice (THP may be off), so that is not asserted.
#include "util/huge_page_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

#include "util/error.h"

namespace llms {
namespace {

TEST(HugePageBuffer, AlignedZeroFilledAndWritable) {
  for (size_t bytes : {size_t{1}, size_t{4096}, HugePageBuffer::kHugePage - 1,
                       HugePageBuffer::kHugePage + 17, 3 * HugePageBuffer::kHugePage}) {
    HugePageBuffer b(bytes);
    ASSERT_NE(b.data(), nullptr);
    EXPECT_EQ(b.size(), bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % HugePageBuffer::kHugePage, 0u) << bytes;
    // Every 4 KiB page reads zero (sampled at its start), and the last byte is ours to write.
    for (size_t off = 0; off < bytes; off += 4096) EXPECT_EQ(b.data()[off], 0) << off;
    EXPECT_EQ(b.data()[bytes - 1], 0);
    b.data()[0] = 1;
    b.data()[bytes - 1] = 2;
    EXPECT_EQ(b.data()[bytes - 1], 2);
  }
}

TEST(HugePageBuffer, ZeroSizeIsEmpty) {
  HugePageBuffer b(0);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.size(), 0u);
  HugePageBuffer d;
  EXPECT_EQ(d.data(), nullptr);
}

TEST(HugePageBuffer, MovesOwnership) {
  HugePageBuffer a(5000);
  a.data()[4999] = 7;
  uint8_t* p = a.data();
  HugePageBuffer b(std::move(a));
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is API
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.data()[4999], 7);
  HugePageBuffer c(100);
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.size(), 5000u);
  EXPECT_EQ(b.data(), nullptr);  // NOLINT(bugprone-use-after-move)
}

TEST(HugePageBuffer, ImpossibleSizeIsAClearError) {
  try {
    HugePageBuffer b(SIZE_MAX - 5);
    FAIL() << "an impossible size was mapped";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("cannot reserve"), std::string::npos) << e.what();
  }
  // Far beyond any address space but not overflowing: mmap itself refuses (MAP_NORESERVE does
  // not make 2^62 bytes mappable on x86-64's 47-bit user space).
  EXPECT_THROW(HugePageBuffer(size_t{1} << 62), Error);
}

}  // namespace
}  // namespace llms
