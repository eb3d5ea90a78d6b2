// cuda/block_decode.h on the host: every sub-block decoder against quant::dequantize_row, bit for
// bit, on rows the reference quantizer wrote and on random bytes (every bit of every field), with
// rows placed 2 bytes past an aligned address as on the device; and the 16-bit float conversions
// against quant/float_convert.h. The kernels decode with the same header, so this pins what they
// compute, short of fused multiply-adds (which the header rules out on the device).
#include "block_decode.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"
#include "quant/float_convert.h"
#include "quant/quant.h"

namespace llms::cuda {
namespace {

using gguf::GgmlType;

constexpr GgmlType kDecodableTypes[] = {
    GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ4_0,
    GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0,
    GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,
};

// 4 super-blocks: every K-quant sub-block position appears 4 times.
constexpr int64_t kRowValues = 4 * 256;

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

bool is_plain_type(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16;
}

// A row's bytes at an address that is 2 but not 4 bytes aligned (as Q4_0 blocks sit on the
// device), with nothing after it, so that an over-read shows under ASan.
class MisalignedRow {
 public:
  explicit MisalignedRow(size_t n_bytes) : storage_(n_bytes + 2) {}
  uint8_t* data() { return storage_.data() + 2; }
  size_t size() const { return storage_.size() - 2; }

 private:
  std::vector<uint8_t> storage_;
};

// Decodes every sub-block of the row with decode_sub and compares with dequantize_row. Plain
// types must match every bit (they are bit conversions, NaN payloads included). Quantized ones
// must match every bit of every number; where the reference gives NaN (random bytes can make d
// or m NaN or infinite) the decoder must give NaN too, but which NaN an operation returns is up
// to the hardware (x86 propagates an operand's payload, the GPU a canonical NaN), so the payload
// is not compared there.
void expect_decodes_like_reference(GgmlType type, const uint8_t* row, const std::string& what) {
  const std::string name(gguf::ggml_type_name(type));
  std::vector<float> expected(kRowValues);
  quant::dequantize_row(type, row, expected.data(), kRowValues);
  int failures = 0;
  for (int64_t sub = 0; sub < kRowValues / kSubBlockValues; ++sub) {
    float out[kSubBlockValues];
    for (float& v : out) v = float_of(0x7fbadbadu);  // a NaN that no decoder produces
    ASSERT_TRUE(decode_sub(type, row, sub, out)) << name;
    for (int j = 0; j < kSubBlockValues; ++j) {
      const int64_t e = sub * kSubBlockValues + j;
      const float want = expected[static_cast<size_t>(e)];
      const bool both_nan = std::isnan(want) && std::isnan(out[j]);
      const bool same = bits_of(want) == bits_of(out[j]) || (!is_plain_type(type) && both_nan);
      if (!same && ++failures <= 5) {
        ADD_FAILURE() << name << " " << what << ": value " << e << " (sub-block " << sub
                      << ") decoded as " << out[j] << " (0x" << std::hex << bits_of(out[j])
                      << "), reference " << want << " (0x" << bits_of(want) << ")" << std::dec;
      }
    }
  }
  EXPECT_EQ(failures, 0) << name << " " << what << ": mismatching values";
}

std::string type_param_name(const testing::TestParamInfo<GgmlType>& info) {
  return std::string(gguf::ggml_type_name(info.param));
}

class CudaBlockDecode : public testing::TestWithParam<GgmlType> {};

TEST_P(CudaBlockDecode, QuantizedRowsMatchTheReference) {
  const GgmlType type = GetParam();
  const uint64_t n_bytes = quant::quantized_row_bytes(type, kRowValues);
  std::mt19937 rng(1234 + static_cast<uint32_t>(type));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // Magnitudes from tiny to large (f16 scales go subnormal or large), an all-zero row, one with
  // a constant run and one with a lone outlier per block.
  const float magnitudes[] = {1.0f, 1e-6f, 3e-3f, 40.0f, 2e4f};
  for (int variant = 0; variant < 8; ++variant) {
    std::vector<float> x(kRowValues);
    const float magnitude = magnitudes[variant % 5];
    for (float& v : x) v = normal(rng) * magnitude;
    if (variant == 5) std::fill(x.begin(), x.end(), 0.0f);
    if (variant == 6) std::fill(x.begin() + 100, x.begin() + 400, 0.25f);
    if (variant == 7) {
      for (size_t i = 0; i < x.size(); i += 32) x[i] = 1000.0f * x[i];
    }
    MisalignedRow row(n_bytes);
    quant::quantize_row(type, x.data(), row.data(), kRowValues);
    expect_decodes_like_reference(type, row.data(), "quantized variant " + std::to_string(variant));
  }
}

TEST_P(CudaBlockDecode, RandomBytesMatchTheReference) {
  const GgmlType type = GetParam();
  const uint64_t n_bytes = quant::quantized_row_bytes(type, kRowValues);
  std::mt19937 rng(99 + static_cast<uint32_t>(type));
  for (int trial = 0; trial < 20; ++trial) {
    MisalignedRow row(n_bytes);
    for (size_t i = 0; i < row.size(); ++i) row.data()[i] = static_cast<uint8_t>(rng());
    expect_decodes_like_reference(type, row.data(), "random bytes " + std::to_string(trial));
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, CudaBlockDecode, testing::ValuesIn(kDecodableTypes),
                         type_param_name);

// Special 16-bit patterns in every position of a row: zeros, infinities, NaNs (quiet, signalling,
// with payloads), subnormals, the largest finite values.
TEST(CudaBlockDecodeSpecial, SixteenBitSpecialValues) {
  const uint16_t f16_specials[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x83ff,
                                   0x0400, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7c01,
                                   0x7e00, 0xfe00, 0x7fff, 0xffff, 0x3c00, 0x3555};
  const uint16_t bf16_specials[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x0080,
                                    0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7f81, 0x7fc0,
                                    0xffc0, 0x7fff, 0xffff, 0x3f80, 0x3eab};
  const auto run = [](GgmlType type, const uint16_t* specials, size_t n_specials) {
    std::mt19937 rng(5);
    MisalignedRow row(kRowValues * 2);
    for (int64_t i = 0; i < kRowValues; ++i) {
      // Every special value at many offsets, random bits in between.
      const uint16_t v = i % 3 == 0 ? specials[static_cast<size_t>(i / 3) % n_specials]
                                    : static_cast<uint16_t>(rng());
      std::memcpy(row.data() + 2 * i, &v, 2);
    }
    expect_decodes_like_reference(type, row.data(), "special values");
  };
  run(GgmlType::kF16, f16_specials, std::size(f16_specials));
  run(GgmlType::kBF16, bf16_specials, std::size(bf16_specials));
}

TEST(CudaBlockDecodeSpecial, F32SpecialValues) {
  const uint32_t specials[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x7f7fffffu,
                               0x7f800000u, 0xff800000u, 0x7f800001u, 0x7fc00000u, 0xffffffffu};
  std::mt19937 rng(6);
  MisalignedRow row(kRowValues * 4);
  for (int64_t i = 0; i < kRowValues; ++i) {
    const uint32_t v = i % 2 == 0 ? specials[static_cast<size_t>(i / 2) % std::size(specials)]
                                  : static_cast<uint32_t>(rng());
    std::memcpy(row.data() + 4 * i, &v, 4);
  }
  expect_decodes_like_reference(GgmlType::kF32, row.data(), "special values");
}

// decodable() names exactly the 11 types, and decode_sub refuses the rest without writing.
TEST(CudaBlockDecodeSpecial, DecodableTypesAreExactlyTheSupportedOnes) {
  for (const gguf::GgmlTypeInfo& info : gguf::all_ggml_types()) {
    bool listed = false;
    for (GgmlType type : kDecodableTypes) listed = listed || type == info.type;
    EXPECT_EQ(decodable(info.type), listed) << info.name;
    if (!listed) {
      const uint8_t bytes[512] = {};
      float out[kSubBlockValues];
      for (float& v : out) v = 7.0f;
      EXPECT_FALSE(decode_sub(info.type, bytes, 0, out)) << info.name;
      for (float v : out) EXPECT_EQ(v, 7.0f) << info.name;
    }
  }
}

TEST(CudaFloatConvert, HalfToFloatIsExactForEveryPattern) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const auto h16 = static_cast<uint16_t>(h);
    ASSERT_EQ(bits_of(f16_bits_to_f32(h)), bits_of(quant::fp16_to_fp32(h16)))
        << "f16 0x" << std::hex << h;
    ASSERT_EQ(bits_of(bf16_bits_to_f32(h)), bits_of(quant::bf16_to_fp32(h16)))
        << "bf16 0x" << std::hex << h;
  }
}

TEST(CudaFloatConvert, FloatToBf16MatchesTheReference) {
  const auto check = [](uint32_t bits) {
    const float f = float_of(bits);
    const uint16_t got = f32_to_bf16_bits(f);
    const uint16_t want = quant::fp32_to_bf16(f);
    if (got != want) {
      ADD_FAILURE() << "f32 0x" << std::hex << bits << " -> bf16 0x" << got << ", reference 0x"
                    << want << std::dec;
      return false;
    }
    return true;
  };
  // Named values: zeros, infinities, NaNs of both signs (quiet, signalling with payloads only in
  // the low or the high half), the largest finite (rounds to infinity), subnormals.
  const float named[] = {0.0f,
                         -0.0f,
                         1.0f,
                         -1.5f,
                         std::numeric_limits<float>::infinity(),
                         -std::numeric_limits<float>::infinity(),
                         std::numeric_limits<float>::quiet_NaN(),
                         -std::numeric_limits<float>::quiet_NaN(),
                         std::numeric_limits<float>::signaling_NaN(),
                         std::numeric_limits<float>::max(),
                         -std::numeric_limits<float>::max(),
                         std::numeric_limits<float>::min(),
                         std::numeric_limits<float>::denorm_min(),
                         -std::numeric_limits<float>::denorm_min(),
                         1e-40f,
                         3.14159265f};
  for (float f : named) check(bits_of(f));
  for (uint32_t nan : {0x7f800001u, 0xff800001u, 0x7f80ffffu, 0x7fbf0000u, 0xffbfffffu}) {
    check(nan);
  }
  // Every upper half with the low halves that decide rounding: exact, just below, at and just
  // above the tie, and the largest (which carries into the exponent on odd uppers).
  const uint32_t lows[] = {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu};
  int failures = 0;
  for (uint32_t high = 0; high <= 0xffffu && failures < 10; ++high) {
    for (uint32_t low : lows) failures += check((high << 16) | low) ? 0 : 1;
  }
  // And random bit patterns.
  std::mt19937 rng(11);
  for (int i = 0; i < (1 << 20) && failures < 10; ++i) failures += check(rng()) ? 0 : 1;
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace llms::cuda
