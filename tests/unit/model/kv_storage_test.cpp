// KvStorage: f32, f16, int8 and fp8 element types (with the 8-bit types' scales), the accessors
// that refuse another type, block addressing, and copy-on-write and slot copies.
#include "model/kv_storage.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "util/error.h"

namespace llms::model {
namespace {

ModelConfig two_layer_config() {
  ModelConfig c;
  c.n_layers = 2;
  c.n_kv_heads = {2, 1};
  c.head_dim_k = 8;
  c.head_dim_v = 4;
  return c;
}

TEST(KvStorage, F16HalvesTheBytesOfF32) {
  const ModelConfig c = two_layer_config();
  // Per token: layer 0 2 x (8 + 4), layer 1 1 x (8 + 4) = 36 elements.
  EXPECT_EQ(KvStorage::bytes_per_block(c, 16, kv::KvCacheType::kF32), 36u * 4 * 16);
  EXPECT_EQ(KvStorage::bytes_per_block(c, 16, kv::KvCacheType::kF16), 36u * 2 * 16);
  KvStorage f32(c, 16, 3, kv::KvCacheType::kF32);
  KvStorage f16(c, 16, 3, kv::KvCacheType::kF16);
  EXPECT_EQ(f32.bytes(), 3 * KvStorage::bytes_per_block(c, 16, kv::KvCacheType::kF32));
  EXPECT_EQ(f16.bytes(), 3 * KvStorage::bytes_per_block(c, 16, kv::KvCacheType::kF16));
  EXPECT_EQ(f16.type(), kv::KvCacheType::kF16);
}

TEST(KvStorage, AccessorsOfTheOtherTypeThrow) {
  const ModelConfig c = two_layer_config();
  KvStorage f32(c, 4, 2, kv::KvCacheType::kF32);
  KvStorage f16(c, 4, 2, kv::KvCacheType::kF16);
  EXPECT_NO_THROW(f32.key<float>(0, 1, 1));
  EXPECT_NO_THROW(f16.value<uint16_t>(1, 1, 0));
  try {
    f32.key<uint16_t>(0, 0, 0);
    FAIL() << "an f32 store was read as f16";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds f32"), std::string::npos) << e.what();
  }
  EXPECT_THROW(f16.value<float>(0, 0, 0), Error);
}

TEST(KvStorage, EightBitTypesKeepAScalePerVector) {
  const ModelConfig c = two_layer_config();
  // Per token: 36 one-byte elements plus a 2-byte scale per key and per value of each of the 3
  // (layer, head) pairs.
  for (auto t : {kv::KvCacheType::kInt8, kv::KvCacheType::kFp8}) {
    EXPECT_EQ(KvStorage::bytes_per_block(c, 16, t), (36u + 3 * 2 * 2) * 16);
    KvStorage s(c, 16, 3, t);
    EXPECT_TRUE(s.quantized());
    EXPECT_EQ(s.bytes(), 3 * KvStorage::bytes_per_block(c, 16, t));
  }
  KvStorage i8(c, 4, 2, kv::KvCacheType::kInt8);
  KvStorage f8(c, 4, 2, kv::KvCacheType::kFp8);
  KvStorage f16(c, 4, 2, kv::KvCacheType::kF16);
  EXPECT_NO_THROW(i8.key<int8_t>(1, 1, 0));
  EXPECT_NO_THROW(f8.value<uint8_t>(0, 1, 1));
  EXPECT_THROW(i8.key<uint8_t>(0, 0, 0), Error);
  EXPECT_THROW(f8.key<int8_t>(0, 0, 0), Error);
  EXPECT_FALSE(f16.quantized());
  EXPECT_THROW(f16.key_scales(0, 0, 0), Error);
  EXPECT_EQ(i8.value_scales(0, 1, 1), i8.key_scales(0, 1, 1) + 4);
}

TEST(KvStorage, EightBitCopiesCarryTheirScales) {
  const ModelConfig c = two_layer_config();
  const int32_t bs = 4;
  KvStorage s(c, bs, 3, kv::KvCacheType::kInt8);
  for (size_t layer = 0; layer < 2; ++layer) {
    for (int32_t b = 0; b < 3; ++b) {
      for (uint64_t h = 0; h < c.n_kv_heads[layer]; ++h) {
        for (int i = 0; i < bs; ++i) {
          s.key_scales(layer, b, h)[i] = static_cast<uint16_t>(1000 * layer + 100 * b + 10 * h + i);
          s.value_scales(layer, b, h)[i] = static_cast<uint16_t>(5000 + 100 * b + 10 * h + i);
          s.value<int8_t>(layer, b, h)[i * 4] = static_cast<int8_t>(10 * b + i);
        }
      }
    }
  }
  s.copy_block(2, 0);
  EXPECT_EQ(s.key_scales(1, 0, 0)[3], 1000 + 200 + 3);
  EXPECT_EQ(s.value_scales(0, 0, 1)[2], 5000 + 200 + 10 + 2);
  EXPECT_EQ(s.value<int8_t>(0, 0, 1)[1 * 4], 21);
  EXPECT_EQ(s.key_scales(0, 1, 0)[0], 100);  // other blocks untouched
  s.copy_slot(kv::SlotCopy{1, 3, 2, 0});     // block 1 slot 3 -> block 2 slot 0
  EXPECT_EQ(s.key_scales(0, 2, 1)[0], 100 + 10 + 3);
  EXPECT_EQ(s.value_scales(1, 2, 0)[0], 5000 + 100 + 3);
  EXPECT_EQ(s.value<int8_t>(1, 2, 0)[0], 13);
  EXPECT_EQ(s.key_scales(0, 2, 1)[1], 200 + 10 + 1);  // the slot beside it untouched
}

TEST(KvStorage, BlocksAndHeadsAreDisjointAndCopiesAreWhole) {
  const ModelConfig c = two_layer_config();
  const int32_t bs = 4;
  KvStorage s(c, bs, 3, kv::KvCacheType::kF16);
  // Fill every (layer, block, head) with its own value; none may overwrite another.
  auto tag = [](size_t layer, int32_t block, uint64_t head, bool value) {
    return static_cast<uint16_t>(1000 * layer + 100 * block + 10 * head + (value ? 1 : 0));
  };
  for (size_t layer = 0; layer < 2; ++layer) {
    for (int32_t b = 0; b < 3; ++b) {
      for (uint64_t h = 0; h < c.n_kv_heads[layer]; ++h) {
        for (int i = 0; i < bs * 8; ++i) s.key<uint16_t>(layer, b, h)[i] = tag(layer, b, h, false);
        for (int i = 0; i < bs * 4; ++i) s.value<uint16_t>(layer, b, h)[i] = tag(layer, b, h, true);
      }
    }
  }
  s.copy_block(2, 0);
  for (size_t layer = 0; layer < 2; ++layer) {
    for (int32_t b = 0; b < 3; ++b) {
      const int32_t from = b == 0 ? 2 : b;
      for (uint64_t h = 0; h < c.n_kv_heads[layer]; ++h) {
        for (int i = 0; i < bs * 8; ++i) {
          ASSERT_EQ(s.key<uint16_t>(layer, b, h)[i], tag(layer, from, h, false));
        }
        for (int i = 0; i < bs * 4; ++i) {
          ASSERT_EQ(s.value<uint16_t>(layer, b, h)[i], tag(layer, from, h, true));
        }
      }
    }
  }
  EXPECT_THROW(s.copy_block(0, 3), Error);
}

}  // namespace
}  // namespace llms::model
