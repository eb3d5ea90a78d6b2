// Tests for gguf/safetensors_file: round trips of hand-built and officially written files, and
// one hand-built corruption per check, each asserting that the error names the problem.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gguf/safetensors_file.h"
#include "safetensors_bytes.h"
#include "temp_dir.h"
#include "util/error.h"

namespace llms::gguf {
namespace {

using llms::testing::safetensors_bytes;
using llms::testing::SafetensorsBuilder;
using llms::testing::TempDir;

// Runs `statement`, expecting an llms::Error of `kind` whose message contains `substring`.
#define EXPECT_LLMS_ERROR(statement, expected_kind, substring)                         \
  do {                                                                                 \
    try {                                                                              \
      statement;                                                                       \
      ADD_FAILURE() << "expected llms::Error containing \"" << (substring) << "\"";    \
    } catch (const llms::Error& e) {                                                   \
      EXPECT_EQ(e.kind(), (expected_kind)) << e.what();                                \
      EXPECT_NE(std::string(e.what()).find(substring), std::string::npos) << e.what(); \
    }                                                                                  \
  } while (0)

constexpr auto kInvalid = Error::Kind::kInvalidFile;

SafetensorsFile parse(std::string_view header, std::vector<uint8_t> data = {}) {
  return SafetensorsFile::from_bytes(safetensors_bytes(header, data));
}

template <typename T>
std::vector<T> values_of(std::span<const uint8_t> bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

TEST(SafetensorsFile, RoundTripsHandBuiltFile) {
  SafetensorsBuilder b;
  b.add_values<float>("w", "F32", {2, 3}, {1.5f, -2.0f, 0.0f, 3.25f, 4.0f, -5.5f})
      .add_values<int8_t>("a.bias", "I8", {4}, {-128, -1, 0, 127})
      .add_values<uint16_t>("s", "BF16", {}, {0x3F80})
      .metadata("format", "pt");
  TempDir dir;
  auto path = dir.write("model.safetensors", b.build());

  for (int pass = 0; pass < 2; ++pass) {
    auto file = pass == 0 ? SafetensorsFile::open(path) : SafetensorsFile::from_bytes(b.build());
    ASSERT_EQ(file.tensors().size(), 3u);
    // Sorted by name.
    EXPECT_EQ(file.tensors()[0].name, "a.bias");
    EXPECT_EQ(file.tensors()[1].name, "s");
    EXPECT_EQ(file.tensors()[2].name, "w");
    EXPECT_EQ(file.header_size() % 8, 0u);
    EXPECT_EQ(file.data_offset(), 8 + file.header_size());
    EXPECT_EQ(file.data_size(), 24u + 4u + 2u);
    EXPECT_EQ(file.file_size(), file.data_offset() + file.data_size());

    const SafetensorsTensor* w = file.find_tensor("w");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->dtype, Dtype::kF32);
    EXPECT_EQ(w->shape, (std::vector<uint64_t>{2, 3}));
    EXPECT_EQ(w->n_elements, 6u);
    EXPECT_EQ(w->n_bytes, 24u);
    EXPECT_EQ(w->offset, 0u);
    EXPECT_EQ(values_of<float>(file.tensor_data(*w)),
              (std::vector<float>{1.5f, -2.0f, 0.0f, 3.25f, 4.0f, -5.5f}));

    const SafetensorsTensor* bias = file.find_tensor("a.bias");
    ASSERT_NE(bias, nullptr);
    EXPECT_EQ(bias->dtype, Dtype::kI8);
    EXPECT_EQ(bias->offset, 24u);
    EXPECT_EQ(values_of<int8_t>(file.tensor_data(*bias)), (std::vector<int8_t>{-128, -1, 0, 127}));

    const SafetensorsTensor* s = file.find_tensor("s");
    ASSERT_NE(s, nullptr);
    EXPECT_TRUE(s->shape.empty());
    EXPECT_EQ(s->n_elements, 1u);
    EXPECT_EQ(values_of<uint16_t>(file.tensor_data(*s)), (std::vector<uint16_t>{0x3F80}));

    EXPECT_EQ(file.find_tensor("missing"), nullptr);
    EXPECT_EQ(file.find_tensor("a"), nullptr);
    EXPECT_EQ(file.metadata().size(), 1u);
    EXPECT_EQ(file.metadata().at("format"), "pt");
  }
}

TEST(SafetensorsFile, EveryDtypeHasItsSizeAndName) {
  struct Case {
    const char* name;
    Dtype dtype;
    uint32_t size;
  };
  const std::vector<Case> cases = {
      {"BOOL", Dtype::kBool, 1},       {"U8", Dtype::kU8, 1},
      {"I8", Dtype::kI8, 1},           {"F8_E5M2", Dtype::kF8_E5M2, 1},
      {"F8_E4M3", Dtype::kF8_E4M3, 1}, {"F8_E8M0", Dtype::kF8_E8M0, 1},
      {"I16", Dtype::kI16, 2},         {"U16", Dtype::kU16, 2},
      {"F16", Dtype::kF16, 2},         {"BF16", Dtype::kBF16, 2},
      {"I32", Dtype::kI32, 4},         {"U32", Dtype::kU32, 4},
      {"F32", Dtype::kF32, 4},         {"F64", Dtype::kF64, 8},
      {"I64", Dtype::kI64, 8},         {"U64", Dtype::kU64, 8},
      {"C64", Dtype::kC64, 8},
  };
  EXPECT_EQ(all_dtypes().size(), cases.size());
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(dtype_from_name(c.name), c.dtype);
    EXPECT_EQ(dtype_name(c.dtype), c.name);
    EXPECT_EQ(dtype_size(c.dtype), c.size);
    // A [3, 5] tensor of this dtype needs exactly 15 * size bytes.
    auto bytes =
        SafetensorsBuilder().add("t", c.name, {3, 5}, std::vector<uint8_t>(15 * c.size, 7)).build();
    auto file = SafetensorsFile::from_bytes(bytes);
    ASSERT_EQ(file.tensors().size(), 1u);
    EXPECT_EQ(file.tensors()[0].dtype, c.dtype);
    EXPECT_EQ(file.tensors()[0].n_bytes, 15u * c.size);
    // One byte fewer is refused.
    auto short_bytes = SafetensorsBuilder()
                           .add("t", c.name, {3, 5}, std::vector<uint8_t>(15 * c.size - 1, 7))
                           .build();
    EXPECT_LLMS_ERROR(SafetensorsFile::from_bytes(short_bytes), kInvalid, "needs");
  }
  EXPECT_FALSE(dtype_from_name("f32").has_value());
  EXPECT_FALSE(dtype_from_name("").has_value());
}

TEST(SafetensorsFile, ReadsGoldenFileWrittenByOfficialLibrary) {
  auto file = SafetensorsFile::open(LLMS_TEST_DATA_DIR "/safetensors/dtypes.safetensors");
  EXPECT_EQ(file.tensors().size(), 13u);
  EXPECT_EQ(file.metadata().at("format"), "np");
  EXPECT_EQ(file.data_offset() % 8, 0u);  // the official writer pads the header

  auto get = [&](const char* name, Dtype dtype, std::vector<uint64_t> shape) {
    const SafetensorsTensor* t = file.find_tensor(name);
    EXPECT_NE(t, nullptr) << name;
    if (t == nullptr) return std::span<const uint8_t>();
    EXPECT_EQ(t->dtype, dtype) << name;
    EXPECT_EQ(t->shape, shape) << name;
    return file.tensor_data(*t);
  };
  EXPECT_EQ(values_of<float>(get("f32", Dtype::kF32, {2, 3})),
            (std::vector<float>{-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f}));
  EXPECT_EQ(values_of<uint16_t>(get("f16", Dtype::kF16, {4})),
            (std::vector<uint16_t>{0x3C00, 0xC100, 0x7BFF, 0x1400}));
  EXPECT_EQ(values_of<uint16_t>(get("bf16", Dtype::kBF16, {4})),
            (std::vector<uint16_t>{0x3F80, 0xC040, 0x3E20, 0x4380}));
  EXPECT_EQ(values_of<uint8_t>(get("f8_e4m3", Dtype::kF8_E4M3, {3})),
            (std::vector<uint8_t>{0x38, 0xB0, 0x7E}));
  EXPECT_EQ(values_of<int8_t>(get("i8", Dtype::kI8, {4})), (std::vector<int8_t>{-128, -1, 0, 127}));
  EXPECT_EQ(values_of<uint8_t>(get("u8", Dtype::kU8, {2, 2})),
            (std::vector<uint8_t>{0, 1, 254, 255}));
  EXPECT_EQ(values_of<int16_t>(get("i16", Dtype::kI16, {2})),
            (std::vector<int16_t>{-32768, 32767}));
  EXPECT_EQ(values_of<int32_t>(get("i32", Dtype::kI32, {3})),
            (std::vector<int32_t>{-2147483647 - 1, 7, 2147483647}));
  EXPECT_EQ(values_of<int64_t>(get("i64", Dtype::kI64, {2})),
            (std::vector<int64_t>{-(int64_t{1} << 62), (int64_t{1} << 62) + 1}));
  EXPECT_EQ(values_of<double>(get("f64", Dtype::kF64, {2})), (std::vector<double>{3.25, -1e300}));
  EXPECT_EQ(values_of<uint8_t>(get("bool", Dtype::kBool, {3})), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(values_of<float>(get("scalar", Dtype::kF32, {})), (std::vector<float>{42.0f}));
  EXPECT_TRUE(get("empty", Dtype::kF32, {0, 4}).empty());
}

TEST(SafetensorsFile, AcceptsEmptyHeaderGapsUnknownFieldsAndPadding) {
  EXPECT_TRUE(parse("{}").tensors().empty());
  EXPECT_TRUE(parse("{}      ").tensors().empty());  // trailing spaces pad the header
  // A gap before the tensor, trailing bytes after it, an unknown (nested) field, and an empty
  // tensor placed inside another's range: all harmless.
  auto file = parse(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[3,5],"extra":{"x":[1,[2]]}},)"
                    R"("z":{"dtype":"F32","shape":[0,7],"data_offsets":[4,4]}})",
                    {9, 9, 9, 1, 2, 9, 9});
  ASSERT_EQ(file.tensors().size(), 2u);
  EXPECT_EQ(values_of<uint8_t>(file.tensor_data(*file.find_tensor("a"))),
            (std::vector<uint8_t>{1, 2}));
  EXPECT_EQ(file.find_tensor("z")->n_elements, 0u);
  EXPECT_TRUE(file.tensor_data(*file.find_tensor("z")).empty());
  // A zero dimension makes the tensor empty even when the other dims would overflow.
  auto huge_empty =
      parse(R"({"e":{"dtype":"F64","shape":[18446744073709551615,18446744073709551615,0],)"
            R"("data_offsets":[0,0]}})");
  EXPECT_EQ(huge_empty.tensors()[0].n_bytes, 0u);
}

TEST(SafetensorsFile, RefusesFileTooSmallForLength) {
  std::vector<uint8_t> bytes = {1, 0, 0};
  EXPECT_LLMS_ERROR(SafetensorsFile::from_bytes(bytes), kInvalid, "too small");
  EXPECT_LLMS_ERROR(SafetensorsFile::from_bytes({}), kInvalid, "too small");
}

TEST(SafetensorsFile, RefusesHeaderLengthPastFile) {
  auto bytes = safetensors_bytes("{}", {}, 1000);
  EXPECT_LLMS_ERROR(SafetensorsFile::from_bytes(bytes), kInvalid,
                    "header length 1000 runs past the end of the file");
  auto huge = safetensors_bytes("{}", {}, ~uint64_t{0});
  EXPECT_LLMS_ERROR(SafetensorsFile::from_bytes(huge), kInvalid, "exceeds the limit");
  auto over_cap = safetensors_bytes("{}", {}, kMaxSafetensorsHeaderBytes + 1);
  EXPECT_LLMS_ERROR(SafetensorsFile::from_bytes(over_cap), kInvalid, "exceeds the limit");
}

TEST(SafetensorsFile, RefusesHeaderThatIsNotJsonObject) {
  EXPECT_LLMS_ERROR(parse("not json"), kInvalid, "header is not valid JSON");
  EXPECT_LLMS_ERROR(parse(""), kInvalid, "header is not valid JSON");
  EXPECT_LLMS_ERROR(parse("{\"a\":"), kInvalid, "header is not valid JSON");
  EXPECT_LLMS_ERROR(parse("{} {}"), kInvalid, "header is not valid JSON");
  // A NUL byte would end nlohmann's input early and hide what follows it.
  EXPECT_LLMS_ERROR(parse(std::string("{}\0 garbage", 11)), kInvalid,
                    "NUL byte at header offset 2");
  EXPECT_LLMS_ERROR(parse("[]"), kInvalid, "header is an array, not a JSON object");
  EXPECT_LLMS_ERROR(parse("42"), kInvalid, "header is an integer, not a JSON object");
  // Invalid UTF-8 inside a string (a lone continuation byte, then an overlong '/').
  EXPECT_LLMS_ERROR(parse("{\"a\x80\":{}}"), kInvalid, "header is not valid JSON");
  EXPECT_LLMS_ERROR(parse("{\"\xC0\xAF\":{}}"), kInvalid, "header is not valid JSON");
  // A lone surrogate escape.
  EXPECT_LLMS_ERROR(parse(R"({"\ud800":{}})"), kInvalid, "header is not valid JSON");
}

TEST(SafetensorsFile, RefusesDeepNestingWithoutExhaustingStack) {
  std::string deep = R"({"t":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"x":)";
  deep += std::string(100000, '[') + std::string(100000, ']') + "}}";
  EXPECT_LLMS_ERROR(parse(deep), kInvalid, "nested deeper than");
  std::string deep_root = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_LLMS_ERROR(parse(deep_root), kInvalid, "not a JSON object");
}

TEST(SafetensorsFile, RefusesMissingOrIllTypedFields) {
  EXPECT_LLMS_ERROR(parse(R"({"t":{"shape":[1],"data_offsets":[0,1]}})", {0}), kInvalid,
                    "tensor 't': missing 'dtype'");
  EXPECT_LLMS_ERROR(parse(R"({"t":{"dtype":"U8","data_offsets":[0,1]}})", {0}), kInvalid,
                    "tensor 't': missing 'shape'");
  EXPECT_LLMS_ERROR(parse(R"({"t":{"dtype":"U8","shape":[1]}})", {0}), kInvalid,
                    "tensor 't': missing 'data_offsets'");
  EXPECT_LLMS_ERROR(parse(R"({"t":{"dtype":8,"shape":[1],"data_offsets":[0,1]}})", {0}), kInvalid,
                    "tensor 't': dtype is an integer, expected a string");
  EXPECT_LLMS_ERROR(parse(R"({"t":{"dtype":"U8","shape":1,"data_offsets":[0,1]}})", {0}), kInvalid,
                    "tensor 't': shape is an integer, expected an array");
  EXPECT_LLMS_ERROR(parse(R"({"t":{"dtype":"U8","shape":[1],"data_offsets":{}}})", {0}), kInvalid,
                    "tensor 't': data_offsets is an object, expected an array");
  EXPECT_LLMS_ERROR(parse(R"({"t":[1,2]})"), kInvalid, "tensor 't': entry is an array");
  EXPECT_LLMS_ERROR(parse(R"({"t":null})"), kInvalid, "tensor 't': entry is null");
  EXPECT_LLMS_ERROR(parse(R"({"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", {0}), kInvalid,
                    "empty name");
  EXPECT_LLMS_ERROR(parse(R"({"__metadata__":{"k":1}})"), kInvalid,
                    "__metadata__: value of 'k' is an integer, expected a string");
  EXPECT_LLMS_ERROR(parse(R"({"__metadata__":[]})"), kInvalid, "__metadata__ is an array");
}

TEST(SafetensorsFile, RefusesUnknownDtype) {
  EXPECT_LLMS_ERROR(parse(R"({"t":{"dtype":"F7","shape":[1],"data_offsets":[0,1]}})", {0}),
                    kInvalid, "tensor 't': unknown dtype 'F7'");
  EXPECT_LLMS_ERROR(
      parse(R"({"t":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", {0, 0, 0, 0}), kInvalid,
      "unknown dtype 'f32'");
  EXPECT_LLMS_ERROR(parse(R"({"t":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})", {0}),
                    Error::Kind::kUnsupported, "tensor 't': dtype 'F4'");
}

TEST(SafetensorsFile, RefusesBadDims) {
  EXPECT_LLMS_ERROR(parse(R"({"t":{"dtype":"U8","shape":[2,-3],"data_offsets":[0,6]}})"), kInvalid,
                    "tensor 't': shape[1] is negative (-3)");
  EXPECT_LLMS_ERROR(parse(R"({"t":{"dtype":"U8","shape":[2.5],"data_offsets":[0,2]}})"), kInvalid,
                    "tensor 't': shape[0] is not an integer");
  EXPECT_LLMS_ERROR(parse(R"({"t":{"dtype":"U8","shape":[1e2],"data_offsets":[0,2]}})"), kInvalid,
                    "tensor 't': shape[0] is not an integer");
  EXPECT_LLMS_ERROR(
      parse(R"({"t":{"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,2]}})"),
      kInvalid, "tensor 't': shape[0] is not an integer");
  EXPECT_LLMS_ERROR(parse(R"({"t":{"dtype":"U8","shape":["2"],"data_offsets":[0,2]}})"), kInvalid,
                    "tensor 't': shape[0] is a string");
  EXPECT_LLMS_ERROR(parse(R"({"t":{"dtype":"U8","shape":[[2]],"data_offsets":[0,2]}})"), kInvalid,
                    "tensor 't': shape[0] is an array");
  std::string rank33 = R"({"t":{"dtype":"U8","shape":[)";
  for (int i = 0; i < 33; ++i) rank33 += i == 0 ? "1" : ",1";
  rank33 += R"(],"data_offsets":[0,1]}})";
  EXPECT_LLMS_ERROR(parse(rank33, {0}), kInvalid, "tensor 't': shape has more than 32 entries");
}

TEST(SafetensorsFile, RefusesElementAndByteCountOverflow) {
  // 2^32 * 2^32 * 2 elements overflows 64 bits.
  EXPECT_LLMS_ERROR(
      parse(R"({"t":{"dtype":"U8","shape":[4294967296,4294967296,2],"data_offsets":[0,0]}})"),
      kInvalid, "tensor 't': element count of shape [4294967296, 4294967296, 2] overflows");
  // 2^62 elements fit, but 2^62 * 4 bytes do not.
  EXPECT_LLMS_ERROR(
      parse(R"({"t":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})"),
      kInvalid, "tensor 't': byte size of shape [4611686018427387904] of F32 overflows");
}

TEST(SafetensorsFile, RefusesDataOffsetsOutOfRange) {
  std::vector<uint8_t> four = {1, 2, 3, 4};
  EXPECT_LLMS_ERROR(parse(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", four),
                    kInvalid, "tensor 't': data_offsets end 8 is past the end of the data buffer");
  EXPECT_LLMS_ERROR(parse(R"({"t":{"dtype":"U8","shape":[0],"data_offsets":[3,2]}})", four),
                    kInvalid, "tensor 't': data_offsets begin 3 is after end 2");
  EXPECT_LLMS_ERROR(
      parse(R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[18446744073709551615,0]}})", four),
      kInvalid, "is after end");
  EXPECT_LLMS_ERROR(parse(R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}})", four),
                    kInvalid, "tensor 't': data_offsets has more than 2 entries");
  EXPECT_LLMS_ERROR(parse(R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", four), kInvalid,
                    "tensor 't': data_offsets has 1 entries, expected 2");
  EXPECT_LLMS_ERROR(parse(R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}})", four),
                    kInvalid, "tensor 't': data_offsets[0] is negative");
}

TEST(SafetensorsFile, RefusesByteSizeMismatch) {
  EXPECT_LLMS_ERROR(
      parse(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::vector<uint8_t>(12)),
      kInvalid, "tensor 't': data_offsets span 8 bytes but shape [3] of F32 needs 12");
  EXPECT_LLMS_ERROR(parse(R"({"t":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,12]}})",
                          std::vector<uint8_t>(12)),
                    kInvalid, "span 12 bytes but shape [2, 2] of BF16 needs 8");
}

TEST(SafetensorsFile, RefusesOverlappingTensors) {
  EXPECT_LLMS_ERROR(parse(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                          std::vector<uint8_t>(12)),
                    kInvalid, "tensors 'a' [0, 8) and 'b' [4, 12) overlap");
  // Identical ranges overlap too.
  EXPECT_LLMS_ERROR(parse(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                          R"("b":{"dtype":"I8","shape":[2],"data_offsets":[0,2]}})",
                          std::vector<uint8_t>(2)),
                    kInvalid, "overlap");
}

TEST(SafetensorsFile, RefusesTruncatedFile) {
  auto bytes = SafetensorsBuilder().add_values<float>("w", "F32", {4}, {1, 2, 3, 4}).build();
  EXPECT_NO_THROW(SafetensorsFile::from_bytes(bytes));
  bytes.resize(bytes.size() - 1);
  EXPECT_LLMS_ERROR(SafetensorsFile::from_bytes(bytes), kInvalid,
                    "tensor 'w': data_offsets end 16 is past the end of the data buffer (15 bytes");
  bytes.resize(20);  // cut inside the header
  EXPECT_LLMS_ERROR(SafetensorsFile::from_bytes(bytes), kInvalid, "runs past the end of the file");
}

TEST(SafetensorsFile, RefusesDuplicateKeys) {
  EXPECT_LLMS_ERROR(parse(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                          R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                          {0, 0}),
                    kInvalid, "duplicate tensor name 'a'");
  EXPECT_LLMS_ERROR(
      parse(R"({"a":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}})", {0}), kInvalid,
      "tensor 'a': duplicate field 'dtype'");
  EXPECT_LLMS_ERROR(
      parse(R"({"a":{"dtype":"U8","shape":[1],"shape":[1],"data_offsets":[0,1]}})", {0}), kInvalid,
      "tensor 'a': duplicate field 'shape'");
  EXPECT_LLMS_ERROR(parse(R"({"__metadata__":{"k":"1","k":"2"}})"), kInvalid,
                    "__metadata__: duplicate key 'k'");
  EXPECT_LLMS_ERROR(parse(R"({"__metadata__":{},"__metadata__":{}})"), kInvalid,
                    "duplicate key '__metadata__'");
}

TEST(SafetensorsFile, ErrorNamesFileAndShortensLongNames) {
  TempDir dir;
  auto path =
      dir.write("bad.safetensors",
                safetensors_bytes(R"({"t":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})",
                                  std::vector<uint8_t>{0}));
  EXPECT_LLMS_ERROR(SafetensorsFile::open(path), kInvalid, path.string());
  EXPECT_LLMS_ERROR(SafetensorsFile::open(dir.path() / "absent.safetensors"),
                    Error::Kind::kNotFound, "absent.safetensors");

  std::string long_name(5000, 'x');
  std::string header = "{\"" + long_name + R"(":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})";
  try {
    parse(header, {0});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_LT(message.size(), 600u);
    EXPECT_NE(message.find("(5000 bytes)"), std::string::npos) << message;
  }
}

TEST(SafetensorsFile, TensorDataRefusesForeignTensor) {
  auto file = parse(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", {5, 6});
  SafetensorsTensor foreign = *file.find_tensor("a");
  foreign.offset = 1;
  foreign.n_bytes = 2;
  EXPECT_LLMS_ERROR(file.tensor_data(foreign), Error::Kind::kInvalidArgument, "'a'");
  foreign.offset = ~uint64_t{0};
  EXPECT_LLMS_ERROR(file.tensor_data(foreign), Error::Kind::kInvalidArgument, "'a'");
}

// --- ShardedSafetensors --------------------------------------------------------------------

struct ShardedFixture {
  TempDir dir;
  ShardedFixture() {
    dir.write("model-00001-of-00002.safetensors",
              SafetensorsBuilder()
                  .add_values<float>("embed", "F32", {2}, {1.0f, 2.0f})
                  .add_values<int32_t>("extra", "I32", {1}, {9})
                  .build());
    dir.write("model-00002-of-00002.safetensors",
              SafetensorsBuilder().add_values<uint16_t>("head", "F16", {3}, {1, 2, 3}).build());
  }
  void write_index(const std::string& weight_map) const {
    dir.write("model.safetensors.index.json",
              R"({"metadata":{"total_size":14},"weight_map":)" + weight_map + "}");
  }
};

TEST(ShardedSafetensors, LooksUpTensorsAcrossShards) {
  ShardedFixture f;
  f.write_index(R"({"embed":"model-00001-of-00002.safetensors",)"
                R"("head":"model-00002-of-00002.safetensors"})");
  for (const auto& path : {f.dir.path(), f.dir.path() / "model.safetensors.index.json"}) {
    auto weights = ShardedSafetensors::open(path);
    EXPECT_TRUE(weights.is_sharded());
    EXPECT_EQ(weights.n_shards(), 2u);
    ASSERT_EQ(weights.tensors().size(), 2u);  // "extra" is not in the weight map
    EXPECT_EQ(weights.tensors()[0].tensor->name, "embed");
    EXPECT_EQ(weights.tensors()[1].tensor->name, "head");
    EXPECT_EQ(weights.shard_path(weights.tensors()[1].shard_index).filename(),
              "model-00002-of-00002.safetensors");
    EXPECT_EQ(weights.find_tensor("extra"), nullptr);
    const SafetensorsTensor* head = weights.find_tensor("head");
    ASSERT_NE(head, nullptr);
    EXPECT_EQ(values_of<uint16_t>(weights.tensor_data(*head)), (std::vector<uint16_t>{1, 2, 3}));
    const SafetensorsTensor* embed = weights.find_tensor("embed");
    ASSERT_NE(embed, nullptr);
    EXPECT_EQ(values_of<float>(weights.tensor_data(*embed)), (std::vector<float>{1.0f, 2.0f}));
    SafetensorsTensor stranger = *embed;
    stranger.name = "nope";
    EXPECT_LLMS_ERROR(weights.tensor_data(stranger), Error::Kind::kInvalidArgument, "'nope'");
  }
}

TEST(ShardedSafetensors, ReadsGoldenShardedDirectory) {
  auto weights = ShardedSafetensors::open(LLMS_TEST_DATA_DIR "/safetensors/sharded");
  EXPECT_EQ(weights.n_shards(), 2u);
  ASSERT_EQ(weights.tensors().size(), 3u);
  const SafetensorsTensor* head = weights.find_tensor("lm_head.weight");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->shape, (std::vector<uint64_t>{4, 2}));
  EXPECT_EQ(values_of<float>(weights.tensor_data(*head)),
            (std::vector<float>{-4, -3, -2, -1, 0, 1, 2, 3}));
  const SafetensorsTensor* norm = weights.find_tensor("model.norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(values_of<uint16_t>(weights.tensor_data(*norm)),
            (std::vector<uint16_t>{0x3C00, 0x4000}));  // 1.0, 2.0 in F16
}

TEST(ShardedSafetensors, OpensSingleFileThroughSameInterface) {
  TempDir dir;
  auto path = dir.write("model.safetensors",
                        SafetensorsBuilder().add_values<int8_t>("x", "I8", {2}, {3, 4}).build());
  for (const auto& p : {dir.path(), path}) {
    auto weights = ShardedSafetensors::open(p);
    EXPECT_FALSE(weights.is_sharded());
    EXPECT_EQ(weights.n_shards(), 1u);
    ASSERT_NE(weights.find_tensor("x"), nullptr);
    EXPECT_EQ(values_of<int8_t>(weights.tensor_data(*weights.find_tensor("x"))),
              (std::vector<int8_t>{3, 4}));
  }
  TempDir empty;
  EXPECT_LLMS_ERROR(ShardedSafetensors::open(empty.path()), Error::Kind::kNotFound,
                    "no model.safetensors.index.json or model.safetensors");
}

TEST(ShardedSafetensors, RefusesTensorMissingFromItsShard) {
  ShardedFixture f;
  f.write_index(R"({"embed":"model-00001-of-00002.safetensors",)"
                R"("head":"model-00001-of-00002.safetensors"})");
  EXPECT_LLMS_ERROR(ShardedSafetensors::open(f.dir.path()), kInvalid,
                    "tensor 'head' is mapped to shard 'model-00001-of-00002.safetensors', which "
                    "does not contain it");
}

TEST(ShardedSafetensors, RefusesMissingShard) {
  ShardedFixture f;
  f.write_index(R"({"embed":"model-00001-of-00002.safetensors","head":"gone.safetensors"})");
  EXPECT_LLMS_ERROR(ShardedSafetensors::open(f.dir.path()), Error::Kind::kNotFound,
                    "shard 'gone.safetensors'");
}

TEST(ShardedSafetensors, RefusesPathTraversalInShardName) {
  ShardedFixture f;
  for (const char* name : {"../model-00001-of-00002.safetensors", "sub/model.safetensors",
                           "/etc/passwd", "..", ".", "a\\\\b", "a\\u0000b", ""}) {
    SCOPED_TRACE(name);
    f.write_index(std::string(R"({"embed":")") + name + "\"}");
    EXPECT_LLMS_ERROR(ShardedSafetensors::open(f.dir.path()), kInvalid, "not a plain file name");
  }
  // Control bytes are escaped in the message rather than cutting it short.
  f.write_index(R"({"embed":"a\u0000b"})");
  EXPECT_LLMS_ERROR(ShardedSafetensors::open(f.dir.path()), kInvalid, "'a\\x00b', which");
}

TEST(ShardedSafetensors, RefusesMalformedIndex) {
  ShardedFixture f;
  f.write_index("[]");
  EXPECT_LLMS_ERROR(ShardedSafetensors::open(f.dir.path()), kInvalid,
                    "weight_map is an array, expected an object");
  f.write_index("{}");
  EXPECT_LLMS_ERROR(ShardedSafetensors::open(f.dir.path()), kInvalid, "weight_map is empty");
  f.write_index(R"({"embed":3})");
  EXPECT_LLMS_ERROR(ShardedSafetensors::open(f.dir.path()), kInvalid,
                    "weight_map entry 'embed' is an integer");
  f.dir.write("model.safetensors.index.json", R"({"metadata":{}})");
  EXPECT_LLMS_ERROR(ShardedSafetensors::open(f.dir.path()), kInvalid, "missing 'weight_map'");
  f.dir.write("model.safetensors.index.json", "{");
  EXPECT_LLMS_ERROR(ShardedSafetensors::open(f.dir.path()), kInvalid, "not valid JSON");
}

TEST(ShardedSafetensors, ReportsInvalidShardWithItsName) {
  ShardedFixture f;
  f.dir.write("model-00002-of-00002.safetensors", safetensors_bytes("{", {}));
  f.write_index(R"({"head":"model-00002-of-00002.safetensors"})");
  EXPECT_LLMS_ERROR(ShardedSafetensors::open(f.dir.path()), kInvalid,
                    "shard 'model-00002-of-00002.safetensors'");
}

}  // namespace
}  // namespace llms::gguf
