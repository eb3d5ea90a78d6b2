// ReservedArray: zero until written, writable to the last element whichever pages back it (huge
// pages past the first 2 MiB are only advice), and a clear error for a capacity that cannot be
// mapped.
#include "util/reserved_array.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "util/error.h"

namespace llms {
namespace {

struct Pair {
  int32_t a;
  int32_t b;
};

TEST(ReservedArray, ZeroUntilWrittenAndStable) {
  for (auto pages : {ReservedMemory::Pages::kOrdinary, ReservedMemory::Pages::kHugePastFirst}) {
    const size_t n = 3 * ReservedMemory::kHugePage / sizeof(Pair) + 5;
    ReservedArray<Pair> a(n, pages);
    ASSERT_EQ(a.capacity(), n);
    for (size_t i = 0; i < n; i += 512) EXPECT_EQ(a[i].a | a[i].b, 0) << i;
    for (size_t i = 0; i < n; ++i) a[i] = Pair{static_cast<int32_t>(i), -1};
    EXPECT_EQ(a[n - 1].a, static_cast<int32_t>(n - 1));
    EXPECT_EQ(a[n / 2].b, -1);
  }
}

TEST(ReservedArray, EmptyAndImpossibleCapacities) {
  ReservedArray<int32_t> empty(0);
  EXPECT_EQ(empty.capacity(), 0u);
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_THROW(ReservedArray<Pair>(SIZE_MAX / 4), Error);
}

}  // namespace
}  // namespace llms
