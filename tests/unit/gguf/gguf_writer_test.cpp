// GgufWriter: byte-exact layout against hand-built bytes, then write -> GgufFile -> read back every
// value type, nested arrays, tensors, alignments, versions and files on disk; and the writer's own
// refusal of inputs that would make an invalid file.
#include "gguf/gguf_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf_bytes.h"
#include "temp_dir.h"
#include "util/error.h"

namespace llms::gguf {
namespace {

using testing::GgufBytes;
namespace vt = testing::gguf_type;

// The message of the llms::Error that fn throws ("" and a test failure when it throws none).
template <typename Fn>
std::string error_of(Fn&& fn, Error::Kind expected_kind = Error::Kind::kInvalidArgument) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(expected_kind)) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no llms::Error thrown";
  return "";
}

::testing::AssertionResult contains(const std::string& haystack, std::string_view needle) {
  if (haystack.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected \"" << needle << "\" in: " << haystack;
}
#define EXPECT_CONTAINS(haystack, needle) EXPECT_TRUE(contains((haystack), (needle)))

std::vector<uint8_t> iota_bytes(size_t n, uint8_t start = 1) {
  std::vector<uint8_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

std::vector<uint8_t> f32_bytes(std::initializer_list<float> values) {
  std::vector<uint8_t> out(values.size() * 4);
  std::memcpy(out.data(), std::data(values), out.size());
  return out;
}

// ---- Layout, checked byte for byte without the reader ---------------------------------------

TEST(GgufWriterLayout, EmptyFileIsHeaderPaddedToDefaultAlignment) {
  GgufWriter w;
  GgufBytes expected;
  expected.header(0, 0).pad_to(32);
  EXPECT_EQ(w.to_bytes(), expected.bytes());
  EXPECT_EQ(w.file_size(), 32u);
  EXPECT_EQ(w.data_offset(), 32u);
}

TEST(GgufWriterLayout, MetadataAndTensorsMatchHandBuiltBytes) {
  GgufWriter w;
  w.set_u32("a.u32", 7);
  w.set_string("a.str", "hi");
  w.set_i32s("a.arr", std::vector<int32_t>{-1, 2});
  auto t0 = f32_bytes({1.0f, 2.0f, 3.0f});  // 12 bytes -> padded to 32
  auto t1 = iota_bytes(34);                 // one Q8_0 block
  w.add_tensor("t0", GgmlType::kF32, std::vector<uint64_t>{3}, t0);
  w.add_tensor("t1", GgmlType::kQ8_0, std::vector<uint64_t>{32, 1}, t1);

  GgufBytes e;
  e.header(2, 3);
  e.kv_u32("a.u32", 7);
  e.kv_string("a.str", "hi");
  e.key("a.arr", vt::kArray).array_header(vt::kI32, 2).i32(-1).i32(2);
  e.tensor_info("t0", {3}, testing::ggml_id::kF32, 0);
  e.tensor_info("t1", {32, 1}, testing::ggml_id::kQ8_0, 32);
  const size_t header = e.size();
  e.pad_to(32);
  const size_t data = e.size();
  e.raw(t0).pad_to(32).raw(t1).pad_to(32);

  EXPECT_EQ(w.to_bytes(), e.bytes());
  EXPECT_EQ(w.data_offset(), data);
  EXPECT_GT(data, header);
  EXPECT_EQ(w.file_size(), e.size());
}

TEST(GgufWriterLayout, AlignmentKeyIsWrittenAndUsed) {
  GgufWriter w;
  w.set_alignment(8);
  w.set_bool("b", true);
  w.add_tensor("x", GgmlType::kI8, std::vector<uint64_t>{3}, iota_bytes(3));
  w.add_tensor("y", GgmlType::kI8, std::vector<uint64_t>{1}, iota_bytes(1, 9));

  GgufBytes e;
  e.header(2, 2).kv_u32("general.alignment", 8).key("b", vt::kBool).u8(1);
  e.tensor_info("x", {3}, 24, 0).tensor_info("y", {1}, 24, 8).pad_to(8);
  e.raw(iota_bytes(3)).pad_to(8).raw(iota_bytes(1, 9)).pad_to(8);
  EXPECT_EQ(w.to_bytes(), e.bytes());
  EXPECT_EQ(w.alignment(), 8u);
}

TEST(GgufWriterLayout, ArrayOfArraysEncodesEachInnerHeader) {
  const std::vector<std::string> words = {"a", "bc"};
  const std::vector<WriteValue> inner = {WriteValue::u16s(std::vector<uint16_t>{5}),
                                         WriteValue::strings(words)};
  GgufWriter w;
  w.set("n", WriteValue::array(ValueType::kArray, inner));
  GgufBytes e;
  e.header(0, 1).key("n", vt::kArray).array_header(vt::kArray, 2);
  e.array_header(vt::kU16, 1).u16(5);
  e.array_header(vt::kString, 2).str("a").str("bc");
  e.pad_to(32);
  EXPECT_EQ(w.to_bytes(), e.bytes());
}

TEST(GgufWriterLayout, SettingAKeyAgainReplacesItInPlace) {
  GgufWriter w;
  w.set_u8("first", 1);
  w.set_u8("second", 2);
  w.set_string("first", "again");
  EXPECT_EQ(w.n_kv(), 2u);
  GgufBytes e;
  e.header(0, 2).kv_string("first", "again").kv_u8("second", 2).pad_to(32);
  EXPECT_EQ(w.to_bytes(), e.bytes());
  EXPECT_TRUE(w.erase("first"));
  EXPECT_FALSE(w.erase("first"));
  EXPECT_FALSE(w.has("first"));
  EXPECT_TRUE(w.has("second"));
  EXPECT_EQ(w.n_kv(), 1u);
}

TEST(GgufWriterLayout, Version2) {
  GgufWriter w(2);
  GgufBytes e;
  e.header(0, 0, 2).pad_to(32);
  EXPECT_EQ(w.to_bytes(), e.bytes());
}

// ---- The writer refuses what would make an invalid file --------------------------------------

TEST(GgufWriterValidation, RefusesBadVersionsAndKeys) {
  EXPECT_CONTAINS(error_of([] { GgufWriter w(1); }), "version 1");
  EXPECT_CONTAINS(error_of([] { GgufWriter w(4); }), "version 4");
  GgufWriter w;
  EXPECT_CONTAINS(error_of([&] { w.set_u8("", 1); }), "key is empty");
  EXPECT_CONTAINS(error_of([&] { w.set_u8(std::string(70000, 'k'), 1); }), "longer than");
  EXPECT_EQ(w.n_kv(), 0u);
}

TEST(GgufWriterValidation, RefusesBadAlignment) {
  GgufWriter w;
  for (uint32_t bad : {0u, 48u, 3u, 1u << 21, 1u << 31}) {
    std::string msg = error_of([&] { w.set_alignment(bad); });
    EXPECT_CONTAINS(msg, "general.alignment");
    EXPECT_CONTAINS(msg, std::to_string(bad));
  }
  EXPECT_CONTAINS(error_of([&] { w.set_string("general.alignment", "32"); }), "must be a u32");
  EXPECT_CONTAINS(error_of([&] { w.set_u64("general.alignment", 32); }), "must be a u32");
  EXPECT_EQ(w.alignment(), 32u);
  EXPECT_FALSE(w.has("general.alignment"));
  w.set_alignment(64);
  EXPECT_EQ(w.alignment(), 64u);
  EXPECT_TRUE(w.erase("general.alignment"));
  EXPECT_EQ(w.alignment(), 32u);
}

TEST(GgufWriterValidation, RefusesBadTensors) {
  GgufWriter w;
  const std::vector<uint64_t> v4 = {4};
  auto four_f32 = f32_bytes({1, 2, 3, 4});
  w.add_tensor("ok", GgmlType::kF32, v4, four_f32);

  EXPECT_CONTAINS(error_of([&] { w.add_tensor("", GgmlType::kF32, v4, four_f32); }),
                  "tensor name is empty");
  EXPECT_CONTAINS(
      error_of([&] { w.add_tensor(std::string(64, 'n'), GgmlType::kF32, v4, four_f32); }),
      "longer than 63");
  EXPECT_CONTAINS(error_of([&] { w.add_tensor("ok", GgmlType::kF32, v4, four_f32); }),
                  "'ok' is added twice");
  EXPECT_CONTAINS(error_of([&] { w.add_tensor("u", static_cast<GgmlType>(31), v4, four_f32); }),
                  "unknown ggml type 31");
  EXPECT_CONTAINS(
      error_of([&] { w.add_tensor("d0", GgmlType::kF32, std::vector<uint64_t>{}, four_f32); }),
      "'d0' has 0 dimensions");
  EXPECT_CONTAINS(
      error_of([&] {
        w.add_tensor("d5", GgmlType::kF32, std::vector<uint64_t>{4, 1, 1, 1, 1}, four_f32);
      }),
      "'d5' has 5 dimensions");
  EXPECT_CONTAINS(error_of([&] {
                    w.add_tensor("z", GgmlType::kF32, std::vector<uint64_t>{4, 0}, four_f32);
                  }),
                  "'z' has a zero dimension (ne[1] = 0)");
  EXPECT_CONTAINS(error_of([&] {
                    w.add_tensor("big", GgmlType::kI8, std::vector<uint64_t>{uint64_t{1} << 63},
                                 four_f32);
                  }),
                  "does not fit in int64");
  EXPECT_CONTAINS(error_of([&] {
                    w.add_tensor("ovf", GgmlType::kI8,
                                 std::vector<uint64_t>{uint64_t{1} << 32, uint64_t{1} << 32},
                                 four_f32);
                  }),
                  "'ovf': the element count overflows");
  EXPECT_CONTAINS(error_of([&] {
                    w.add_tensor("bytes", GgmlType::kF64,
                                 std::vector<uint64_t>{uint64_t{1} << 31, uint64_t{1} << 31},
                                 four_f32);
                  }),
                  "'bytes': the byte size overflows");
  EXPECT_CONTAINS(error_of([&] {
                    w.add_tensor("q", GgmlType::kQ4_K, std::vector<uint64_t>{100}, iota_bytes(144));
                  }),
                  "ne[0] = 100 is not a multiple of the block size 256 of Q4_K");
  EXPECT_CONTAINS(error_of([&] {
                    w.add_tensor("short", GgmlType::kQ8_0, std::vector<uint64_t>{64},
                                 iota_bytes(34));
                  }),
                  "'short' needs 68 bytes of Q8_0 data for its shape, got 34");
  EXPECT_EQ(w.n_tensors(), 1u);
}

TEST(GgufWriterValidation, ArrayItemsMustShareTheElementType) {
  const std::vector<WriteValue> mixed = {WriteValue::u8(1), WriteValue::i8(2)};
  EXPECT_CONTAINS(error_of([&] { WriteValue::array(ValueType::kUint8, mixed); }),
                  "array item 1 is a");
  EXPECT_CONTAINS(
      error_of([&] { WriteValue::array(static_cast<ValueType>(13), std::vector<WriteValue>{}); }),
      "type 13");
  auto empty = WriteValue::array(ValueType::kFloat64, std::vector<WriteValue>{});
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_EQ(empty.element_type(), ValueType::kFloat64);
}

// ---- Round trips through the reader ----------------------------------------------------------

GgufFile read_back(const GgufWriter& w) {
  auto bytes = w.to_bytes();
  EXPECT_EQ(bytes.size(), w.file_size());
  return GgufFile::from_bytes(bytes);
}

TEST(GgufWriterRoundTrip, EveryScalarType) {
  GgufWriter w;
  w.set_u8("u8", 255);
  w.set_i8("i8", -128);
  w.set_u16("u16", 65535);
  w.set_i16("i16", -32768);
  w.set_u32("u32", 0xFFFFFFFFu);
  w.set_i32("i32", std::numeric_limits<int32_t>::min());
  w.set_f32("f32", 1.5f);
  w.set_bool("t", true);
  w.set_bool("f", false);
  w.set_string("s", std::string("caf\xC3\xA9 \xF0\x9F\x99\x82 nul:\0:end", 19));
  w.set_string("empty", "");
  w.set_u64("u64", std::numeric_limits<uint64_t>::max());
  w.set_i64("i64", std::numeric_limits<int64_t>::min());
  w.set_f64("f64", 3.141592653589793);
  w.set_f32("nan", std::numeric_limits<float>::quiet_NaN());

  GgufFile f = read_back(w);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.tensors().size(), 0u);
  ASSERT_EQ(f.metadata().size(), 15u);
  const std::vector<std::pair<std::string, ValueType>> expected_types = {
      {"u8", ValueType::kUint8},    {"i8", ValueType::kInt8},      {"u16", ValueType::kUint16},
      {"i16", ValueType::kInt16},   {"u32", ValueType::kUint32},   {"i32", ValueType::kInt32},
      {"f32", ValueType::kFloat32}, {"t", ValueType::kBool},       {"f", ValueType::kBool},
      {"s", ValueType::kString},    {"empty", ValueType::kString}, {"u64", ValueType::kUint64},
      {"i64", ValueType::kInt64},   {"f64", ValueType::kFloat64},  {"nan", ValueType::kFloat32}};
  for (size_t i = 0; i < expected_types.size(); ++i) {
    EXPECT_EQ(f.metadata()[i].key, expected_types[i].first);  // insertion order kept
    EXPECT_EQ(f.metadata()[i].value.type(), expected_types[i].second) << expected_types[i].first;
  }
  EXPECT_EQ(f.get_uint("u8"), 255u);
  EXPECT_EQ(f.get_int("i8"), -128);
  EXPECT_EQ(f.get_uint("u16"), 65535u);
  EXPECT_EQ(f.get_int("i16"), -32768);
  EXPECT_EQ(f.get_uint("u32"), 0xFFFFFFFFu);
  EXPECT_EQ(f.get_int("i32"), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(f.get_float("f32"), 1.5);
  EXPECT_EQ(f.get_bool("t"), true);
  EXPECT_EQ(f.get_bool("f"), false);
  EXPECT_EQ(f.get_string("s"), std::string("caf\xC3\xA9 \xF0\x9F\x99\x82 nul:\0:end", 19));
  EXPECT_EQ(f.get_string("empty"), std::string());
  EXPECT_EQ(f.get_uint("u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f.get_int("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.get_float("f64"), 3.141592653589793);
  auto nan = f.get_float("nan");
  ASSERT_TRUE(nan.has_value());
  EXPECT_TRUE(std::isnan(*nan));
  EXPECT_EQ(f.get_uint("absent"), std::nullopt);
  // as_uint / as_int accept any integer type whose value fits, and only those.
  EXPECT_EQ(f.find("u8")->as_int(), 255);
  EXPECT_EQ(f.find("i8")->as_uint(), std::nullopt);
  EXPECT_EQ(f.find("u64")->as_int(), std::nullopt);
  EXPECT_EQ(f.find("s")->as_uint(), std::nullopt);
  EXPECT_EQ(f.find("u32")->as_float(), 4294967295.0);
}

TEST(GgufWriterRoundTrip, EveryScalarArrayType) {
  GgufWriter w;
  w.set("u8s", WriteValue::u8s(std::vector<uint8_t>{0, 1, 255}));
  w.set("i8s", WriteValue::i8s(std::vector<int8_t>{-128, 0, 127}));
  w.set("u16s", WriteValue::u16s(std::vector<uint16_t>{0, 65535}));
  w.set("i16s", WriteValue::i16s(std::vector<int16_t>{-32768, 32767}));
  w.set("u32s", WriteValue::u32s(std::vector<uint32_t>{0, 0xFFFFFFFFu}));
  w.set("i32s", WriteValue::i32s(std::vector<int32_t>{-5, 6, 7}));
  w.set("f32s", WriteValue::f32s(std::vector<float>{0.25f, -2.0f}));
  const bool flags[] = {true, false, true};
  w.set("bools", WriteValue::bools(flags));
  w.set("u64s", WriteValue::u64s(std::vector<uint64_t>{1, uint64_t{1} << 40}));
  w.set("i64s", WriteValue::i64s(std::vector<int64_t>{-(int64_t{1} << 40), 3}));
  w.set("f64s", WriteValue::f64s(std::vector<double>{1e300, -0.5}));
  w.set("none", WriteValue::i32s(std::vector<int32_t>{}));

  GgufFile f = read_back(w);
  auto expect_ints = [&](const char* key, ValueType element, std::vector<int64_t> values) {
    const Value* v = f.find(key);
    ASSERT_NE(v, nullptr) << key;
    EXPECT_EQ(v->type(), ValueType::kArray) << key;
    EXPECT_EQ(v->element_type(), element) << key;
    ASSERT_EQ(v->size(), values.size()) << key;
    EXPECT_EQ(v->to_ints(), values) << key;
    EXPECT_EQ(f.get_ints(key), values) << key;
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(v->element(i).type(), element) << key;
      EXPECT_EQ(v->element(i).as_int(), values[i]) << key << "[" << i << "]";
    }
  };
  expect_ints("u8s", ValueType::kUint8, {0, 1, 255});
  expect_ints("i8s", ValueType::kInt8, {-128, 0, 127});
  expect_ints("u16s", ValueType::kUint16, {0, 65535});
  expect_ints("i16s", ValueType::kInt16, {-32768, 32767});
  expect_ints("u32s", ValueType::kUint32, {0, 0xFFFFFFFFll});
  expect_ints("i32s", ValueType::kInt32, {-5, 6, 7});
  expect_ints("u64s", ValueType::kUint64, {1, int64_t{1} << 40});
  expect_ints("i64s", ValueType::kInt64, {-(int64_t{1} << 40), 3});
  expect_ints("none", ValueType::kInt32, {});

  EXPECT_EQ(f.get_floats("f32s"), (std::vector<double>{0.25, -2.0}));
  EXPECT_EQ(f.get_floats("f64s"), (std::vector<double>{1e300, -0.5}));
  EXPECT_EQ(f.find("f64s")->element(1).as_float(), -0.5);
  const Value* bools = f.find("bools");
  ASSERT_NE(bools, nullptr);
  EXPECT_EQ(bools->element_type(), ValueType::kBool);
  ASSERT_EQ(bools->size(), 3u);
  EXPECT_EQ(bools->element(0).as_bool(), true);
  EXPECT_EQ(bools->element(1).as_bool(), false);
  EXPECT_EQ(bools->element(2).as_bool(), true);
  // A string array is not a number array and vice versa.
  EXPECT_EQ(f.find("i32s")->to_strings(), std::nullopt);
}

TEST(GgufWriterRoundTrip, StringArrays) {
  std::vector<std::string> vocab;
  for (int i = 0; i < 1000; ++i) vocab.push_back("tok" + std::to_string(i));
  vocab.push_back("");
  vocab.push_back("\xC4\xA0hello");  // GPT-2 byte-level space
  GgufWriter w;
  w.set_strings("tokenizer.ggml.tokens", vocab);
  const std::vector<std::string_view> views = {"x", "yz"};
  w.set("views", WriteValue::strings(views));
  w.set("empty", WriteValue::strings(std::vector<std::string>{}));

  GgufFile f = read_back(w);
  EXPECT_EQ(f.get_strings("tokenizer.ggml.tokens"), vocab);
  const Value* v = f.find("tokenizer.ggml.tokens");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->element_type(), ValueType::kString);
  EXPECT_EQ(v->size(), vocab.size());
  EXPECT_EQ(v->element(1001).as_string(), "\xC4\xA0hello");
  EXPECT_EQ(f.get_strings("views"), (std::vector<std::string>{"x", "yz"}));
  EXPECT_EQ(f.get_strings("empty"), std::vector<std::string>{});
}

TEST(GgufWriterRoundTrip, NestedArrays) {
  // [[1, 2, 3], [], [-4]] as i32, [["a"], ["b", "c"]] as strings, and [[[7]], [[8, 9]]] as u8.
  const std::vector<WriteValue> ints = {WriteValue::i32s(std::vector<int32_t>{1, 2, 3}),
                                        WriteValue::i32s(std::vector<int32_t>{}),
                                        WriteValue::i32s(std::vector<int32_t>{-4})};
  const std::vector<std::string> a = {"a"}, bc = {"b", "c"};
  const std::vector<WriteValue> strs = {WriteValue::strings(a), WriteValue::strings(bc)};
  const std::vector<WriteValue> inner0 = {WriteValue::u8s(std::vector<uint8_t>{7})};
  const std::vector<WriteValue> inner1 = {WriteValue::u8s(std::vector<uint8_t>{8, 9})};
  const std::vector<WriteValue> deep = {WriteValue::array(ValueType::kArray, inner0),
                                        WriteValue::array(ValueType::kArray, inner1)};
  GgufWriter w;
  w.set("ints", WriteValue::array(ValueType::kArray, ints));
  w.set("strs", WriteValue::array(ValueType::kArray, strs));
  w.set("deep", WriteValue::array(ValueType::kArray, deep));
  w.set_u32("after", 99);  // parsing resumes correctly after the nested values

  GgufFile f = read_back(w);
  const Value* vi = f.find("ints");
  ASSERT_NE(vi, nullptr);
  EXPECT_EQ(vi->element_type(), ValueType::kArray);
  ASSERT_EQ(vi->size(), 3u);
  EXPECT_EQ(vi->element(0).to_ints(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(vi->element(1).size(), 0u);
  EXPECT_EQ(vi->element(1).element_type(), ValueType::kInt32);
  EXPECT_EQ(vi->element(2).element(0).as_int(), -4);
  EXPECT_EQ(vi->to_ints(), std::nullopt);  // not an array of integers

  const Value* vs = f.find("strs");
  ASSERT_NE(vs, nullptr);
  ASSERT_EQ(vs->size(), 2u);
  EXPECT_EQ(vs->element(0).to_strings(), a);
  EXPECT_EQ(vs->element(1).to_strings(), bc);

  const Value* vd = f.find("deep");
  ASSERT_NE(vd, nullptr);
  ASSERT_EQ(vd->size(), 2u);
  EXPECT_EQ(vd->element(0).element_type(), ValueType::kArray);
  EXPECT_EQ(vd->element(0).element(0).element(0).as_uint(), 7u);
  EXPECT_EQ(vd->element(1).element(0).to_ints(), (std::vector<int64_t>{8, 9}));
  EXPECT_FALSE(vd->to_display_string().empty());
  EXPECT_EQ(f.get_uint("after"), 99u);
}

struct TensorCase {
  std::string name;
  GgmlType type;
  std::vector<uint64_t> ne;
};

// A writer holding one tensor of several types and shapes, with distinct bytes each.
GgufWriter writer_with_tensors(const std::vector<TensorCase>& cases,
                               std::vector<std::vector<uint8_t>>& data) {
  GgufWriter w;
  w.set_string("general.architecture", "test");
  uint8_t seed = 1;
  for (const auto& c : cases) {
    uint64_t n = std::accumulate(c.ne.begin(), c.ne.end(), uint64_t{1}, std::multiplies<>());
    data.push_back(iota_bytes(*ggml_row_bytes(c.type, n), seed));
    seed = static_cast<uint8_t>(seed + 37);
    w.add_tensor(c.name, c.type, c.ne, data.back());
  }
  return w;
}

const std::vector<TensorCase> kTensorCases = {
    {"token_embd.weight", GgmlType::kF32, {3, 2}},
    {"half", GgmlType::kF16, {5}},
    {"blk.0.attn_q.weight", GgmlType::kQ8_0, {64, 3}},
    {"blk.0.ffn_down.weight", GgmlType::kQ4_K, {256, 2}},
    {"q6", GgmlType::kQ6_K, {256}},
    {"four.dims", GgmlType::kI16, {2, 3, 1, 2}},
    {"bf16", GgmlType::kBF16, {7, 1, 3}},
};

void expect_tensors(const GgufFile& f, const std::vector<TensorCase>& cases,
                    const std::vector<std::vector<uint8_t>>& data, uint64_t alignment) {
  ASSERT_EQ(f.tensors().size(), cases.size());
  EXPECT_EQ(f.alignment(), alignment);
  EXPECT_EQ(f.data_offset() % alignment, 0u);
  uint64_t previous_end = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const TensorInfo& t = f.tensors()[i];
    SCOPED_TRACE(cases[i].name);
    EXPECT_EQ(t.name, cases[i].name);
    EXPECT_EQ(t.type, cases[i].type);
    ASSERT_EQ(t.n_dims, cases[i].ne.size());
    for (size_t d = 0; d < 4; ++d) {
      EXPECT_EQ(t.ne[d], d < cases[i].ne.size() ? cases[i].ne[d] : 1u) << "ne[" << d << "]";
    }
    EXPECT_EQ(t.n_elements, std::accumulate(cases[i].ne.begin(), cases[i].ne.end(), uint64_t{1},
                                            std::multiplies<>()));
    EXPECT_EQ(t.n_bytes, data[i].size());
    EXPECT_EQ(t.offset % alignment, 0u);
    EXPECT_GE(t.offset, previous_end);
    previous_end = t.offset + t.n_bytes;
    auto span = f.tensor_data(t);
    EXPECT_EQ(std::vector<uint8_t>(span.begin(), span.end()), data[i]);
    ASSERT_EQ(f.find_tensor(cases[i].name), &t);
  }
  EXPECT_EQ(f.find_tensor("absent"), nullptr);
}

TEST(GgufWriterRoundTrip, TensorsOfSeveralTypesAndShapes) {
  std::vector<std::vector<uint8_t>> data;
  GgufWriter w = writer_with_tensors(kTensorCases, data);
  auto bytes = w.to_bytes();
  GgufFile f = GgufFile::from_bytes(bytes);
  EXPECT_EQ(f.file_size(), bytes.size());
  EXPECT_EQ(f.data_offset(), w.data_offset());
  EXPECT_EQ(f.get_string("general.architecture"), "test");
  expect_tensors(f, kTensorCases, data, 32);
}

TEST(GgufWriterRoundTrip, AlignmentVariants) {
  for (uint32_t alignment : {1u, 2u, 8u, 32u, 64u, 4096u}) {
    SCOPED_TRACE(alignment);
    std::vector<std::vector<uint8_t>> data;
    GgufWriter w = writer_with_tensors(kTensorCases, data);
    w.set_alignment(alignment);
    auto bytes = w.to_bytes();
    EXPECT_EQ(bytes.size() % alignment, 0u);
    GgufFile f = GgufFile::from_bytes(bytes);
    EXPECT_EQ(f.get_uint("general.alignment"), alignment);
    EXPECT_EQ(f.data_offset(), w.data_offset());
    expect_tensors(f, kTensorCases, data, alignment);
  }
}

TEST(GgufWriterRoundTrip, TensorViewsAndMovedBuffers) {
  const auto viewed = iota_bytes(34 * 2, 3);
  GgufWriter w;
  w.add_tensor_view("viewed", GgmlType::kQ8_0, std::vector<uint64_t>{64}, viewed);
  auto moved = f32_bytes({4, 5});
  const auto moved_copy = moved;
  w.add_tensor("moved", GgmlType::kF32, std::vector<uint64_t>{2}, std::move(moved));
  GgufFile f = read_back(w);
  auto a = f.tensor_data(*f.find_tensor("viewed"));
  auto b = f.tensor_data(*f.find_tensor("moved"));
  EXPECT_EQ(std::vector<uint8_t>(a.begin(), a.end()), viewed);
  EXPECT_EQ(std::vector<uint8_t>(b.begin(), b.end()), moved_copy);
}

TEST(GgufWriterRoundTrip, Version2ReadsBack) {
  GgufWriter w(2);
  w.set_u32("k", 1);
  w.add_tensor("t", GgmlType::kF32, std::vector<uint64_t>{1}, f32_bytes({9}));
  GgufFile f = read_back(w);
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.get_uint("k"), 1u);
  EXPECT_EQ(f.tensors().size(), 1u);
}

TEST(GgufWriterRoundTrip, CopyMetadataReproducesTheFile) {
  // Everything the writer can express, read back, copied into a new writer with the same tensors:
  // the bytes must be identical (this is how quantize carries metadata over).
  const std::vector<std::string> words = {"x", "", "zz"};
  const std::vector<WriteValue> nested = {WriteValue::strings(words),
                                          WriteValue::f64s(std::vector<double>{2.5})};
  GgufWriter w;
  w.set_u8("u8", 200);
  w.set_i8("i8", -3);
  w.set_u16("u16", 600);
  w.set_i16("i16", -600);
  w.set_u32("u32", 70000);
  w.set_i32("i32", -70000);
  w.set_f32("f32", 0.1f);
  w.set_bool("b", true);
  w.set_string("s", "text");
  w.set_u64("u64", uint64_t{1} << 50);
  w.set_i64("i64", -(int64_t{1} << 50));
  w.set_f64("f64", 0.1);
  w.set_strings("words", words);
  w.set("nested", WriteValue::array(ValueType::kArray, nested));
  w.set("f32s", WriteValue::f32s(std::vector<float>{1.25f, -0.0f}));
  const auto t = iota_bytes(34);
  w.add_tensor("q", GgmlType::kQ8_0, std::vector<uint64_t>{32}, t);
  auto original = w.to_bytes();

  GgufFile f = GgufFile::from_bytes(original);
  GgufWriter copy;
  copy.copy_metadata(f);
  for (const auto& info : f.tensors()) {
    copy.add_tensor_view(info.name, info.type,
                         std::span<const uint64_t>(info.ne.data(), info.n_dims),
                         f.tensor_data(info));
  }
  EXPECT_EQ(copy.to_bytes(), original);
}

TEST(GgufWriterRoundTrip, CopyMetadataLeavesAlignmentToTheWriter) {
  GgufWriter w;
  w.set_alignment(64);
  w.set_u8("k", 1);
  GgufFile f = read_back(w);
  GgufWriter copy;
  copy.copy_metadata(f);
  EXPECT_FALSE(copy.has("general.alignment"));
  EXPECT_EQ(copy.alignment(), 32u);
  EXPECT_TRUE(copy.has("k"));
}

// ---- Files on disk ---------------------------------------------------------------------------

std::vector<uint8_t> slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(GgufWriterFile, WriteThenOpen) {
  testing::TempDir dir;
  std::vector<std::vector<uint8_t>> data;
  GgufWriter w = writer_with_tensors(kTensorCases, data);
  w.set_alignment(64);
  const auto path = dir.path() / "model.gguf";
  w.write(path);
  EXPECT_EQ(slurp(path), w.to_bytes());
  GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.file_size(), w.file_size());
  EXPECT_EQ(f.get_string("general.architecture"), "test");
  expect_tensors(f, kTensorCases, data, 64);

  // Only the file itself is left in the directory (no temporary).
  size_t n_entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    ++n_entries;
  }
  EXPECT_EQ(n_entries, 1u);
}

TEST(GgufWriterFile, OverwritesAnExistingFile) {
  testing::TempDir dir;
  const auto path = dir.write("model.gguf", std::string_view("old contents, longer than the new"));
  GgufWriter w;
  w.set_u8("k", 5);
  w.write(path);
  EXPECT_EQ(slurp(path), w.to_bytes());
  EXPECT_EQ(GgufFile::open(path).get_uint("k"), 5u);
}

TEST(GgufWriterFile, UnwritableDirectoryIsAnIoErrorNamingThePath) {
  testing::TempDir dir;
  const auto path = dir.path() / "no" / "such" / "dir" / "model.gguf";
  GgufWriter w;
  std::string msg = error_of([&] { w.write(path); }, Error::Kind::kIo);
  EXPECT_CONTAINS(msg, path.string());
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace llms::gguf
