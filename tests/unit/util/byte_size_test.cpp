#include "util/byte_size.h"

#include <gtest/gtest.h>

namespace llms {
namespace {

TEST(ByteSize, ParsesPlainAndUnits) {
  EXPECT_EQ(parse_byte_size("1073741824"), 1073741824u);
  EXPECT_EQ(parse_byte_size("24GiB"), 24ull << 30);
  EXPECT_EQ(parse_byte_size("24G"), 24ull << 30);
  EXPECT_EQ(parse_byte_size("24gb"), 24000000000ull);
  EXPECT_EQ(parse_byte_size("512 MiB"), 512ull << 20);
  EXPECT_EQ(parse_byte_size("1.5K"), 1536u);
  EXPECT_EQ(parse_byte_size("7B"), 7u);
}

TEST(ByteSize, RefusesGarbage) {
  EXPECT_FALSE(parse_byte_size(""));
  EXPECT_FALSE(parse_byte_size("-5G"));
  EXPECT_FALSE(parse_byte_size("12XB"));
  EXPECT_FALSE(parse_byte_size("1.2.3G"));
  EXPECT_FALSE(parse_byte_size("99999999999TiB"));
  EXPECT_FALSE(parse_byte_size("G"));
}

TEST(ByteSize, Formats) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1280ull << 20), "1.25 GiB");
  EXPECT_EQ(format_bytes(448ull << 20), "448.00 MiB");
}

}  // namespace
}  // namespace llms
