// Every registered model (models/registry.json) opens, validates and yields the hyper-parameters
// and KV-cache size its published architecture has. Skips models that are not cached; CI pulls
// them all first (scripts/test.sh).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "gguf/gguf_file.h"
#include "kv/kv_budget.h"
#include "model/model_config.h"
#include "model_dir.h"

namespace llms {
namespace {

using testing::model_dir;

struct Expected {
  const char* file;
  const char* architecture;
  uint64_t n_layers, n_embd, n_heads, n_kv_heads, head_dim, n_vocab, n_sliding, n_tensors;
  uint64_t kv_bytes_per_token_f16;
};

class RegisteredModel : public ::testing::TestWithParam<Expected> {};

TEST_P(RegisteredModel, OpensWithPublishedShape) {
  const Expected& e = GetParam();
  auto path = model_dir() / e.file;
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not cached (llmserve pull --all)";
  auto file = gguf::GgufFile::open(path);
  EXPECT_EQ(file.tensors().size(), e.n_tensors);
  auto cfg = model::ModelConfig::from_gguf(file);
  EXPECT_EQ(cfg.architecture, e.architecture);
  EXPECT_EQ(cfg.n_layers, e.n_layers);
  EXPECT_EQ(cfg.n_embd, e.n_embd);
  EXPECT_EQ(cfg.n_heads, e.n_heads);
  EXPECT_EQ(cfg.max_kv_heads(), e.n_kv_heads);
  EXPECT_EQ(cfg.head_dim_k, e.head_dim);
  EXPECT_EQ(cfg.n_vocab, e.n_vocab);
  EXPECT_EQ(static_cast<uint64_t>(std::count(cfg.is_sliding.begin(), cfg.is_sliding.end(), true)),
            e.n_sliding);
  EXPECT_EQ(kv::kv_bytes_per_token(cfg.kv_shape(), kv::KvCacheType::kF16),
            e.kv_bytes_per_token_f16);
  // Every tensor's bytes lie inside the file and add up to less than the file.
  uint64_t total = 0;
  for (const auto& t : file.tensors()) total += file.tensor_data(t).size();
  EXPECT_LT(total, file.file_size());
  EXPECT_GT(total, file.file_size() * 9 / 10);
}

INSTANTIATE_TEST_SUITE_P(
    Registry, RegisteredModel,
    ::testing::Values(
        // 2 x 24 layers x 2 KV heads x 64 x 2 bytes
        Expected{"qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "qwen2", 24, 896, 14, 2, 64, 151936, 0,
                 291, 12288},
        // 2 x 28 x 2 x 128 x 2
        Expected{"qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "qwen2", 28, 1536, 12, 2, 128, 151936,
                 0, 339, 28672},
        // 2 x 18 x 1 x 256 x 2; 15 of 18 layers are sliding-window (pattern 5 local : 1 global)
        Expected{"gemma-3-270m-q4_k_m.gguf", "gemma3", 18, 640, 4, 1, 256, 262144, 15, 236, 18432}),
    [](const auto& param_info) {
      return std::string(param_info.param.architecture) + "_" + std::to_string(param_info.index);
    });

}  // namespace
}  // namespace llms
