// The seed corpus of fuzz/gguf_fuzz.cpp: small valid GGUF files made with GgufWriter.
//
// The generator lives here so the seeds are reproducible: to (re)write them, run
//   LLMS_WRITE_GGUF_SEEDS=fuzz/corpus/gguf_fuzz build/release/tests/test_gguf
//   --gtest_filter='GgufFuzzSeeds.*'
// Every run checks that the generated seeds parse and stay under 4 KiB, and that the committed
// corpus files parse.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace llms::gguf {
namespace {

constexpr size_t kMaxSeedBytes = 4096;

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

std::vector<std::pair<std::string, std::vector<uint8_t>>> make_seeds() {
  std::vector<std::pair<std::string, std::vector<uint8_t>>> seeds;

  seeds.emplace_back("empty.gguf", GgufWriter().to_bytes());

  {
    GgufWriter w;
    w.set_u8("s.u8", 200);
    w.set_i8("s.i8", -100);
    w.set_u16("s.u16", 60000);
    w.set_i16("s.i16", -30000);
    w.set_u32("s.u32", 4000000000u);
    w.set_i32("s.i32", -2000000000);
    w.set_f32("s.f32", 0.5f);
    w.set_bool("s.bool", true);
    w.set_string("s.string", "hello, gguf");
    w.set_u64("s.u64", uint64_t{1} << 60);
    w.set_i64("s.i64", -(int64_t{1} << 60));
    w.set_f64("s.f64", 2.718281828);
    seeds.emplace_back("scalars.gguf", w.to_bytes());
  }

  {
    GgufWriter w;
    w.set("a.u8", WriteValue::u8s(std::vector<uint8_t>{1, 2, 3}));
    w.set("a.i16", WriteValue::i16s(std::vector<int16_t>{-1, 1}));
    w.set("a.u32", WriteValue::u32s(std::vector<uint32_t>{7}));
    w.set("a.f32", WriteValue::f32s(std::vector<float>{0.25f, -1.0f}));
    w.set("a.f64", WriteValue::f64s(std::vector<double>{1e-3}));
    const bool flags[] = {true, false};
    w.set("a.bool", WriteValue::bools(flags));
    w.set("a.i64", WriteValue::i64s(std::vector<int64_t>{-5, 5}));
    const std::vector<std::string> words = {"alpha", "", "gamma"};
    w.set_strings("a.strings", words);
    w.set("a.empty", WriteValue::i32s(std::vector<int32_t>{}));
    const std::vector<WriteValue> inner = {WriteValue::u16s(std::vector<uint16_t>{9, 8}),
                                           WriteValue::strings(words)};
    const std::vector<WriteValue> outer = {WriteValue::array(ValueType::kArray, inner)};
    w.set("a.nested", WriteValue::array(ValueType::kArray, outer));
    seeds.emplace_back("arrays.gguf", w.to_bytes());
  }

  {
    GgufWriter w;
    w.set_alignment(16);
    w.add_tensor("f32", GgmlType::kF32, std::vector<uint64_t>{4, 2}, pattern(32, 1));
    w.add_tensor("f16", GgmlType::kF16, std::vector<uint64_t>{3}, pattern(6, 2));
    w.add_tensor("q8_0", GgmlType::kQ8_0, std::vector<uint64_t>{32}, pattern(34, 3));
    w.add_tensor("q4_k", GgmlType::kQ4_K, std::vector<uint64_t>{256}, pattern(144, 4));
    w.add_tensor("q6_k", GgmlType::kQ6_K, std::vector<uint64_t>{256}, pattern(210, 5));
    seeds.emplace_back("tensors.gguf", w.to_bytes());
  }

  {
    GgufWriter w;
    w.set_alignment(8);
    w.set_string("general.architecture", "qwen2");
    w.set_string("general.name", "seed");
    w.set_u32("general.file_type", 7);
    w.set_u32("qwen2.block_count", 1);
    w.set_u32("qwen2.embedding_length", 8);
    w.set_f32("qwen2.attention.layer_norm_rms_epsilon", 1e-6f);
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", "qwen2");
    const std::vector<std::string> tokens = {"a", "b", "ab", "\xC4\xA0", "<|im_end|>"};
    w.set_strings("tokenizer.ggml.tokens", tokens);
    w.set_i32s("tokenizer.ggml.token_type", std::vector<int32_t>{1, 1, 1, 1, 3});
    w.set_f32s("tokenizer.ggml.scores", std::vector<float>{0, 0, -1, -2, 0});
    const std::vector<std::string> merges = {"a b"};
    w.set_strings("tokenizer.ggml.merges", merges);
    w.set_string("tokenizer.chat_template",
                 "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}");
    w.add_tensor("token_embd.weight", GgmlType::kQ8_0, std::vector<uint64_t>{32, 5},
                 pattern(5 * 34, 6));
    w.add_tensor("output_norm.weight", GgmlType::kF32, std::vector<uint64_t>{8}, pattern(32, 7));
    seeds.emplace_back("model_like.gguf", w.to_bytes());
  }

  {
    GgufWriter w(2);
    w.set_alignment(1);
    w.set_i32("v2.key", 42);
    w.add_tensor("odd", GgmlType::kI8, std::vector<uint64_t>{3}, pattern(3, 8));
    w.add_tensor("next", GgmlType::kI16, std::vector<uint64_t>{1}, pattern(2, 9));
    seeds.emplace_back("v2_align1.gguf", w.to_bytes());
  }

  {
    GgufWriter w;
    w.set_bool("flag", false);
    w.add_tensor("dims4", GgmlType::kI8, std::vector<uint64_t>{2, 3, 2, 2}, pattern(24, 10));
    w.add_tensor("bf16", GgmlType::kBF16, std::vector<uint64_t>{1, 1, 4}, pattern(8, 11));
    seeds.emplace_back("four_dims.gguf", w.to_bytes());
  }
  return seeds;
}

TEST(GgufFuzzSeeds, GeneratedSeedsAreValidAndSmall) {
  auto seeds = make_seeds();
  ASSERT_GE(seeds.size(), 5u);
  for (const auto& [name, bytes] : seeds) {
    SCOPED_TRACE(name);
    EXPECT_LT(bytes.size(), kMaxSeedBytes);
    GgufFile f = GgufFile::from_bytes(bytes);
    EXPECT_EQ(f.file_size(), bytes.size());
  }
  if (const char* dir = std::getenv("LLMS_WRITE_GGUF_SEEDS")) {
    std::filesystem::create_directories(dir);
    for (const auto& [name, bytes] : seeds) {
      std::ofstream out(std::filesystem::path(dir) / name, std::ios::binary);
      out.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
      ASSERT_TRUE(out.good()) << name;
    }
  }
}

TEST(GgufFuzzSeeds, CommittedCorpusParses) {
  const std::filesystem::path corpus =
      std::filesystem::path(LLMS_TEST_DATA_DIR) / ".." / ".." / "fuzz" / "corpus" / "gguf_fuzz";
  if (!std::filesystem::is_directory(corpus)) GTEST_SKIP() << "no corpus at " << corpus;
  size_t n_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
    if (entry.path().extension() != ".gguf") continue;
    SCOPED_TRACE(entry.path().filename().string());
    EXPECT_LT(entry.file_size(), kMaxSeedBytes);
    GgufFile f = GgufFile::open(entry.path());
    EXPECT_EQ(f.file_size(), entry.file_size());
    ++n_files;
  }
  EXPECT_GE(n_files, 5u);
}

}  // namespace
}  // namespace llms::gguf
