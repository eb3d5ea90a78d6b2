// ModelConfig::from_hf on hand-written config.json files beside a small safetensors file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "gguf/hf_model_dir.h"
#include "model/model_config.h"
#include "safetensors_bytes.h"
#include "temp_dir.h"
#include "util/error.h"

namespace llms::model {
namespace {

using ::testing::HasSubstr;

class HfConfig : public ::testing::Test {
 protected:
  ModelConfig load(const std::string& config_json, bool with_lm_head = true) {
    testing::SafetensorsBuilder weights;
    weights.add_values<float>("model.embed_tokens.weight", "F32", {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
    if (with_lm_head)
      weights.add_values<float>("lm_head.weight", "F32", {4, 2}, {0, 0, 0, 0, 0, 0, 0, 0});
    dir_.write("model.safetensors", weights.build());
    dir_.write("config.json", config_json);
    return ModelConfig::from_hf(gguf::HfModelDir::open(dir_.path()));
  }

  testing::TempDir dir_;
};

TEST_F(HfConfig, Qwen2WithGroupedQueryAttention) {
  auto c = load(R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
    "num_hidden_layers": 28, "hidden_size": 3584, "intermediate_size": 18944,
    "num_attention_heads": 28, "num_key_value_heads": 4, "max_position_embeddings": 32768,
    "vocab_size": 152064, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
    "tie_word_embeddings": false, "use_sliding_window": false, "sliding_window": 131072})");
  EXPECT_EQ(c.architecture, "qwen2");
  EXPECT_EQ(c.name, "Qwen2ForCausalLM");
  EXPECT_EQ(c.n_layers, 28u);
  EXPECT_EQ(c.head_dim_k, 128u);
  EXPECT_EQ(c.max_kv_heads(), 4u);
  EXPECT_EQ(c.sliding_window, 0u);  // use_sliding_window false wins over the window value
  EXPECT_TRUE(c.has_output_weight);
  // The Qwen2.5-7B shape: 448 MiB of f16 KV cache at 8,192 tokens.
  EXPECT_EQ(kv::kv_bytes_per_sequence(c.kv_shape(), kv::KvCacheType::kF16, 8192), 448ull << 20);
}

TEST_F(HfConfig, Gemma3NestedTextConfigAndSlidingPattern) {
  auto c = load(R"({"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
    "text_config": {"model_type": "gemma3_text", "num_hidden_layers": 12, "hidden_size": 640,
      "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
      "sliding_window": 512, "sliding_window_pattern": 6, "vocab_size": 262144,
      "rope_theta": 1000000.0}, "tie_word_embeddings": true})",
                false);
  EXPECT_EQ(c.architecture, "gemma3");
  EXPECT_EQ(c.n_layers, 12u);
  EXPECT_EQ(c.head_dim_k, 256u);
  EXPECT_EQ(c.sliding_window, 512u);
  EXPECT_EQ(std::count(c.is_sliding.begin(), c.is_sliding.end(), true), 10);
  EXPECT_FALSE(c.is_sliding[5]);
  EXPECT_FALSE(c.is_sliding[11]);
  EXPECT_FALSE(c.has_output_weight);
}

TEST_F(HfConfig, LayerTypesListChoosesSlidingLayers) {
  auto c = load(R"({"model_type": "qwen3", "num_hidden_layers": 3, "hidden_size": 64,
    "num_attention_heads": 4, "use_sliding_window": true, "sliding_window": 128,
    "layer_types": ["sliding_attention", "full_attention", "sliding_attention"]})");
  EXPECT_EQ(c.is_sliding, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(c.max_kv_heads(), 4u);  // no num_key_value_heads: plain multi-head attention
}

TEST_F(HfConfig, RefusesMissingOrInconsistentKeys) {
  try {
    load(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4})");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'num_hidden_layers'"));
  }
  try {
    load(R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,
      "num_attention_heads": 4, "num_key_value_heads": 8})");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("num_key_value_heads"));
  }
  try {
    load(R"({"model_type": "llama", "num_hidden_layers": "two", "hidden_size": 64,
      "num_attention_heads": 4})");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("num_hidden_layers"));
  }
}

}  // namespace
}  // namespace llms::model
