// The quant.h entry points: which types they take, how they refuse bad sizes and types, and
// the block structs against gguf's type table; plus hand-built blocks decoded from first
// principles (independent of the gguf-py goldens).
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "quant/blocks.h"
#include "quant/float_convert.h"
#include "quant/k_blocks.h"
#include "quant/quant.h"
#include "util/error.h"

namespace llms::quant {
namespace {

using gguf::GgmlType;

// Runs `fn`, expecting llms::Error of `kind` whose message contains every one of `parts`.
template <typename Fn>
void expect_error(Fn fn, Error::Kind kind, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(kind)) << e.what();
    for (const std::string& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "message \"" << e.what() << "\" lacks \"" << part << "\"";
    }
  }
}

TEST(QuantDispatch, BlockStructsMatchTheGgufTypeTable) {
  const auto size_of = [](GgmlType type) { return gguf::ggml_type_info(type).type_size; };
  EXPECT_EQ(sizeof(BlockQ4_0), size_of(GgmlType::kQ4_0));
  EXPECT_EQ(sizeof(BlockQ4_1), size_of(GgmlType::kQ4_1));
  EXPECT_EQ(sizeof(BlockQ5_0), size_of(GgmlType::kQ5_0));
  EXPECT_EQ(sizeof(BlockQ5_1), size_of(GgmlType::kQ5_1));
  EXPECT_EQ(sizeof(BlockQ8_0), size_of(GgmlType::kQ8_0));
  EXPECT_EQ(sizeof(BlockQ8_1), size_of(GgmlType::kQ8_1));
  EXPECT_EQ(sizeof(BlockQ2_K), size_of(GgmlType::kQ2_K));
  EXPECT_EQ(sizeof(BlockQ3_K), size_of(GgmlType::kQ3_K));
  EXPECT_EQ(sizeof(BlockQ4_K), size_of(GgmlType::kQ4_K));
  EXPECT_EQ(sizeof(BlockQ5_K), size_of(GgmlType::kQ5_K));
  EXPECT_EQ(sizeof(BlockQ6_K), size_of(GgmlType::kQ6_K));
  EXPECT_EQ(sizeof(BlockQ8_K), size_of(GgmlType::kQ8_K));
  for (GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                        GgmlType::kQ8_0, GgmlType::kQ8_1}) {
    EXPECT_EQ(gguf::ggml_type_info(type).block_size, static_cast<uint32_t>(kQK));
  }
  for (GgmlType type : {GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K,
                        GgmlType::kQ6_K, GgmlType::kQ8_K}) {
    EXPECT_EQ(gguf::ggml_type_info(type).block_size, static_cast<uint32_t>(kQK_K));
  }
}

TEST(QuantDispatch, SupportedTypes) {
  const std::set<GgmlType> supported = {
      GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ4_0, GgmlType::kQ4_1,
      GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0, GgmlType::kQ8_1, GgmlType::kQ2_K,
      GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kQ8_K};
  for (const auto& info : gguf::all_ggml_types()) {
    const bool expected = supported.count(info.type) > 0;
    EXPECT_EQ(can_dequantize(info.type), expected) << info.name;
    EXPECT_EQ(can_quantize(info.type), expected) << info.name;
  }
  EXPECT_FALSE(can_dequantize(static_cast<GgmlType>(99)));
  EXPECT_FALSE(can_quantize(static_cast<GgmlType>(99)));
}

TEST(QuantDispatch, RefusesUnsupportedTypesByName) {
  std::vector<float> floats(256);
  std::vector<uint8_t> bytes(4096);
  expect_error([&] { quantize_row(GgmlType::kIQ2_XXS, floats.data(), bytes.data(), 256); },
               Error::Kind::kUnsupported, {"IQ2_XXS", "quantization"});
  expect_error([&] { dequantize_row(GgmlType::kIQ4_NL, bytes.data(), floats.data(), 32); },
               Error::Kind::kUnsupported, {"IQ4_NL", "dequantization"});
  expect_error([&] { dequantize_row(GgmlType::kI32, bytes.data(), floats.data(), 4); },
               Error::Kind::kUnsupported, {"I32"});
  expect_error([&] { dequantize_row(static_cast<GgmlType>(99), bytes.data(), floats.data(), 32); },
               Error::Kind::kUnsupported, {"99"});
  expect_error([&] { quantized_row_bytes(static_cast<GgmlType>(4), 32); },
               Error::Kind::kUnsupported, {"4"});
}

TEST(QuantDispatch, RefusesPartialBlocksAndNegativeCounts) {
  std::vector<float> floats(512);
  std::vector<uint8_t> bytes(4096);
  for (int64_t n : {int64_t{1}, int64_t{31}, int64_t{33}, int64_t{-32}}) {
    expect_error([&] { dequantize_row(GgmlType::kQ4_0, bytes.data(), floats.data(), n); },
                 Error::Kind::kInvalidArgument, {"Q4_0", std::to_string(n), "32"});
    expect_error([&] { quantize_row(GgmlType::kQ8_0, floats.data(), bytes.data(), n); },
                 Error::Kind::kInvalidArgument, {"Q8_0", std::to_string(n)});
  }
  for (int64_t n : {int64_t{32}, int64_t{128}, int64_t{255}, int64_t{257}}) {
    expect_error([&] { dequantize_row(GgmlType::kQ6_K, bytes.data(), floats.data(), n); },
                 Error::Kind::kInvalidArgument, {"Q6_K", std::to_string(n), "256"});
    expect_error([&] { quantize_row(GgmlType::kQ4_K, floats.data(), bytes.data(), n); },
                 Error::Kind::kInvalidArgument, {"Q4_K", std::to_string(n), "256"});
  }
  expect_error([&] { dequantize_row(GgmlType::kF16, bytes.data(), floats.data(), -1); },
               Error::Kind::kInvalidArgument, {"F16", "-1"});
  expect_error([&] { quantized_row_bytes(GgmlType::kQ5_K, 100); }, Error::Kind::kInvalidArgument,
               {"Q5_K", "100"});
}

TEST(QuantDispatch, RefusesNullPointersButAcceptsEmptyRows) {
  std::vector<float> floats(32);
  std::vector<uint8_t> bytes(64);
  expect_error([&] { dequantize_row(GgmlType::kQ8_0, nullptr, floats.data(), 32); },
               Error::Kind::kInvalidArgument, {"Q8_0", "null"});
  expect_error([&] { quantize_row(GgmlType::kQ8_0, floats.data(), nullptr, 32); },
               Error::Kind::kInvalidArgument, {"Q8_0", "null"});
  EXPECT_NO_THROW(dequantize_row(GgmlType::kQ8_0, nullptr, nullptr, 0));
  EXPECT_NO_THROW(quantize_row(GgmlType::kQ6_K, nullptr, nullptr, 0));
}

TEST(QuantDispatch, RowBytes) {
  EXPECT_EQ(quantized_row_bytes(GgmlType::kQ4_K, 512), 288u);
  EXPECT_EQ(quantized_row_bytes(GgmlType::kQ8_0, 64), 68u);
  EXPECT_EQ(quantized_row_bytes(GgmlType::kF16, 3), 6u);
  EXPECT_EQ(quantized_row_bytes(GgmlType::kQ6_K, 0), 0u);
  // Row bytes are known for every GGML type, even ones we cannot convert.
  EXPECT_EQ(quantized_row_bytes(GgmlType::kIQ4_NL, 64), 36u);
  // 8 bytes per element: 2^63 - 1 elements do not fit 64 bits of bytes.
  expect_error([&] { quantized_row_bytes(GgmlType::kF64, std::numeric_limits<int64_t>::max()); },
               Error::Kind::kInvalidArgument, {"F64", "overflow"});
}

TEST(QuantDispatch, F32IsACopy) {
  const std::vector<float> x = {1.5f, -0.0f, 3e38f, 1e-45f};
  std::vector<unsigned char> bytes(sizeof(float) * x.size() + 1);
  quantize_row(GgmlType::kF32, x.data(), bytes.data() + 1, 4);
  std::vector<float> y(4);
  dequantize_row(GgmlType::kF32, bytes.data() + 1, y.data(), 4);
  EXPECT_EQ(std::memcmp(x.data(), y.data(), sizeof(float) * 4), 0);
}

TEST(KBlocks, ScaleMinPackingRoundTrips) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 1000; ++trial) {
    uint8_t scale[8];
    uint8_t min[8];
    for (int j = 0; j < 8; ++j) {
      scale[j] = static_cast<uint8_t>(rng() % 64);
      min[j] = static_cast<uint8_t>(rng() % 64);
    }
    uint8_t packed[kKScaleSize];
    k_pack_scale_min(scale, min, packed);
    for (int j = 0; j < 8; ++j) {
      uint8_t s;
      uint8_t m;
      k_scale_min(j, packed, &s, &m);
      ASSERT_EQ(s, scale[j]) << "sub-block " << j;
      ASSERT_EQ(m, min[j]) << "sub-block " << j;
    }
  }
}

TEST(KBlocks, HandBuiltQ4_KDecodesByTheFormula) {
  BlockQ4_K block{};
  block.d = fp32_to_fp16(0.5f);
  block.dmin = fp32_to_fp16(0.25f);
  const uint8_t scale[8] = {1, 2, 3, 4, 60, 61, 62, 63};
  const uint8_t min[8] = {0, 5, 10, 15, 33, 40, 50, 63};
  k_pack_scale_min(scale, min, block.scales);
  // Element e gets level e % 16: chunk c = e / 64, low nibble for e % 64 < 32.
  for (int e = 0; e < 256; ++e) {
    const int byte = 32 * (e / 64) + e % 32;
    const int shift = (e % 64) < 32 ? 0 : 4;
    block.qs[byte] = static_cast<uint8_t>(block.qs[byte] | ((e % 16) << shift));
  }
  std::vector<float> y(256);
  dequantize_row(GgmlType::kQ4_K, &block, y.data(), 256);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32;
    const float want = 0.5f * scale[j] * static_cast<float>(e % 16) - 0.25f * min[j];
    ASSERT_EQ(y[e], want) << "element " << e;
  }
}

TEST(KBlocks, HandBuiltQ8_KDecodesAndQuantizes) {
  BlockQ8_K block{};
  block.d = 0.125f;
  for (int e = 0; e < 256; ++e) block.qs[e] = static_cast<int8_t>(e - 128);
  std::vector<float> y(256);
  dequantize_row(GgmlType::kQ8_K, &block, y.data(), 256);
  for (int e = 0; e < 256; ++e) ASSERT_EQ(y[e], 0.125f * static_cast<float>(e - 128));

  // Quantize: the largest magnitude maps to -127 and bsums are the 16-element sums.
  std::vector<float> x(256);
  for (int e = 0; e < 256; ++e) x[e] = static_cast<float>(e % 50) * 0.1f - 2.0f;
  x[17] = 6.35f;
  BlockQ8_K q{};
  quantize_row(GgmlType::kQ8_K, x.data(), &q, 256);
  EXPECT_EQ(q.qs[17], -127);
  EXPECT_FLOAT_EQ(q.d, -0.05f);
  for (int s = 0; s < 16; ++s) {
    int sum = 0;
    for (int e = 16 * s; e < 16 * s + 16; ++e) sum += q.qs[e];
    EXPECT_EQ(q.bsums[s], sum) << "bsums[" << s << "]";
  }
}

TEST(LegacyBlocks, Q8_1CarriesScaledSum) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j) * 0.25f - 3.0f;
  BlockQ8_1 block{};
  quantize_row(GgmlType::kQ8_1, x.data(), &block, 32);
  int sum = 0;
  for (int j = 0; j < 32; ++j) sum += block.qs[j];
  EXPECT_EQ(block.s, fp32_to_fp16(static_cast<float>(sum) * (4.75f / 127.0f)));
  EXPECT_EQ(block.d, fp32_to_fp16(4.75f / 127.0f));
  EXPECT_EQ(block.qs[31], 127);
}

}  // namespace
}  // namespace llms::quant
