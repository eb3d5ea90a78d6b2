// GgufFile refuses corrupt and hostile files: every case must throw llms::Error whose message
// names the culprit (key, tensor or field) and the problem, and must neither crash, hang, nor
// allocate far beyond the size of the input.
//
// The over-allocation check replaces the global operator new of this test binary with a malloc
// wrapper that, while armed, records the largest single request and refuses (std::bad_alloc) any
// request above a limit proportional to the input, so a reader that trusts a hostile count fails
// here instead of reserving gigabytes.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <initializer_list>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf_bytes.h"
#include "temp_dir.h"
#include "util/error.h"

// ---- Allocation probe ------------------------------------------------------------------------

namespace {

std::atomic<bool> g_probe_armed{false};
std::atomic<size_t> g_probe_limit{0};
std::atomic<size_t> g_probe_largest{0};

void* probed_malloc(std::size_t n) {
  if (g_probe_armed.load(std::memory_order_relaxed)) {
    size_t largest = g_probe_largest.load(std::memory_order_relaxed);
    while (n > largest && !g_probe_largest.compare_exchange_weak(largest, n)) {
    }
    if (n > g_probe_limit.load(std::memory_order_relaxed)) throw std::bad_alloc();
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}

}  // namespace

void* operator new(std::size_t n) { return probed_malloc(n); }
void* operator new[](std::size_t n) { return probed_malloc(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return probed_malloc(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return probed_malloc(n);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace llms::gguf {
namespace {

using testing::GgufBytes;
namespace vt = testing::gguf_type;
namespace gt = testing::ggml_id;

constexpr uint64_t k2p61 = uint64_t{1} << 61;
constexpr uint64_t k2p62 = uint64_t{1} << 62;
constexpr uint64_t k2p63 = uint64_t{1} << 63;
constexpr uint32_t kGgmlF64 = 28;

// Arms the probe for the lifetime of the object: no single allocation above the limit.
class AllocationLimit {
 public:
  explicit AllocationLimit(size_t limit) {
    g_probe_largest = 0;
    g_probe_limit = limit;
    g_probe_armed = true;
  }
  ~AllocationLimit() { g_probe_armed = false; }
  AllocationLimit(const AllocationLimit&) = delete;
  AllocationLimit& operator=(const AllocationLimit&) = delete;
  size_t largest() const { return g_probe_largest; }
};

// A parse may allocate a few times the input (the copy of the bytes, tables of keys and tensors
// sized by counts already checked against the bytes), never more.
size_t allocation_limit_for(size_t n_bytes) { return (size_t{1} << 20) + 16 * n_bytes; }

struct Refusal {
  bool thrown = false;
  Error::Kind kind = Error::Kind::kInvalidFile;
  std::string message;
};

// Parses `bytes` under the allocation limit and reports how it was refused. Any exception other
// than llms::Error (std::bad_alloc from the probe, std::length_error, ...) is a test failure.
Refusal parse_expecting_refusal(std::span<const uint8_t> bytes) {
  Refusal r;
  try {
    AllocationLimit limit(allocation_limit_for(bytes.size()));
    GgufFile file = GgufFile::from_bytes(bytes);
  } catch (const Error& e) {
    r.thrown = true;
    r.kind = e.kind();
    r.message = e.what();
  } catch (const std::bad_alloc&) {
    ADD_FAILURE() << "the reader tried to allocate " << g_probe_largest.load()
                  << " bytes at once for a " << bytes.size() << "-byte file";
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not an llms::Error: " << e.what();
  }
  return r;
}

// Expects `bytes` to be refused with Error(kInvalidFile) whose message contains every needle.
void expect_refused(std::span<const uint8_t> bytes, std::initializer_list<std::string_view> needles,
                    Error::Kind kind = Error::Kind::kInvalidFile) {
  Refusal r = parse_expecting_refusal(bytes);
  if (!r.thrown) {
    ADD_FAILURE() << "the file was accepted";
    return;
  }
  EXPECT_EQ(static_cast<int>(r.kind), static_cast<int>(kind)) << r.message;
  EXPECT_EQ(r.message.rfind("GGUF: ", 0), 0u) << r.message;
  for (std::string_view needle : needles) {
    EXPECT_NE(r.message.find(needle), std::string::npos)
        << "expected \"" << needle << "\" in: " << r.message;
  }
}

#define EXPECT_REFUSED(bytes, ...)               \
  do {                                           \
    SCOPED_TRACE("EXPECT_REFUSED(" #bytes ")");  \
    expect_refused((bytes).span(), __VA_ARGS__); \
  } while (0)

// A file of one tensor and its zero data, laid out with the default alignment of 32.
GgufBytes one_tensor_file(std::string_view name, std::initializer_list<uint64_t> ne,
                          uint32_t ggml_type, uint64_t offset, size_t n_data_bytes) {
  GgufBytes b;
  b.header(1, 0).tensor_info(name, ne, ggml_type, offset).pad_to(32).fill(n_data_bytes);
  return b;
}

// ---- The probe itself ------------------------------------------------------------------------

TEST(GgufCorruptProbe, RefusesLargeAllocationsOnlyWhileArmed) {
  {
    AllocationLimit limit(1024);
    EXPECT_THROW(std::vector<char>(4096), std::bad_alloc);
    EXPECT_EQ(limit.largest(), 4096u);
  }
  EXPECT_NO_THROW(std::vector<char>(4096));
}

TEST(GgufCorruptProbe, AValidFileParsesUnderTheLimit) {
  GgufBytes b = one_tensor_file("t", {8}, gt::kF32, 0, 32);
  AllocationLimit limit(allocation_limit_for(b.size()));
  GgufFile f = GgufFile::from_bytes(b.span());
  EXPECT_EQ(f.tensors().size(), 1u);
  EXPECT_GT(limit.largest(), 0u);
}

// ---- Truncation ------------------------------------------------------------------------------

// A file with every section: scalars, a string, string and nested arrays, three tensors.
std::vector<uint8_t> full_file() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_f32("llama.rope.freq_base", 10000.0f);
  w.set_bool("flag", true);
  const std::vector<std::string> tokens = {"<s>", "</s>", "hello", "world"};
  w.set_strings("tokenizer.ggml.tokens", tokens);
  w.set_f32s("tokenizer.ggml.scores", std::vector<float>{0, 0, -1, -2});
  const std::vector<WriteValue> inner = {WriteValue::i32s(std::vector<int32_t>{1, 2}),
                                         WriteValue::strings(tokens)};
  w.set("nested", WriteValue::array(ValueType::kArray, inner));
  w.add_tensor("a", GgmlType::kF32, std::vector<uint64_t>{4, 2}, std::vector<uint8_t>(32, 1));
  w.add_tensor("b", GgmlType::kQ8_0, std::vector<uint64_t>{32}, std::vector<uint8_t>(34, 2));
  w.add_tensor("c", GgmlType::kF16, std::vector<uint64_t>{3}, std::vector<uint8_t>(6, 3));
  return w.to_bytes();
}

TEST(GgufCorruptTruncation, EveryCutBeforeTheEndOfTheLastTensorIsRefused) {
  const std::vector<uint8_t> bytes = full_file();
  const GgufFile whole = GgufFile::from_bytes(bytes);
  uint64_t data_end = 0;
  for (const auto& t : whole.tensors()) {
    data_end = std::max(data_end, whole.data_offset() + t.offset + t.n_bytes);
  }
  ASSERT_GT(data_end, whole.data_offset());
  ASSERT_LE(data_end, bytes.size());

  size_t n_cuts = 0;
  for (size_t cut = 0; cut < data_end; ++cut) {
    SCOPED_TRACE("cut at " + std::to_string(cut) + " of " + std::to_string(bytes.size()));
    Refusal r = parse_expecting_refusal(std::span<const uint8_t>(bytes.data(), cut));
    ASSERT_TRUE(r.thrown) << "a file cut at byte " << cut << " was accepted";
    EXPECT_EQ(static_cast<int>(r.kind), static_cast<int>(Error::Kind::kInvalidFile));
    const bool says_why = r.message.find("truncated") != std::string::npos ||
                          r.message.find("past the end") != std::string::npos ||
                          r.message.find("could hold") != std::string::npos;
    EXPECT_TRUE(says_why) << r.message;
    ++n_cuts;
  }
  EXPECT_EQ(n_cuts, data_end);
}

TEST(GgufCorruptTruncation, MessagesNameTheSectionThatWasCut) {
  GgufBytes kvs;
  kvs.header(0, 2).kv_u32("k.first", 1);
  const size_t second_key = kvs.at();
  kvs.kv_string("k.second", "value");
  expect_refused(kvs.prefix(2), {"truncated", "magic"});
  expect_refused(kvs.prefix(6), {"truncated", "version"});
  expect_refused(kvs.prefix(12), {"truncated", "tensor count"});
  expect_refused(kvs.prefix(20), {"truncated", "metadata count"});
  expect_refused(kvs.prefix(second_key + 3), {"key of metadata entry 1"});
  expect_refused(kvs.prefix(second_key + 8 + 8 + 2), {"type of key 'k.second'"});
  expect_refused(kvs.prefix(kvs.size() - 2), {"key 'k.second'", "past the end"});

  // The reader first checks that the bytes after the header could hold n_tensors minimal tensor
  // infos, so a metadata string keeps enough bytes after the header for cuts inside the info.
  GgufBytes t;
  t.header(1, 1).kv_string("k", "0123456789abcdef0123");
  const size_t tensor = t.at();
  t.tensor_info("weight", {8}, gt::kF32, 0);
  const size_t after_infos = t.at();
  t.pad_to(32).fill(32);
  expect_refused(t.prefix(tensor + 8 + 6 + 2), {"n_dims of tensor 'weight'"});
  expect_refused(t.prefix(tensor + 8 + 6 + 4 + 3), {"dimension 0 of tensor 'weight'"});
  expect_refused(t.prefix(after_infos - 10), {"type of tensor 'weight'"});
  expect_refused(t.prefix(after_infos - 4), {"offset of tensor 'weight'"});
  expect_refused(t.prefix(after_infos + 1), {"truncated", "tensor data section"});
  expect_refused(t.prefix(t.size() - 1), {"tensor 'weight'", "past the end"});
  EXPECT_EQ(GgufFile::from_bytes(t.span()).tensors().size(), 1u);
}

TEST(GgufCorruptTruncation, AnEmptyInputIsRefused) {
  expect_refused(std::span<const uint8_t>(), {"truncated", "magic"});
}

// ---- Header ----------------------------------------------------------------------------------

TEST(GgufCorruptHeader, BadMagic) {
  GgufBytes b;
  b.raw("GGUX").u32(3).u64(0).u64(0);
  EXPECT_REFUSED(b, {"bad magic"});
  GgufBytes le;  // the magic read as a little-endian number, i.e. byte-swapped
  le.raw("FUGG").u32(3).u64(0).u64(0);
  EXPECT_REFUSED(le, {"bad magic"});
}

TEST(GgufCorruptHeader, UnknownVersions) {
  for (uint32_t version : {0u, 4u, 0xFFFFFFFFu}) {
    SCOPED_TRACE(version);
    GgufBytes b;
    b.header(0, 0, version);
    expect_refused(b.span(), {"unknown version " + std::to_string(version)});
  }
  GgufBytes v1;
  v1.header(0, 0, 1);
  expect_refused(v1.span(), {"version 1", "not supported"}, Error::Kind::kUnsupported);
}

TEST(GgufCorruptHeader, CountsLargerThanTheFileCouldHold) {
  // 2^24 entries would be a ~1.7 GB table: the allocation probe catches a reader that reserves it.
  for (uint64_t n : {k2p62, ~uint64_t{0}, uint64_t{1} << 24, uint64_t{1000}}) {
    SCOPED_TRACE(n);
    GgufBytes kv;
    kv.header(0, n).kv_u32("k", 1);
    expect_refused(kv.span(), {"metadata count", std::to_string(n), "could hold"});
    GgufBytes tensors;
    tensors.header(n, 0).tensor_info("t", {1}, gt::kF32, 0);
    expect_refused(tensors.span(), {"tensor count", std::to_string(n), "could hold"});
  }
}

TEST(GgufCorruptHeader, CountOneMoreThanPresent) {
  GgufBytes b;
  b.header(0, 3).kv_u32("a", 1).kv_u32("b", 2).fill(32);  // room for a third, but it is garbage
  EXPECT_REFUSED(b, {"metadata entry 2"});
}

// ---- Strings ---------------------------------------------------------------------------------

TEST(GgufCorruptStrings, KeyLengthPastTheEnd) {
  for (uint64_t length : {uint64_t{1000}, k2p63, ~uint64_t{0}}) {
    SCOPED_TRACE(length);
    GgufBytes b;
    b.header(0, 1).str_claiming(length, "abc").u32(vt::kU8).u8(0);
    expect_refused(b.span(), {"key of metadata entry 0", std::to_string(length), "past the end"});
  }
}

TEST(GgufCorruptStrings, ValueLengthPastTheEnd) {
  for (uint64_t length : {uint64_t{100}, ~uint64_t{0}}) {
    SCOPED_TRACE(length);
    GgufBytes b;
    b.header(0, 1).key("general.name", vt::kString).str_claiming(length, "xy");
    expect_refused(b.span(), {"'general.name'", std::to_string(length), "past the end"});
  }
}

TEST(GgufCorruptStrings, ArrayElementLengthPastTheEnd) {
  GgufBytes b;
  b.header(0, 1).key("tokenizer.ggml.tokens", vt::kArray).array_header(vt::kString, 3);
  b.str("a").str("b").str_claiming(1u << 20, "c");
  EXPECT_REFUSED(b, {"'tokenizer.ggml.tokens' element 2", "past the end"});
}

TEST(GgufCorruptStrings, EmptyKey) {
  GgufBytes b;
  b.header(0, 1).kv_u32("", 7);
  EXPECT_REFUSED(b, {"metadata entry 0", "empty key"});
}

TEST(GgufCorruptStrings, TensorNameLengthPastTheEnd) {
  GgufBytes b;
  b.header(1, 0).str_claiming(~uint64_t{0}, "w").fill(40);
  EXPECT_REFUSED(b, {"name of tensor #0", "past the end"});
}

// ---- Values and arrays -----------------------------------------------------------------------

TEST(GgufCorruptValues, UnknownValueType) {
  for (uint32_t type : {13u, 0xFFFFFFFFu}) {
    SCOPED_TRACE(type);
    GgufBytes b;
    b.header(0, 1).key("my.key", type).u64(0);
    expect_refused(b.span(), {"'my.key'", "unknown value type " + std::to_string(type)});
  }
}

TEST(GgufCorruptValues, UnknownArrayElementType) {
  for (uint32_t type : {13u, 0xFFFFFFFFu}) {
    SCOPED_TRACE(type);
    GgufBytes b;
    b.header(0, 1).key("my.array", vt::kArray).array_header(type, 1).u64(0);
    expect_refused(b.span(), {"'my.array'", "array of unknown value type " + std::to_string(type)});
    // The same inside a nested array.
    GgufBytes nested;
    nested.header(0, 1).key("my.nested", vt::kArray).array_header(vt::kArray, 1);
    nested.array_header(type, 1).u64(0);
    expect_refused(nested.span(), {"'my.nested' element 0", "unknown value type"});
  }
}

TEST(GgufCorruptValues, ArrayCountTimesElementSizeOverflows) {
  struct Case {
    uint32_t element_type;
    uint64_t count;
  };
  for (Case c : {Case{vt::kU64, k2p61}, Case{vt::kU64, ~uint64_t{0}}, Case{vt::kU8, ~uint64_t{0}},
                 Case{vt::kU32, k2p62}, Case{vt::kString, k2p61}, Case{vt::kArray, k2p62},
                 Case{vt::kF64, 1000}}) {
    SCOPED_TRACE(std::to_string(c.element_type) + " x " + std::to_string(c.count));
    GgufBytes b;
    b.header(0, 1).key("big.array", vt::kArray).array_header(c.element_type, c.count).fill(64);
    expect_refused(b.span(), {"'big.array'", std::to_string(c.count), "past the end"});
  }
}

TEST(GgufCorruptValues, DeeplyNestedArraysAreRefusedWithoutRecursingToTheBottom) {
  constexpr int kDepth = 10000;
  GgufBytes b;
  b.header(0, 1).key("deep", vt::kArray);
  for (int i = 0; i < kDepth; ++i) b.array_header(vt::kArray, 1);
  b.array_header(vt::kU8, 0);
  EXPECT_REFUSED(b, {"'deep'", "nests arrays deeper than"});
}

TEST(GgufCorruptValues, ModeratelyNestedArraysAreAccepted) {
  GgufBytes b;
  b.header(0, 1).key("nest", vt::kArray);
  for (int i = 0; i < 4; ++i) b.array_header(vt::kArray, 1);
  b.array_header(vt::kU8, 1).u8(42);
  GgufFile f = GgufFile::from_bytes(b.span());
  Value v = *f.find("nest");
  for (int i = 0; i < 4; ++i) v = v.element(0);
  EXPECT_EQ(v.element(0).as_uint(), 42u);
}

TEST(GgufCorruptValues, BoolOtherThanZeroOrOne) {
  GgufBytes b;
  b.header(0, 1).key("flag", vt::kBool).u8(2);
  EXPECT_REFUSED(b, {"'flag'", "bool value 2"});
  GgufBytes arr;
  arr.header(0, 1).key("flags", vt::kArray).array_header(vt::kBool, 3).u8(1).u8(0).u8(7);
  EXPECT_REFUSED(arr, {"'flags' element 2", "bool value 7"});
}

TEST(GgufCorruptValues, DuplicateMetadataKeys) {
  GgufBytes b;
  b.header(0, 3).kv_u32("a", 1).kv_string("dup.key", "x").kv_u32("dup.key", 2);
  EXPECT_REFUSED(b, {"duplicate", "'dup.key'"});
}

// ---- Known keys with the wrong type ----------------------------------------------------------

TEST(GgufCorruptKnownKeys, AlignmentOfTheWrongType) {
  GgufBytes as_string;
  as_string.header(0, 1).kv_string("general.alignment", "32");
  EXPECT_REFUSED(as_string, {"'general.alignment'", "type string", "uint32"});
  GgufBytes as_u64;
  as_u64.header(0, 1).kv_u64("general.alignment", 32);
  EXPECT_REFUSED(as_u64, {"'general.alignment'", "type uint64", "uint32"});
}

TEST(GgufCorruptKnownKeys, ArchitectureAsANumberIsRefusedAtOpen) {
  GgufBytes b;
  b.header(0, 1).kv_u32("general.architecture", 5);
  EXPECT_REFUSED(b, {"'general.architecture'", "type uint32", "string"});
}

TEST(GgufCorruptKnownKeys, TokensOfTheWrongElementType) {
  GgufBytes b;
  b.header(0, 1).key("tokenizer.ggml.tokens", vt::kArray).array_header(vt::kI32, 1).i32(1);
  EXPECT_REFUSED(b, {"'tokenizer.ggml.tokens'", "array of int32", "array of string"});
}

TEST(GgufCorruptKnownKeys, TypedLookupOfAnotherTypeThrowsNamingTheKey) {
  GgufBytes b;
  b.header(0, 4).kv_u32("custom.number", 5).kv_string("custom.text", "hi");
  b.key("custom.ints", vt::kArray).array_header(vt::kI32, 2).i32(1).i32(-1);
  b.key("custom.huge", vt::kArray).array_header(vt::kU64, 1).u64(~uint64_t{0});
  GgufFile f = GgufFile::from_bytes(b.span());
  auto message_of = [](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(Error::Kind::kInvalidFile));
      return e.what();
    }
    ADD_FAILURE() << "no llms::Error thrown";
    return "";
  };
  struct Case {
    std::string message;
    std::string_view key;
  };
  for (const Case& c : {
           Case{message_of([&] { f.get_string("custom.number"); }), "'custom.number'"},
           Case{message_of([&] { f.get_strings("custom.number"); }), "'custom.number'"},
           Case{message_of([&] { f.get_uint("custom.text"); }), "'custom.text'"},
           Case{message_of([&] { f.get_bool("custom.text"); }), "'custom.text'"},
           Case{message_of([&] { f.get_float("custom.ints"); }), "'custom.ints'"},
           Case{message_of([&] { f.get_strings("custom.ints"); }), "'custom.ints'"},
           Case{message_of([&] { f.get_uint("custom.ints"); }), "'custom.ints'"},
           Case{message_of([&] { f.get_ints("custom.huge"); }), "'custom.huge'"},
       }) {
    EXPECT_NE(c.message.find(c.key), std::string::npos) << c.message;
    EXPECT_NE(c.message.find("expected"), std::string::npos) << c.message;
  }
  // The right types still read, and an absent key is not an error.
  EXPECT_EQ(f.get_uint("custom.number"), 5u);
  EXPECT_EQ(f.get_string("custom.text"), "hi");
  EXPECT_EQ(f.get_ints("custom.ints"), (std::vector<int64_t>{1, -1}));
  EXPECT_EQ(f.get_string("custom.absent"), std::nullopt);
}

TEST(GgufCorruptKnownKeys, BadAlignmentValues) {
  for (uint32_t alignment : {0u, 48u, 3u, 1u << 31}) {
    SCOPED_TRACE(alignment);
    GgufBytes b;
    b.header(1, 1).kv_u32("general.alignment", alignment).tensor_info("t", {8}, gt::kF32, 0);
    b.pad_to(32).fill(32);
    expect_refused(b.span(), {"'general.alignment'", std::to_string(alignment), "power of two"});
  }
}

// ---- Tensor infos ----------------------------------------------------------------------------

TEST(GgufCorruptTensors, BadDimensionCounts) {
  EXPECT_REFUSED(one_tensor_file("five", {1, 1, 1, 1, 1}, gt::kF32, 0, 32),
                 {"tensor 'five'", "n_dims 5"});
  EXPECT_REFUSED(one_tensor_file("zero", {}, gt::kF32, 0, 32), {"tensor 'zero'", "n_dims 0"});
  GgufBytes huge;
  huge.header(1, 0).str("many").u32(0xFFFFFFFFu).fill(64);
  EXPECT_REFUSED(huge, {"tensor 'many'", "n_dims 4294967295"});
}

TEST(GgufCorruptTensors, ZeroDimension) {
  EXPECT_REFUSED(one_tensor_file("flat", {4, 0}, gt::kF32, 0, 32),
                 {"tensor 'flat'", "dimension 1 = 0"});
}

TEST(GgufCorruptTensors, DimensionThatIsNegativeAsSigned) {
  EXPECT_REFUSED(one_tensor_file("neg", {k2p63}, gt::kF32, 0, 32),
                 {"tensor 'neg'", "dimension 0", "-9223372036854775808"});
  EXPECT_REFUSED(one_tensor_file("neg1", {8, ~uint64_t{0}}, gt::kF32, 0, 32),
                 {"tensor 'neg1'", "dimension 1", "-1"});
}

TEST(GgufCorruptTensors, ElementCountOverflow) {
  const uint64_t big = uint64_t{1} << 32;
  EXPECT_REFUSED(one_tensor_file("many", {big, big, 2}, gt::kF32, 0, 32),
                 {"tensor 'many'", "element count overflows"});
  // 2^63 elements overflow int64 (ggml's element count) even though they fit in uint64.
  EXPECT_REFUSED(one_tensor_file("signed", {big, uint64_t{1} << 31}, gt::kF32, 0, 32),
                 {"tensor 'signed'", "element count overflows"});
}

TEST(GgufCorruptTensors, ByteSizeOverflow) {
  const uint64_t d = uint64_t{1} << 31;  // 2^62 F64 elements = 2^65 bytes
  EXPECT_REFUSED(one_tensor_file("wide", {d, d}, kGgmlF64, 0, 32),
                 {"tensor 'wide'", "byte size overflows"});
}

TEST(GgufCorruptTensors, FirstDimensionNotAWholeNumberOfBlocks) {
  EXPECT_REFUSED(one_tensor_file("q4k", {100}, gt::kQ4_K, 0, 144),
                 {"tensor 'q4k'", "Q4_K", "ne[0] = 100", "block size 256"});
  // ne[1] may be anything: only the contiguous dimension is cut into blocks.
  GgufBytes ok = one_tensor_file("q8", {32, 3}, gt::kQ8_0, 0, 3 * 34);
  EXPECT_EQ(GgufFile::from_bytes(ok.span()).tensors()[0].n_bytes, 3u * 34);
}

TEST(GgufCorruptTensors, UnknownTensorType) {
  for (uint32_t type : {4u, 31u, 1000u, 0xFFFFFFFFu}) {  // 4 is a retired GGML type id
    SCOPED_TRACE(type);
    expect_refused(one_tensor_file("odd", {32}, type, 0, 128).span(),
                   {"tensor 'odd'", "unknown tensor type " + std::to_string(type)});
  }
}

TEST(GgufCorruptTensors, MisalignedOffset) {
  GgufBytes b;
  b.header(2, 0).tensor_info("first", {8}, gt::kF32, 0).tensor_info("second", {8}, gt::kF32, 48);
  b.pad_to(32).fill(128);
  EXPECT_REFUSED(b, {"tensor 'second'", "offset 48", "alignment 32"});
  GgufBytes custom;  // with general.alignment = 64, 32 is misaligned too
  custom.header(1, 1).kv_u32("general.alignment", 64).tensor_info("t", {8}, gt::kF32, 32);
  custom.pad_to(64).fill(128);
  EXPECT_REFUSED(custom, {"tensor 't'", "offset 32", "alignment 64"});
}

TEST(GgufCorruptTensors, OverlappingTensors) {
  GgufBytes b;  // "low" holds bytes [0, 64), "high" starts at 32
  b.header(2, 0).tensor_info("high", {8}, gt::kF32, 32).tensor_info("low", {16}, gt::kF32, 0);
  b.pad_to(32).fill(128);
  EXPECT_REFUSED(b, {"'high'", "overlaps", "'low'"});
  GgufBytes same;
  same.header(2, 0).tensor_info("x", {8}, gt::kF32, 0).tensor_info("y", {8}, gt::kF32, 0);
  same.pad_to(32).fill(64);
  EXPECT_REFUSED(same, {"overlaps"});
}

TEST(GgufCorruptTensors, OffsetPastTheEnd) {
  for (uint64_t offset : {uint64_t{1} << 40, ~uint64_t{0} - 31}) {  // both multiples of 32
    SCOPED_TRACE(offset);
    expect_refused(one_tensor_file("far", {8}, gt::kF32, offset, 32).span(),
                   {"tensor 'far'", std::to_string(offset), "past the end"});
  }
}

TEST(GgufCorruptTensors, DataEndPastTheEnd) {
  EXPECT_REFUSED(one_tensor_file("long", {1000}, gt::kF32, 0, 100),
                 {"tensor 'long'", "4000 bytes", "past the end"});
  // The data section itself starts past the end: the infos end exactly at the end of the file.
  GgufBytes b;
  b.header(1, 0).tensor_info("t", {1}, gt::kF32, 0);
  EXPECT_REFUSED(b, {"truncated"});
}

TEST(GgufCorruptTensors, DuplicateTensorNames) {
  GgufBytes b;
  b.header(3, 0).tensor_info("w", {8}, gt::kF32, 0).tensor_info("v", {8}, gt::kF32, 32);
  b.tensor_info("w", {8}, gt::kF32, 64).pad_to(32).fill(96);
  EXPECT_REFUSED(b, {"duplicate tensor name 'w'"});
}

TEST(GgufCorruptTensors, EmptyTensorNameIsRefused) {
  // Documented reader behaviour: a tensor must have a name (llama.cpp looks tensors up by name).
  EXPECT_REFUSED(one_tensor_file("", {8}, gt::kF32, 0, 32), {"tensor #0", "empty name"});
}

TEST(GgufCorruptTensors, OverlongTensorName) {
  EXPECT_REFUSED(one_tensor_file(std::string(5000, 'n'), {8}, gt::kF32, 0, 32),
                 {"tensor #0", "5000 bytes"});
}

// ---- Whole files on disk, and arbitrary corruption -------------------------------------------

TEST(GgufCorruptFile, OpenNamesTheFileAndTheProblem) {
  testing::TempDir dir;
  GgufBytes b;
  b.header(0, 1).kv_string("general.alignment", "x");
  const auto path = dir.write("broken.gguf", b.span());
  try {
    GgufFile::open(path);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("broken.gguf"), std::string::npos) << message;
    EXPECT_NE(message.find("'general.alignment'"), std::string::npos) << message;
  }
  const auto empty = dir.write("empty.gguf", std::string_view());
  EXPECT_THROW(GgufFile::open(empty), Error);
}

TEST(GgufCorruptFile, EverySingleByteCorruptionIsRefusedOrSafe) {
  // Overwrite each byte before the data section with a few values: the reader must either refuse
  // with llms::Error or produce a file whose tensor spans lie inside the bytes.
  const std::vector<uint8_t> original = full_file();
  const uint64_t data_offset = GgufFile::from_bytes(original).data_offset();
  size_t n_refused = 0;
  for (size_t at = 0; at < data_offset; ++at) {
    for (uint8_t value : {uint8_t{0x00}, uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xFF}}) {
      if (original[at] == value) continue;
      std::vector<uint8_t> bytes = original;
      bytes[at] = value;
      try {
        AllocationLimit limit(allocation_limit_for(bytes.size()));
        GgufFile f = GgufFile::from_bytes(bytes);
        for (const auto& t : f.tensors()) {
          auto span = f.tensor_data(t);
          ASSERT_EQ(span.size(), t.n_bytes);
          ASSERT_LE(f.data_offset() + t.offset + t.n_bytes, bytes.size());
        }
      } catch (const Error&) {
        ++n_refused;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "byte " << at << " = " << int(value)
                      << ": not an llms::Error: " << e.what();
      }
    }
  }
  EXPECT_GT(n_refused, data_offset);  // most corruptions of the header are detected
}

}  // namespace
}  // namespace llms::gguf
