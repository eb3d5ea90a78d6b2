// Our codecs against gguf-py (tools/make_quant_golden.py): dequantization must equal gguf-py's
// bit for bit (every float, sign of zero included; the goldens hold no NaN except where a
// NaN bit pattern is itself the expected result), and where gguf-py quantizes, our bytes must
// equal its bytes.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "golden_file.h"
#include "quant/quant.h"

namespace llms::quant {
namespace {

using gguf::GgmlType;
using testing::GoldenFile;
using testing::GoldenRecord;

const GoldenFile& golden() {
  static const GoldenFile file = testing::read_golden_file(testing::golden_path());
  return file;
}

// Bitwise comparison of two float arrays; reports the first few differences.
::testing::AssertionResult same_bits(const std::vector<float>& expected,
                                     const std::vector<float>& actual) {
  if (expected.size() != actual.size()) {
    return ::testing::AssertionFailure()
           << "sizes differ: " << expected.size() << " vs " << actual.size();
  }
  int n_diff = 0;
  auto failure = ::testing::AssertionFailure();
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto want = std::bit_cast<uint32_t>(expected[i]);
    const auto got = std::bit_cast<uint32_t>(actual[i]);
    if (want != got) {
      if (n_diff < 5) {
        failure << "\n  [" << i << "] expected " << expected[i] << " (0x" << std::hex << want
                << ") got " << actual[i] << " (0x" << got << std::dec << ")";
      }
      ++n_diff;
    }
  }
  if (n_diff == 0) return ::testing::AssertionSuccess();
  return failure << "\n  " << n_diff << " of " << expected.size() << " floats differ";
}

::testing::AssertionResult same_bytes(const std::vector<uint8_t>& expected,
                                      const std::vector<uint8_t>& actual) {
  if (expected == actual) return ::testing::AssertionSuccess();
  auto failure = ::testing::AssertionFailure();
  if (expected.size() != actual.size()) return failure << "sizes differ";
  int n_diff = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] != actual[i] && n_diff++ < 5) {
      failure << "\n  byte " << i << ": expected " << int{expected[i]} << " got " << int{actual[i]};
    }
  }
  return failure << "\n  " << n_diff << " of " << expected.size() << " bytes differ";
}

TEST(QuantGolden, FileIsFromGgufPyAndCoversEveryType) {
  const GoldenFile& file = golden();
  ASSERT_FALSE(file.records.empty());
  EXPECT_NE(file.generator.find("gguf "), std::string::npos) << file.generator;
  std::set<GgmlType> dequantized;
  std::set<GgmlType> from_models;
  std::set<GgmlType> quantized;
  for (const GoldenRecord& record : file.records) {
    dequantized.insert(record.type);
    if (record.label.find(".gguf:") != std::string::npos) from_models.insert(record.type);
    if (record.has_source) quantized.insert(record.type);
  }
  for (GgmlType type : {GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ4_0, GgmlType::kQ4_1,
                        GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0, GgmlType::kQ2_K,
                        GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    EXPECT_TRUE(dequantized.count(type)) << gguf::ggml_type_name(type);
  }
  // Real blocks from both model files.
  for (GgmlType type : {GgmlType::kQ5_0, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    EXPECT_TRUE(from_models.count(type)) << gguf::ggml_type_name(type);
  }
  for (GgmlType type : {GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ4_0, GgmlType::kQ4_1,
                        GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0}) {
    EXPECT_TRUE(quantized.count(type)) << gguf::ggml_type_name(type);
  }
}

TEST(QuantGolden, DequantizeMatchesGgufPyBitForBit) {
  int n_checked = 0;
  for (const GoldenRecord& record : golden().records) {
    SCOPED_TRACE(std::string(gguf::ggml_type_name(record.type)) + ": " + record.label);
    ASSERT_EQ(quantized_row_bytes(record.type, record.n_elements), record.bytes.size());
    std::vector<float> ours(record.n_elements, -12345.0f);
    dequantize_row(record.type, record.bytes.data(), ours.data(), record.n_elements);
    EXPECT_TRUE(same_bits(record.expected, ours));
    ++n_checked;
  }
  EXPECT_GE(n_checked, 27);
}

TEST(QuantGolden, DequantizeReadsUnalignedBlocks) {
  for (const GoldenRecord& record : golden().records) {
    SCOPED_TRACE(record.label);
    std::vector<uint8_t> shifted(record.bytes.size() + 1);
    std::memcpy(shifted.data() + 1, record.bytes.data(), record.bytes.size());
    std::vector<float> ours(record.n_elements);
    dequantize_row(record.type, shifted.data() + 1, ours.data(), record.n_elements);
    EXPECT_TRUE(same_bits(record.expected, ours));
  }
}

TEST(QuantGolden, QuantizeMatchesGgufPyBytes) {
  int n_checked = 0;
  for (const GoldenRecord& record : golden().records) {
    if (!record.has_source) continue;
    SCOPED_TRACE(std::string(gguf::ggml_type_name(record.type)) + ": " + record.label);
    ASSERT_TRUE(can_quantize(record.type));
    std::vector<uint8_t> ours(record.bytes.size(), 0xAB);
    quantize_row(record.type, record.source.data(), ours.data(), record.n_elements);
    EXPECT_TRUE(same_bytes(record.bytes, ours));
    ++n_checked;
  }
  EXPECT_EQ(n_checked, 7);
}

}  // namespace
}  // namespace llms::quant
