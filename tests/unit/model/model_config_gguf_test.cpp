// ModelConfig::from_gguf refuses files whose hyper-parameters are missing, mistyped or
// inconsistent, naming the key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/model_config.h"
#include "util/error.h"

namespace llms::model {
namespace {

using ::testing::HasSubstr;

gguf::GgufWriter base_file() {
  gguf::GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_u32("llama.embedding_length", 64);
  w.set_u32("llama.attention.head_count", 4);
  w.set_u32("llama.attention.head_count_kv", 2);
  return w;
}

std::string error_of(const gguf::GgufWriter& w) {
  try {
    ModelConfig::from_gguf(gguf::GgufFile::from_bytes(w.to_bytes()));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GgufConfig, ReadsTheBaseFile) {
  auto c = ModelConfig::from_gguf(gguf::GgufFile::from_bytes(base_file().to_bytes()));
  EXPECT_EQ(c.n_layers, 2u);
  EXPECT_EQ(c.head_dim_k, 16u);
  EXPECT_EQ(c.n_kv_heads, (std::vector<uint64_t>{2, 2}));
  EXPECT_EQ(c.rope_freq_base, 10000.0);  // the default when the key is absent
}

TEST(GgufConfig, MissingRequiredKey) {
  auto w = base_file();
  w.erase("llama.block_count");
  EXPECT_THAT(error_of(w), HasSubstr("'llama.block_count'"));
}

TEST(GgufConfig, WrongTypeNamesTheKey) {
  auto w = base_file();
  w.set_string("llama.embedding_length", "sixty-four");
  EXPECT_THAT(error_of(w), HasSubstr("'llama.embedding_length'"));
}

TEST(GgufConfig, ZeroOrInconsistentValues) {
  auto w = base_file();
  w.set_u32("llama.attention.head_count", 0);
  EXPECT_THAT(error_of(w), HasSubstr("'llama.attention.head_count' is 0"));
  w = base_file();
  w.set_u32("llama.attention.head_count_kv", 8);
  EXPECT_THAT(error_of(w), HasSubstr("exceeds the query head count"));
  w = base_file();
  w.set_u32("llama.embedding_length", 66);
  EXPECT_THAT(error_of(w), HasSubstr("not a multiple of head_count"));
  w = base_file();
  w.set_i32("llama.block_count", -3);
  EXPECT_THAT(error_of(w), HasSubstr("'llama.block_count'"));
}

TEST(GgufConfig, PerLayerKvHeads) {
  auto w = base_file();
  std::vector<int32_t> heads = {2, 1};
  w.set_i32s("llama.attention.head_count_kv", heads);
  auto c = ModelConfig::from_gguf(gguf::GgufFile::from_bytes(w.to_bytes()));
  EXPECT_EQ(c.n_kv_heads, (std::vector<uint64_t>{2, 1}));
  heads = {2, 1, 1};
  w.set_i32s("llama.attention.head_count_kv", heads);
  EXPECT_THAT(error_of(w), HasSubstr("one integer per layer"));
}

TEST(GgufConfig, MissingArchitecture) {
  gguf::GgufWriter w;
  w.set_u32("llama.block_count", 2);
  EXPECT_THAT(error_of(w), HasSubstr("general.architecture"));
}

}  // namespace
}  // namespace llms::model
