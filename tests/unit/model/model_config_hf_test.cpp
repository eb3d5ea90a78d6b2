// ModelConfig::from_hf on hand-written config.json files beside a small safetensors file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "gguf/hf_model_dir.h"
#include "model/model_config.h"
#include "model/rope.h"
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

constexpr const char* kLlamaHead = R"({"model_type": "llama", "num_hidden_layers": 2,
  "hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 4096, )";

TEST_F(HfConfig, RopeScalingInTheLegacyRopeScalingForm) {
  auto c = load(std::string(kLlamaHead) + R"("rope_theta": 500000.0,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})");
  EXPECT_EQ(c.rope_freq_base, 500000.0);
  EXPECT_EQ(c.rope_scaling_type, "llama3");
  EXPECT_EQ(c.rope_scaling_factor, 8.0);
  EXPECT_EQ(c.rope_original_context, 8192u);
  EXPECT_EQ(c.rope_llama3_high_freq_factor, 4.0);
  // The oldest spelling: "type".
  c = load(std::string(kLlamaHead) + R"("rope_scaling": {"type": "linear", "factor": 2.0}})");
  EXPECT_EQ(c.rope_scaling_type, "linear");
  EXPECT_EQ(c.rope_scaling_factor, 2.0);
  EXPECT_EQ(c.rope_freq_base, 10000.0);
}

TEST_F(HfConfig, RopeScalingInTheRopeParametersForm) {
  // transformers 5: rope_theta inside rope_parameters; "default" means no scaling.
  auto c = load(std::string(kLlamaHead) +
                R"("rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}})");
  EXPECT_EQ(c.rope_scaling_type, "none");
  EXPECT_EQ(c.rope_freq_base, 1000000.0);
  c = load(std::string(kLlamaHead) + R"("rope_parameters": {"rope_type": "yarn",
    "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 1024,
    "beta_fast": 16, "attention_factor": 1.5, "truncate": false}})");
  EXPECT_EQ(c.rope_scaling_type, "yarn");
  EXPECT_EQ(c.rope_scaling_factor, 4.0);
  EXPECT_EQ(c.rope_original_context, 1024u);
  EXPECT_EQ(c.rope_yarn_beta_fast, 16.0);
  EXPECT_EQ(c.rope_yarn_beta_slow, 1.0);
  EXPECT_FALSE(c.rope_yarn_truncate);
  EXPECT_EQ(c.rope_yarn_attention_factor, 1.5);
  // Per layer type (Gemma 3): the full-attention entry is the model's scaling.
  c = load(std::string(kLlamaHead) + R"("rope_parameters": {
    "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
    "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}})");
  EXPECT_EQ(c.rope_scaling_type, "linear");
  EXPECT_EQ(c.rope_scaling_factor, 8.0);
  EXPECT_EQ(c.rope_freq_base, 1000000.0);
}

TEST_F(HfConfig, YarnWithoutAFactorTakesTheContextRatio) {
  auto c = load(std::string(kLlamaHead) + R"("rope_scaling": {"rope_type": "yarn",
    "original_max_position_embeddings": 1024}})");
  EXPECT_EQ(c.rope_scaling_factor, 4.0);  // 4096 / 1024, as transformers derives it
}

TEST_F(HfConfig, UnknownScalingIsKeptByNameAndRefusedByTheRope) {
  for (const char* type : {"longrope", "dynamic"}) {
    auto c = load(std::string(kLlamaHead) + R"("rope_scaling": {"rope_type": ")" + type +
                  R"(", "factor": 2.0}})");
    EXPECT_EQ(c.rope_scaling_type, type);
    try {
      rope_frequencies(c, c.rope_freq_base, true);
      FAIL() << type;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::kUnsupported);
      EXPECT_THAT(e.what(), HasSubstr("RoPE scaling type '" + std::string(type) + "'"));
    }
  }
}

TEST_F(HfConfig, WhatTheForwardPassDoesNotImplementIsListed) {
  auto c = load(std::string(kLlamaHead) +
                R"("partial_rotary_factor": 0.5, "final_logit_softcapping": 30.0})");
  ASSERT_EQ(c.unsupported.size(), 2u);
  EXPECT_THAT(c.unsupported[0], HasSubstr("partial_rotary_factor"));
  EXPECT_THAT(c.unsupported[1], HasSubstr("final_logit_softcapping"));
  c = load(R"({"model_type": "gemma3_text", "num_hidden_layers": 2, "hidden_size": 64,
    "num_attention_heads": 4, "head_dim": 16, "query_pre_attn_scalar": 32})");
  ASSERT_EQ(c.unsupported.size(), 1u);
  EXPECT_THAT(c.unsupported[0], HasSubstr("query_pre_attn_scalar"));
  EXPECT_TRUE(
      load(std::string(kLlamaHead) + R"("partial_rotary_factor": 1.0})").unsupported.empty());
}

}  // namespace
}  // namespace llms::model
