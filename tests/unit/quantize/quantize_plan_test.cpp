// The per-tensor type rule of `llmserve quantize`: target names, llama.cpp's layer picks for the
// mixes, tied embeddings, and the fallbacks for rows that are not whole blocks.
#include "quantize/quantize_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "util/error.h"

namespace llms::quantize {
namespace {

using gguf::GgmlType;
using ::testing::HasSubstr;

std::string layer_tensor(int64_t layer, const char* suffix) {
  return "blk." + std::to_string(layer) + "." + suffix;
}

TEST(QuantizeTarget, ParsesEveryNameIgnoringCase) {
  EXPECT_EQ(parse_target("q4_k_m"), QuantizeTarget::kQ4_K_M);
  EXPECT_EQ(parse_target("Q5_K_M"), QuantizeTarget::kQ5_K_M);
  EXPECT_EQ(parse_target("f16"), QuantizeTarget::kF16);
  EXPECT_EQ(parse_target("Q8_0"), QuantizeTarget::kQ8_0);
  for (const TargetInfo& info : all_targets()) {
    EXPECT_EQ(parse_target(info.name), info.target) << info.name;
  }
}

TEST(QuantizeTarget, RefusesAnUnknownNameListingTheValidOnes) {
  for (const char* bad : {"q3_k", "", "Q4_K_MM", "int8"}) {
    try {
      parse_target(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument);
      EXPECT_THAT(e.what(), HasSubstr("'" + std::string(bad) + "'"));
      EXPECT_THAT(e.what(),
                  HasSubstr("F32, F16, Q8_0, Q6_K, Q5_K, Q4_K, Q5_0, Q4_0, Q4_K_M, Q5_K_M"));
    }
  }
}

TEST(QuantizeTarget, CarriesLlamaCppFileTypes) {
  EXPECT_EQ(target_info(QuantizeTarget::kF32).llama_file_type, 0u);
  EXPECT_EQ(target_info(QuantizeTarget::kF16).llama_file_type, 1u);
  EXPECT_EQ(target_info(QuantizeTarget::kQ4_0).llama_file_type, 2u);
  EXPECT_EQ(target_info(QuantizeTarget::kQ8_0).llama_file_type, 7u);
  EXPECT_EQ(target_info(QuantizeTarget::kQ5_0).llama_file_type, 8u);
  EXPECT_EQ(target_info(QuantizeTarget::kQ4_K).llama_file_type, 14u);
  EXPECT_EQ(target_info(QuantizeTarget::kQ4_K_M).llama_file_type, 15u);
  EXPECT_EQ(target_info(QuantizeTarget::kQ5_K).llama_file_type, 16u);
  EXPECT_EQ(target_info(QuantizeTarget::kQ5_K_M).llama_file_type, 17u);
  EXPECT_EQ(target_info(QuantizeTarget::kQ6_K).llama_file_type, 18u);
}

TEST(QuantizePlan, LayerIndexComesFromTheBlkPrefix) {
  EXPECT_EQ(layer_of("blk.0.attn_v.weight"), 0);
  EXPECT_EQ(layer_of("blk.27.ffn_down.weight"), 27);
  EXPECT_EQ(layer_of("output.weight"), std::nullopt);
  EXPECT_EQ(layer_of("blk.x.attn_v.weight"), std::nullopt);
  EXPECT_EQ(layer_of("blk.-1.attn_v.weight"), std::nullopt);
  EXPECT_EQ(layer_of("blk.3"), std::nullopt);
  EXPECT_EQ(layer_of("blk.3x.attn_v.weight"), std::nullopt);
}

TEST(QuantizePlan, UseMoreBitsPicksLlamaCppsLayersOf24And28) {
  const std::set<int64_t> expected_24 = {0, 1, 2, 5, 8, 11, 14, 17, 20, 21, 22, 23};
  const std::set<int64_t> expected_28 = {0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27};
  std::set<int64_t> picked_24, picked_28;
  for (int64_t layer = 0; layer < 28; ++layer) {
    if (layer < 24 && uses_more_bits(layer, 24)) picked_24.insert(layer);
    if (uses_more_bits(layer, 28)) picked_28.insert(layer);
  }
  EXPECT_EQ(picked_24, expected_24);
  EXPECT_EQ(picked_28, expected_28);
}

TEST(QuantizePlan, Q4KMRaisesOutputAndThePickedAttnVAndFfnDown) {
  for (int64_t n_layers : {24, 28}) {
    SCOPED_TRACE(n_layers);
    const QuantizePlan plan(QuantizeTarget::kQ4_K_M, n_layers, /*has_output=*/true);
    EXPECT_EQ(plan.type_for("output.weight", 2, 1024), GgmlType::kQ6_K);
    EXPECT_EQ(plan.type_for("token_embd.weight", 2, 1024), GgmlType::kQ4_K);
    EXPECT_EQ(plan.type_for("output_norm.weight", 1, 1024), GgmlType::kF32);
    for (int64_t layer = 0; layer < n_layers; ++layer) {
      SCOPED_TRACE(layer);
      const GgmlType raised = uses_more_bits(layer, n_layers) ? GgmlType::kQ6_K : GgmlType::kQ4_K;
      EXPECT_EQ(plan.type_for(layer_tensor(layer, "attn_v.weight"), 2, 1024), raised);
      EXPECT_EQ(plan.type_for(layer_tensor(layer, "ffn_down.weight"), 2, 4096), raised);
      for (const char* other : {"attn_q.weight", "attn_k.weight", "attn_output.weight",
                                "ffn_gate.weight", "ffn_up.weight"}) {
        EXPECT_EQ(plan.type_for(layer_tensor(layer, other), 2, 1024), GgmlType::kQ4_K) << other;
      }
      EXPECT_EQ(plan.type_for(layer_tensor(layer, "attn_norm.weight"), 1, 1024), GgmlType::kF32);
      EXPECT_EQ(plan.type_for(layer_tensor(layer, "attn_v.bias"), 1, 1024), GgmlType::kF32);
    }
  }
  // The 24-layer picks spelled out once: first three, last three, every third between.
  const QuantizePlan plan(QuantizeTarget::kQ4_K_M, 24, true);
  EXPECT_EQ(plan.type_for("blk.2.attn_v.weight", 2, 1024), GgmlType::kQ6_K);
  EXPECT_EQ(plan.type_for("blk.3.attn_v.weight", 2, 1024), GgmlType::kQ4_K);
  EXPECT_EQ(plan.type_for("blk.5.ffn_down.weight", 2, 4096), GgmlType::kQ6_K);
  EXPECT_EQ(plan.type_for("blk.6.ffn_down.weight", 2, 4096), GgmlType::kQ4_K);
  EXPECT_EQ(plan.type_for("blk.21.attn_v.weight", 2, 1024), GgmlType::kQ6_K);
}

TEST(QuantizePlan, Q5KMUsesQ5KAsItsBase) {
  const QuantizePlan plan(QuantizeTarget::kQ5_K_M, 24, true);
  EXPECT_EQ(plan.type_for("blk.3.attn_q.weight", 2, 1024), GgmlType::kQ5_K);
  EXPECT_EQ(plan.type_for("blk.3.attn_v.weight", 2, 1024), GgmlType::kQ5_K);
  EXPECT_EQ(plan.type_for("blk.0.attn_v.weight", 2, 1024), GgmlType::kQ6_K);
  EXPECT_EQ(plan.type_for("output.weight", 2, 1024), GgmlType::kQ6_K);
}

TEST(QuantizePlan, TiedEmbeddingsRaiseTokenEmbd) {
  const QuantizePlan tied(QuantizeTarget::kQ4_K_M, 24, /*has_output=*/false);
  EXPECT_EQ(tied.type_for("token_embd.weight", 2, 1024), GgmlType::kQ6_K);
  const QuantizePlan untied(QuantizeTarget::kQ4_K_M, 24, /*has_output=*/true);
  EXPECT_EQ(untied.type_for("token_embd.weight", 2, 1024), GgmlType::kQ4_K);
}

TEST(QuantizePlan, PlainTargetsAreUniform) {
  for (auto [target, type] : {std::pair{QuantizeTarget::kQ8_0, GgmlType::kQ8_0},
                              std::pair{QuantizeTarget::kQ4_0, GgmlType::kQ4_0},
                              std::pair{QuantizeTarget::kQ4_K, GgmlType::kQ4_K},
                              std::pair{QuantizeTarget::kQ6_K, GgmlType::kQ6_K},
                              std::pair{QuantizeTarget::kF16, GgmlType::kF16},
                              std::pair{QuantizeTarget::kF32, GgmlType::kF32}}) {
    const QuantizePlan plan(target, 0, false);
    SCOPED_TRACE(plan.target().name);
    EXPECT_EQ(plan.type_for("output.weight", 2, 1024), type);
    EXPECT_EQ(plan.type_for("token_embd.weight", 2, 1024), type);
    EXPECT_EQ(plan.type_for("blk.0.attn_v.weight", 2, 1024), type);
    EXPECT_EQ(plan.type_for("blk.0.attn_v.weight", 3, 1024), type);
    EXPECT_EQ(plan.type_for("blk.0.attn_norm.weight", 1, 1024), GgmlType::kF32);
  }
}

TEST(QuantizePlan, RowsThatAreNotWholeBlocksFallBack) {
  // 896 = 28 x 32 but not a multiple of 256 (Qwen2.5-0.5B's width).
  EXPECT_EQ(fit_to_row(GgmlType::kQ4_K, 896), GgmlType::kQ5_0);
  EXPECT_EQ(fit_to_row(GgmlType::kQ5_K, 896), GgmlType::kQ8_0);
  EXPECT_EQ(fit_to_row(GgmlType::kQ6_K, 896), GgmlType::kQ8_0);
  EXPECT_EQ(fit_to_row(GgmlType::kQ4_K, 4864), GgmlType::kQ4_K);
  // Not even 32 divides: F16, from K types and 32-element types alike.
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kQ8_0,
                        GgmlType::kQ5_0, GgmlType::kQ4_0}) {
    EXPECT_EQ(fit_to_row(type, 40), GgmlType::kF16) << gguf::ggml_type_name(type);
  }
  EXPECT_EQ(fit_to_row(GgmlType::kQ8_0, 64), GgmlType::kQ8_0);
  EXPECT_EQ(fit_to_row(GgmlType::kF16, 7), GgmlType::kF16);
  EXPECT_EQ(fit_to_row(GgmlType::kF32, 7), GgmlType::kF32);

  const QuantizePlan plan(QuantizeTarget::kQ4_K_M, 24, true);
  EXPECT_EQ(plan.type_for("blk.3.attn_q.weight", 2, 896), GgmlType::kQ5_0);
  EXPECT_EQ(plan.type_for("blk.0.attn_v.weight", 2, 896), GgmlType::kQ8_0);
  EXPECT_EQ(plan.type_for("output.weight", 2, 896), GgmlType::kQ8_0);
  EXPECT_EQ(plan.type_for("blk.3.attn_q.weight", 2, 40), GgmlType::kF16);
}

gguf::GgufFile file_with(const std::string& arch, bool with_block_count, bool with_output) {
  gguf::GgufWriter w;
  if (!arch.empty()) w.set_string("general.architecture", arch);
  if (with_block_count) w.set_u32(arch + ".block_count", 28);
  const uint64_t ne[] = {32, 2};
  const std::vector<uint8_t> data(32 * 2 * sizeof(float), 0);
  w.add_tensor("token_embd.weight", GgmlType::kF32, ne, data);
  if (with_output) w.add_tensor("output.weight", GgmlType::kF32, ne, data);
  return gguf::GgufFile::from_bytes(w.to_bytes());
}

TEST(QuantizePlan, ForFileReadsTheLayerCountAndTheOutputTensor) {
  const QuantizePlan plan =
      QuantizePlan::for_file(QuantizeTarget::kQ4_K_M, file_with("qwen2", true, true));
  EXPECT_EQ(plan.n_layers(), 28);
  EXPECT_TRUE(plan.has_output());
  const QuantizePlan tied =
      QuantizePlan::for_file(QuantizeTarget::kQ5_K_M, file_with("qwen2", true, false));
  EXPECT_FALSE(tied.has_output());
}

TEST(QuantizePlan, AMixRefusesAFileWithoutALayerCount) {
  try {
    QuantizePlan::for_file(QuantizeTarget::kQ4_K_M, file_with("qwen2", false, true));
    ADD_FAILURE() << "accepted a file without qwen2.block_count";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kInvalidFile);
    EXPECT_THAT(e.what(), HasSubstr("qwen2.block_count"));
  }
  EXPECT_THROW(QuantizePlan::for_file(QuantizeTarget::kQ5_K_M, file_with("", false, true)), Error);
  // Plain targets do not need it.
  EXPECT_NO_THROW(QuantizePlan::for_file(QuantizeTarget::kQ8_0, file_with("qwen2", false, true)));
}

}  // namespace
}  // namespace llms::quantize
