#include "kv/kv_budget.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace llms::kv {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

TEST(KvBudget, Llama2_70bShapeAt4kTokens) {
  // 80 layers, 64 query heads sharing 8 KV heads of 128, fp16.
  KvShape shape = KvShape::uniform(80, 8, 128);
  EXPECT_EQ(kv_bytes_per_token(shape, KvCacheType::kF16), 2ull * 80 * 8 * 128 * 2);
  EXPECT_EQ(kv_bytes_per_sequence(shape, KvCacheType::kF16, 4096), 1280 * kMiB);  // 1.25 GiB
  EXPECT_EQ(32 * kv_bytes_per_sequence(shape, KvCacheType::kF16, 4096), 40 * kGiB);
  // Without grouped-query sharing every one of the 64 heads keeps its own K and V: 8x more.
  EXPECT_EQ(kv_bytes_per_sequence(shape.with_kv_heads(64), KvCacheType::kF16, 4096), 10 * kGiB);
}

TEST(KvBudget, Qwen25_7bShapeAt8kTokens) {
  KvShape shape = KvShape::uniform(28, 4, 128);
  EXPECT_EQ(kv_bytes_per_sequence(shape, KvCacheType::kF16, 8192), 448 * kMiB);
  EXPECT_EQ(kv_bytes_per_sequence(shape, KvCacheType::kF32, 8192), 896 * kMiB);
  // 8-bit caches: half the elements' bytes plus a 2-byte scale per key and value vector
  // (28 layers x 4 heads x 2 vectors x 2 bytes per token).
  const uint64_t scales = 8192ull * 28 * 4 * 2 * 2;
  EXPECT_EQ(kv_bytes_per_sequence(shape, KvCacheType::kInt8, 8192), 224 * kMiB + scales);
  EXPECT_EQ(kv_bytes_per_sequence(shape, KvCacheType::kFp8, 8192), 224 * kMiB + scales);
  EXPECT_EQ(kv_bytes_per_token(shape, KvCacheType::kInt8), 28ull * 4 * (256 + 4));
}

TEST(KvBudget, MultiQueryAttentionKeepsOneHead) {
  KvShape mqa = KvShape::uniform(18, 1, 256);  // Gemma 3 270M: one KV head of 256
  EXPECT_EQ(kv_bytes_per_token(mqa, KvCacheType::kF16), 2ull * 18 * 1 * 256 * 2);
}

TEST(KvBudget, SlidingWindowLayersHoldAtMostTheirWindow) {
  KvShape shape = KvShape::uniform(6, 1, 256);
  for (int i = 0; i < 5; ++i) shape.layers[i].window = 512;  // 5 local layers, 1 global
  const uint64_t per_layer_token = 2 * 256 * 2;
  EXPECT_EQ(kv_bytes_per_sequence(shape, KvCacheType::kF16, 100), 6 * 100 * per_layer_token);
  EXPECT_EQ(kv_bytes_per_sequence(shape, KvCacheType::kF16, 8192),
            (5 * 512 + 8192) * per_layer_token);
}

TEST(KvBudget, DifferentKeyAndValueWidths) {
  KvShape shape;
  shape.layers.push_back(KvLayer{2, 192, 128, 0});
  EXPECT_EQ(kv_bytes_per_token(shape, KvCacheType::kF16), (192 + 128) * 2 * 2);
}

TEST(KvBudget, MaxSequencesAfterWeights) {
  KvShape shape = KvShape::uniform(28, 4, 128);  // 448 MiB per 8k sequence at fp16
  EXPECT_EQ(max_sequences(shape, KvCacheType::kF16, 8192, 24 * kGiB, 15 * kGiB),
            (9 * kGiB) / (448 * kMiB));
  EXPECT_EQ(max_sequences(shape, KvCacheType::kF16, 8192, 24 * kGiB, 24 * kGiB), 0u);
  EXPECT_EQ(max_sequences(shape, KvCacheType::kF16, 8192, 1 * kGiB, 2 * kGiB), 0u);
}

TEST(KvBudget, OverflowIsAnError) {
  KvShape shape = KvShape::uniform(1, 1ull << 40, 1ull << 20);
  EXPECT_THROW(kv_bytes_per_sequence(shape, KvCacheType::kF32, 1ull << 20), Error);
}

TEST(KvBudget, CacheTypeNames) {
  EXPECT_EQ(kv_cache_type_from_name("f16"), KvCacheType::kF16);
  EXPECT_EQ(kv_cache_type_from_name("fp8"), KvCacheType::kFp8);
  EXPECT_EQ(kv_cache_type_from_name("int8"), KvCacheType::kInt8);
  EXPECT_EQ(kv_cache_type_from_name("fp8_e4m3"), KvCacheType::kFp8);
  EXPECT_FALSE(kv_cache_type_from_name("f17").has_value());
  // Types the engine cannot store are not names: e5m2 is not e4m3, bf16 is not stored.
  EXPECT_FALSE(kv_cache_type_from_name("fp8_e5m2").has_value());
  EXPECT_FALSE(kv_cache_type_from_name("bf16").has_value());
  EXPECT_EQ(kv_element_bytes(KvCacheType::kF32), 4u);
  EXPECT_EQ(kv_scale_bytes(KvCacheType::kInt8), 2u);
  EXPECT_EQ(kv_scale_bytes(KvCacheType::kF16), 0u);
  for (auto t : {KvCacheType::kF32, KvCacheType::kF16, KvCacheType::kInt8, KvCacheType::kFp8}) {
    EXPECT_EQ(kv_cache_type_from_name(kv_cache_type_name(t)), t);
    EXPECT_NE(kv_cache_type_names().find(kv_cache_type_name(t)), std::string_view::npos);
  }
}

}  // namespace
}  // namespace llms::kv
