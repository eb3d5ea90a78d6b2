// kv::KvGroupLayout: layers grouped by window into groups of equal size, and the per-sequence
// block bound of a hybrid cache.
#include "kv/kv_groups.h"

#include <gtest/gtest.h>

#include <vector>

#include "kv/kv_budget.h"
#include "util/error.h"

namespace llms::kv {
namespace {

std::vector<int64_t> gemma3_windows(int n_layers, int64_t window) {
  std::vector<int64_t> w(static_cast<size_t>(n_layers), window);
  for (int l = 5; l < n_layers; l += 6) w[static_cast<size_t>(l)] = 0;  // every 6th is global
  return w;
}

TEST(KvGroupLayout, SingleHoldsEveryLayerInOneFullGroup) {
  const KvGroupLayout l = KvGroupLayout::single(4);
  EXPECT_EQ(l.n_groups(), 1);
  EXPECT_EQ(l.members(), 4);
  EXPECT_FALSE(l.has_window());
  for (int32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(l.group_of(i), 0);
    EXPECT_EQ(l.member_of(i), i);
  }
}

TEST(KvGroupLayout, Gemma3_270mHasOneGlobalAndFiveSlidingGroupsOfThree) {
  const KvGroupLayout l = KvGroupLayout::from_windows(gemma3_windows(18, 512));
  EXPECT_EQ(l.members(), 3);
  ASSERT_EQ(l.n_groups(), 6);
  EXPECT_EQ(l.window(0), 0);  // full attention first
  for (int32_t g = 1; g < 6; ++g) EXPECT_EQ(l.window(g), 512);
  for (int32_t layer : {5, 11, 17}) EXPECT_EQ(l.group_of(layer), 0);
  // Every (group, member) pair is used by exactly one layer.
  std::vector<int> seen(18, 0);
  for (int32_t layer = 0; layer < 18; ++layer) {
    EXPECT_EQ(l.window(l.group_of(layer)), layer % 6 == 5 ? 0 : 512);
    ++seen[static_cast<size_t>(l.group_of(layer) * 3 + l.member_of(layer))];
  }
  for (int n : seen) EXPECT_EQ(n, 1);
}

TEST(KvGroupLayout, UnevenCountsLeaveTheLastGroupShort) {
  // Gemma 3 1B: 26 layers, 4 global, 22 sliding: groups of 4, the sixth sliding one holds 2.
  const KvGroupLayout l = KvGroupLayout::from_windows(gemma3_windows(26, 512));
  EXPECT_EQ(l.members(), 4);
  EXPECT_EQ(l.n_groups(), 1 + 6);
  int in_last = 0;
  for (int32_t layer = 0; layer < 26; ++layer) in_last += l.group_of(layer) == 6 ? 1 : 0;
  EXPECT_EQ(in_last, 2);
}

TEST(KvGroupLayout, OneWindowForEveryLayerIsOneGroup) {
  const std::vector<int64_t> all_sliding(8, 4096);
  const KvGroupLayout l = KvGroupLayout::from_windows(all_sliding);
  EXPECT_EQ(l.n_groups(), 1);
  EXPECT_EQ(l.members(), 8);
  EXPECT_TRUE(l.has_window());
}

TEST(KvGroupLayout, RefusesNoLayersAndNegativeWindows) {
  EXPECT_THROW(KvGroupLayout::from_windows({}), Error);
  const std::vector<int64_t> bad = {0, -1};
  EXPECT_THROW(KvGroupLayout::from_windows(bad), Error);
}

TEST(KvGroupLayout, BlocksForSequenceBoundsWindowedGroups) {
  const std::vector<int64_t> windows = {0, 32, 32};
  // 1000 tokens in blocks of 16: 63 for the full group; a window of 32 read from a 1-token step
  // spans 32 positions, at most 3 blocks.
  EXPECT_EQ(blocks_for_sequence(windows, {}, 16, 1000, 1), 63 + 2 * 3);
  // A 100-token step reads 131 positions: at most 10 blocks.
  EXPECT_EQ(blocks_for_sequence(windows, {}, 16, 1000, 100), 63 + 2 * 10);
  // Short sequences never need more than their own blocks.
  EXPECT_EQ(blocks_for_sequence(windows, {}, 16, 20, 100), 3 * 2);
  const std::vector<int64_t> full = {0};
  EXPECT_EQ(blocks_for_sequence(full, {}, 16, 1000, 1000), 63);
}

// What `inspect` prints for a sequence (kv_bytes_per_sequence: sliding layers hold their window)
// is what the hybrid pool holds for it while it decodes, up to the window's partial blocks:
// Gemma 3 270M's shape (18 layers, 1 KV head of 256, window 512) at 4,096 tokens in f16.
TEST(KvGroupLayout, PoolCostOfAGemma3SequenceIsWhatInspectSays) {
  const std::vector<int64_t> windows = gemma3_windows(18, 512);
  KvShape shape = KvShape::uniform(18, 1, 256);
  for (size_t l = 0; l < 18; ++l) shape.layers[l].window = static_cast<uint64_t>(windows[l]);
  const uint64_t inspect_bytes = kv_bytes_per_sequence(shape, KvCacheType::kF16, 4096);
  EXPECT_EQ(inspect_bytes, uint64_t{3 * 4096 + 15 * 512} * 1024);  // 19.5 MiB

  const KvGroupLayout layout = KvGroupLayout::from_windows(windows);
  const uint64_t page_bytes = uint64_t(layout.members()) * 16 * (256 + 256) * 2;
  const auto pages =
      static_cast<uint64_t>(blocks_for_sequence(layout.windows(), layout.sinks(), 16, 4096, 1));
  EXPECT_EQ(pages, 256u + 5u * 33u);
  const double ratio = static_cast<double>(pages * page_bytes) / static_cast<double>(inspect_bytes);
  EXPECT_GE(ratio, 1.0);
  EXPECT_LT(ratio, 1.02);
  // Keeping every layer for the whole context costs 3.7x as much.
  const uint64_t whole = kv_bytes_per_token(shape, KvCacheType::kF16) * 4096;
  EXPECT_NEAR(static_cast<double>(whole) / static_cast<double>(inspect_bytes), 3.69, 0.01);
}

}  // namespace
}  // namespace llms::kv
