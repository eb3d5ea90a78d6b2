// KvStorage: f32 and f16 element types, the accessors that refuse the other type, the types it
// cannot store refused by name, block addressing, and copy-on-write copies in both types.
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

TEST(KvStorage, TypesItCannotStoreAreRefusedByName) {
  const ModelConfig c = two_layer_config();
  for (auto t : {kv::KvCacheType::kBF16, kv::KvCacheType::kInt8, kv::KvCacheType::kFp8}) {
    try {
      KvStorage s(c, 16, 1, t);
      FAIL() << "stored " << kv::kv_cache_type_name(t);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(kv::kv_cache_type_name(t))),
                std::string::npos)
          << e.what();
    }
    EXPECT_THROW(KvStorage::bytes_per_block(c, 16, t), Error);
  }
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
