// f32 <-> f16/bf16 conversions against known bit patterns, and f32 -> f16 against an
// independent nearest-value search over the table of all finite halves.
#include "quant/float_convert.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace llms::quant {
namespace {

float f32_bits(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }

bool is_f16_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0; }
bool is_bf16_nan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x007f) != 0; }

TEST(Fp16, DecodesKnownPatterns) {
  EXPECT_EQ(fp16_to_fp32(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_fp32(0x3555), 0x1.554p-2f);
  EXPECT_EQ(fp16_to_fp32(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_fp32(0x0400), 0x1p-14f);         // smallest normal
  EXPECT_EQ(fp16_to_fp32(0x0001), 0x1p-24f);         // smallest subnormal
  EXPECT_EQ(fp16_to_fp32(0x03ff), 1023 * 0x1p-24f);  // largest subnormal
  EXPECT_EQ(fp16_to_fp32(0x8001), -0x1p-24f);
  EXPECT_EQ(bits_of(fp16_to_fp32(0x0000)), 0x00000000u);
  EXPECT_EQ(bits_of(fp16_to_fp32(0x8000)), 0x80000000u);
  EXPECT_EQ(fp16_to_fp32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp16_to_fp32(0xfc00), -std::numeric_limits<float>::infinity());
  // NaN keeps sign and payload.
  EXPECT_EQ(bits_of(fp16_to_fp32(0x7e00)), 0x7fc00000u);
  EXPECT_EQ(bits_of(fp16_to_fp32(0xfc01)), 0xff802000u);
}

TEST(Fp16, EncodesKnownPatterns) {
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(fp32_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65519.99f), 0x7bff);  // just below the midpoint to 65536
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);   // midpoint: ties to even = infinity
  EXPECT_EQ(fp32_to_fp16(-1e6f), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::max()), 0x7c00);
  // Ties to even between normal halves (spacing 2^-10 near 1).
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(fp32_to_fp16(std::nextafter(1.0f + 0x1p-11f, 2.0f)), 0x3c01);
  EXPECT_EQ(fp32_to_fp16(-(1.0f + 3 * 0x1p-11f)), 0xbc02);
  // Subnormal halves and their ties (spacing 2^-24).
  EXPECT_EQ(fp32_to_fp16(0x1p-24f), 0x0001);
  EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);  // tie between 0 and 1: even
  EXPECT_EQ(fp32_to_fp16(-0x1p-25f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(fp32_to_fp16(1.5f * 0x1p-24f), 0x0002);  // tie between 1 and 2: even
  EXPECT_EQ(fp32_to_fp16(2.5f * 0x1p-24f), 0x0002);  // tie between 2 and 3: even
  EXPECT_EQ(fp32_to_fp16(0x1p-26f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(0x1p-14f - 0x1p-25f), 0x0400);  // tie: rounds up into the normals
  EXPECT_EQ(fp32_to_fp16(1023 * 0x1p-24f), 0x03ff);
  EXPECT_EQ(fp32_to_fp16(f32_bits(0x00000001)), 0x0000);  // f32 subnormal
  EXPECT_EQ(fp32_to_fp16(f32_bits(0x80000001)), 0x8000);
}

TEST(Fp16, NanStaysNanWithItsSign) {
  for (uint32_t bits : {0x7fc00000u, 0x7f800001u, 0x7fffffffu, 0x7f802000u}) {
    const uint16_t h = fp32_to_fp16(f32_bits(bits));
    EXPECT_TRUE(is_f16_nan(h)) << std::hex << bits;
    EXPECT_EQ(h & 0x8000, 0) << std::hex << bits;
    const uint16_t negative = fp32_to_fp16(f32_bits(bits | 0x80000000u));
    EXPECT_TRUE(is_f16_nan(negative)) << std::hex << bits;
    EXPECT_EQ(negative & 0x8000, 0x8000) << std::hex << bits;
  }
}

TEST(Fp16, EveryHalfRoundTripsExactly) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const auto half = static_cast<uint16_t>(h);
    const uint16_t back = fp32_to_fp16(fp16_to_fp32(half));
    if (is_f16_nan(half)) {
      EXPECT_TRUE(is_f16_nan(back)) << std::hex << h;
    } else {
      ASSERT_EQ(back, half) << std::hex << h;
    }
  }
}

// Independent reference: the nearest finite half by exact (double) distance, ties to the even
// pattern; beyond the midpoint above 65504 the result is infinity.
uint16_t reference_fp16(float f, const std::vector<double>& positive_halves) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return static_cast<uint16_t>(sign | 0x7c00);
  const auto it = std::lower_bound(positive_halves.begin(), positive_halves.end(), a);
  size_t hi = static_cast<size_t>(it - positive_halves.begin());
  if (hi == positive_halves.size()) hi = positive_halves.size() - 1;
  const size_t lo = hi == 0 ? 0 : hi - 1;
  const double d_lo = a - positive_halves[lo];
  const double d_hi = positive_halves[hi] - a;
  size_t pick;
  if (d_lo < d_hi) {
    pick = lo;
  } else if (d_hi < d_lo) {
    pick = hi;
  } else {
    pick = (lo % 2 == 0) ? lo : hi;
  }
  return static_cast<uint16_t>(sign | pick);
}

TEST(Fp16, EncodeMatchesNearestValueSearch) {
  std::vector<double> positive_halves;  // index == bit pattern for 0x0000..0x7bff
  for (uint32_t h = 0; h <= 0x7bff; ++h) {
    positive_halves.push_back(fp16_to_fp32(static_cast<uint16_t>(h)));
  }
  std::vector<float> inputs;
  // Every midpoint between neighbours and the floats right around it.
  for (size_t i = 0; i + 1 < positive_halves.size(); ++i) {
    const auto mid = static_cast<float>((positive_halves[i] + positive_halves[i + 1]) / 2);
    inputs.push_back(mid);
    inputs.push_back(std::nextafter(mid, 0.0f));
    inputs.push_back(std::nextafter(mid, 1e9f));
    inputs.push_back(-mid);
  }
  std::mt19937 rng(1234);
  std::uniform_int_distribution<uint32_t> any_bits;
  for (int i = 0; i < 200000; ++i) {
    // Bias towards the f16 range: exponents around [-30, 17].
    const uint32_t bits = any_bits(rng);
    const uint32_t exponent = 97 + (bits >> 24) % 48;
    inputs.push_back(f32_bits((bits & 0x807fffffu) | (exponent << 23)));
  }
  int n_bad = 0;
  for (float f : inputs) {
    const uint16_t want = reference_fp16(f, positive_halves);
    const uint16_t got = fp32_to_fp16(f);
    if (want != got && n_bad++ < 5) {
      ADD_FAILURE() << "f=" << f << " (0x" << std::hex << bits_of(f) << ") want 0x" << want
                    << " got 0x" << got;
    }
  }
  EXPECT_EQ(n_bad, 0);
}

TEST(Bf16, KnownPatterns) {
  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_fp32(0xc040), -3.0f);
  EXPECT_EQ(bf16_to_fp32(0x0001), f32_bits(0x00010000));  // subnormal
  EXPECT_EQ(bf16_to_fp32(0x7f80), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(-3.0f), 0xc040);
  EXPECT_EQ(fp32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x1p-8f), 0x3f80);                     // tie: even
  EXPECT_EQ(fp32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);                 // tie: even (up)
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);          // above the tie
  EXPECT_EQ(fp32_to_bf16(f32_bits(0x00018000)), 0x0002);               // subnormal tie: even (up)
  EXPECT_EQ(fp32_to_bf16(f32_bits(0x00008000)), 0x0000);               // subnormal tie: even (down)
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to infinity
  EXPECT_EQ(fp32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  // NaN: the top half with the quiet bit forced, never infinity.
  EXPECT_EQ(fp32_to_bf16(f32_bits(0x7f800001)), 0x7fc0);
  EXPECT_EQ(fp32_to_bf16(f32_bits(0xffc00001)), 0xffc0);
  EXPECT_EQ(fp32_to_bf16(f32_bits(0x7fa12345)), 0x7fe1);
}

TEST(Bf16, EveryPatternRoundTripsExactly) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const auto half = static_cast<uint16_t>(h);
    const uint16_t back = fp32_to_bf16(bf16_to_fp32(half));
    if (is_bf16_nan(half)) {
      EXPECT_TRUE(is_bf16_nan(back)) << std::hex << h;
    } else {
      ASSERT_EQ(back, half) << std::hex << h;
    }
  }
}

TEST(FloatRows, ConvertUnalignedRows) {
  const std::vector<float> values = {1.0f, -2.5f, 65504.0f, 0x1p-24f, 0.0f, -0.0f, 3.0f};
  std::vector<unsigned char> storage(2 * values.size() + 1);
  void* unaligned = storage.data() + 1;
  std::vector<float> back(values.size());

  fp32_to_fp16_row(values.data(), unaligned, static_cast<int64_t>(values.size()));
  fp16_to_fp32_row(unaligned, back.data(), static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(bits_of(back[i]), bits_of(values[i]));

  fp32_to_bf16_row(values.data(), unaligned, static_cast<int64_t>(values.size()));
  bf16_to_fp32_row(unaligned, back.data(), static_cast<int64_t>(values.size()));
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], -2.5f);
  EXPECT_EQ(back[2], 65536.0f);  // 65504 is not a bf16: nearest is 2^16
  EXPECT_EQ(bits_of(back[5]), 0x80000000u);
}


// FP8 E4M3 ("e4m3fn": no infinities, S.1111.111 is NaN), the element of an fp8 KV cache.
TEST(Fp8E4m3, DecodesKnownPatterns) {
  EXPECT_EQ(fp8_e4m3_to_fp32(0x38), 1.0f);
  EXPECT_EQ(fp8_e4m3_to_fp32(0xc0), -2.0f);
  EXPECT_EQ(fp8_e4m3_to_fp32(0x7e), 448.0f);  // largest finite
  EXPECT_EQ(fp8_e4m3_to_fp32(0x08), 0x1p-6f);  // smallest normal
  EXPECT_EQ(fp8_e4m3_to_fp32(0x07), 7 * 0x1p-9f);
  EXPECT_EQ(fp8_e4m3_to_fp32(0x01), 0x1p-9f);  // smallest subnormal
  EXPECT_EQ(bits_of(fp8_e4m3_to_fp32(0x80)), 0x80000000u);
  EXPECT_EQ(fp8_e4m3_to_fp32(0x3d), 1.625f);
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_fp32(0x7f)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_fp32(0xff)));
  EXPECT_EQ(fp8_e4m3_to_fp32(0x78), 256.0f);  // exponent 15 is finite except with mantissa 7
}

TEST(Fp8E4m3, EveryPatternRoundTripsExactly) {
  for (uint32_t b = 0; b <= 0xff; ++b) {
    const auto byte = static_cast<uint8_t>(b);
    if ((b & 0x7f) == 0x7f) {
      EXPECT_EQ(fp32_to_fp8_e4m3(fp8_e4m3_to_fp32(byte)) & 0x7f, 0x7f) << std::hex << b;
    } else {
      ASSERT_EQ(fp32_to_fp8_e4m3(fp8_e4m3_to_fp32(byte)), byte) << std::hex << b;
    }
  }
}

TEST(Fp8E4m3, SaturatesAndKeepsNan) {
  EXPECT_EQ(fp32_to_fp8_e4m3(448.0f), 0x7e);
  EXPECT_EQ(fp32_to_fp8_e4m3(464.0f), 0x7e);  // would round to the NaN pattern: saturates
  EXPECT_EQ(fp32_to_fp8_e4m3(1e30f), 0x7e);
  EXPECT_EQ(fp32_to_fp8_e4m3(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(fp32_to_fp8_e4m3(std::numeric_limits<float>::quiet_NaN()) & 0x7f, 0x7f);
  EXPECT_EQ(fp32_to_fp8_e4m3(0x1p-10f), 0x00);  // half the smallest subnormal: tie to 0
  EXPECT_EQ(fp32_to_fp8_e4m3(0x1p-10f * 1.0001f), 0x01);
  EXPECT_EQ(fp32_to_fp8_e4m3(3 * 0x1p-10f), 0x02);  // 1.5 units: tie to even (up)
  EXPECT_EQ(fp32_to_fp8_e4m3(-0.0f), 0x80);
  EXPECT_EQ(fp32_to_fp8_e4m3(15.5f * 0x1p-10f), 0x08);  // 7.75 units: up to the smallest normal
}

// Every f32 in a dense sample encodes to the nearest finite e4m3 value, ties to the even
// pattern, found by brute force over the 253 finite non-negative patterns.
TEST(Fp8E4m3, EncodeMatchesNearestValueSearch) {
  std::vector<float> finite;  // index = pattern
  for (uint32_t b = 0; b < 0x7f; ++b) finite.push_back(fp8_e4m3_to_fp32(static_cast<uint8_t>(b)));
  auto reference = [&](float f) -> uint8_t {
    const float a = std::fabs(f);
    const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
    if (a >= 448.0f) return sign | 0x7e;
    uint32_t best = 0;
    for (uint32_t b = 1; b < finite.size(); ++b) {
      const double d = std::fabs(static_cast<double>(finite[b]) - a);
      const double d_best = std::fabs(static_cast<double>(finite[best]) - a);
      if (d < d_best || (d == d_best && (b & 1) == 0)) best = b;
    }
    return static_cast<uint8_t>(sign | best);
  };
  std::mt19937 rng(7);
  std::vector<float> inputs;
  for (size_t b = 0; b + 1 < finite.size(); ++b) {  // every midpoint and its neighbours
    const float mid = (finite[b] + finite[b + 1]) / 2;
    inputs.insert(inputs.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)});
  }
  for (int i = 0; i < 20000; ++i) {
    const int exponent = static_cast<int>(rng() % 30) - 20;
    inputs.push_back(std::ldexp(static_cast<float>(rng() % 100000) / 100000.0f, exponent) *
                     ((rng() & 1) ? -1.0f : 1.0f));
  }
  int n_bad = 0;
  for (float f : inputs) {
    const uint8_t want = reference(f);
    const uint8_t got = fp32_to_fp8_e4m3(f);
    if (want != got && n_bad++ < 5) {
      ADD_FAILURE() << "f=" << f << " want 0x" << std::hex << int{want} << " got 0x" << int{got};
    }
  }
  EXPECT_EQ(n_bad, 0);
}

}  // namespace
}  // namespace llms::quant
