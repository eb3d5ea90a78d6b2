// The forward pass against Hugging Face transformers on tiny random-weight models of our own
// (tests/data/tiny_hf/<case>/, made by tools/make_tiny_hf_golden.py): llama and qwen3, which no
// registered model covers, and the RoPE scaling types (linear, Llama 3, YaRN) at positions well
// beyond the 32-token original context of the scaled cases.
//
// Each case directory holds the Hugging Face model transformers ran (config.json, bf16
// model.safetensors), the same weights as a GGUF file laid out as llama.cpp's converter lays them
// out (model.gguf, which the forward pass loads) and golden.json: the logits over the whole
// vocabulary at the last positions of each prompt, and a greedy continuation with its margins.
// The weights are F32 in the GGUF and exactly representable in bf16, so the only differences
// left are float rounding and summation order. Also: the RoPE frequencies from config.json
// (ModelConfig::from_hf) equal those from the GGUF file, and the directory converted to GGUF by
// llmserve itself (model/hf_conversion.h) gives the same logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf/hf_model_dir.h"
#include "kv/step_batch.h"
#include "model/hf_conversion.h"
#include "model/kv_storage.h"
#include "model/rope.h"
#include "model/transformer.h"

namespace llms::model {
namespace {

using nlohmann::json;

// Measured when written (transformers 5.25, torch 2.15): relative L2 error of a logit row at
// most 1.6e-6 with the f32 cache (the golden logits are rounded to 1e-6), 1.2e-3 with the f16
// cache. Without the RoPE scaling the scaled cases are off by 1.3 to 1.6, without YaRN's
// attention factor by 0.6 to 0.7.
constexpr double kMaxRelativeL2 = 1e-5;
constexpr double kMaxRelativeL2F16Cache = 5e-3;
// A greedy divergence is accepted only where the reference's best two logits were this close
// (logits spread with a standard deviation of about 1.4).
constexpr double kNearTie = 1e-3;
constexpr double kNearTieF16Cache = 2e-2;

std::filesystem::path case_dir(const std::string& name) {
  return std::filesystem::path(LLMS_TEST_DATA_DIR) / "tiny_hf" / name;
}

int32_t argmax(const float* row, int32_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

class TinyHfGolden : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    std::ifstream in(case_dir(GetParam()) / "golden.json");
    ASSERT_TRUE(in) << "missing " << case_dir(GetParam()) / "golden.json";
    golden_ = json::parse(in);
    file_ =
        std::make_unique<gguf::GgufFile>(gguf::GgufFile::open(case_dir(GetParam()) / "model.gguf"));
    model_ = std::make_unique<Transformer>(*file_, 2);
  }

  // Runs each golden prompt and its greedy continuation; returns the largest relative L2 error.
  double check(kv::KvCacheType kv_type, double max_relative_l2, double near_tie) {
    const int32_t n_vocab = model_->n_vocab();
    double worst = 0;
    for (const auto& rec : golden_["records"]) {
      auto ids = rec["prompt_ids"].get<std::vector<int32_t>>();
      auto positions = rec["positions"].get<std::vector<int32_t>>();
      auto want = rec["logits"].get<std::vector<std::vector<double>>>();
      SCOPED_TRACE("prompt of " + std::to_string(ids.size()) + " tokens");
      const auto n_rows = static_cast<int32_t>(positions.size());
      EXPECT_EQ(positions.back(), static_cast<int32_t>(ids.size()) - 1);

      KvStorage kv(model_->config(), 16, 16, kv_type);
      std::vector<kv::BlockId> table(16);
      for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<kv::BlockId>(i);
      kv::StepBatch batch;
      batch.add_sequence(1, ids, 0, table, n_rows);
      std::vector<float> logits(static_cast<size_t>(n_rows) * n_vocab);
      model_->forward(batch, kv, logits.data());
      for (int32_t r = 0; r < n_rows; ++r) {
        if (want[r].size() != static_cast<size_t>(n_vocab)) {
          ADD_FAILURE() << "golden row of " << want[r].size() << " logits";
          return 1.0;
        }
        double err = 0, norm = 0;
        for (int32_t v = 0; v < n_vocab; ++v) {
          const double d = logits[r * n_vocab + v] - want[r][v];
          err += d * d;
          norm += want[r][v] * want[r][v];
        }
        const double rel = std::sqrt(err / norm);
        worst = std::max(worst, rel);
        EXPECT_LE(rel, max_relative_l2) << "at position " << positions[r];
      }

      // Greedy continuation, one decode step at a time.
      auto greedy = rec["greedy"].get<std::vector<int32_t>>();
      auto margins = rec["greedy_margins"].get<std::vector<double>>();
      int32_t next = argmax(logits.data() + (n_rows - 1) * n_vocab, n_vocab);
      auto n_cached = static_cast<int32_t>(ids.size());
      for (size_t step = 0; step < greedy.size(); ++step) {
        if (next != greedy[step]) {
          EXPECT_LT(margins[step], near_tie)
              << "diverged at step " << step << " (ours " << next << ", reference " << greedy[step]
              << ") where the reference margin was " << margins[step];
          std::cout << "[ note ] near-tie divergence at step " << step << " (margin "
                    << margins[step] << ")\n";
          break;
        }
        kv::StepBatch one;
        std::vector<int32_t> token = {next};
        one.add_sequence(1, token, n_cached++, table, 1);
        model_->forward(one, kv, logits.data());
        next = argmax(logits.data(), n_vocab);
      }
    }
    return worst;
  }

  json golden_;
  std::vector<uint8_t> converted_;
  std::unique_ptr<gguf::GgufFile> file_;
  std::unique_ptr<Transformer> model_;
};

TEST_P(TinyHfGolden, LogitsAndGreedyContinuationMatchTransformers) {
  double worst = check(kv::KvCacheType::kF32, kMaxRelativeL2, kNearTie);
  std::cout << "[ info ] " << GetParam() << ": largest relative L2 error " << worst << "\n";
}

// The Hugging Face directory converted to GGUF by model/hf_conversion.h (bf16 matrices as
// stored, f32 vectors) instead of the generator's f32 model.gguf.
TEST_P(TinyHfGolden, ConvertedFromTheHuggingFaceDirectory) {
  gguf::GgufWriter writer;
  gguf::HfModelDir dir = gguf::HfModelDir::open(case_dir(GetParam()));
  add_hf_model(dir, writer);
  converted_ = writer.to_bytes();
  file_ = std::make_unique<gguf::GgufFile>(gguf::GgufFile::from_bytes(converted_));
  model_ = std::make_unique<Transformer>(*file_, 2);
  double worst = check(kv::KvCacheType::kF32, kMaxRelativeL2, kNearTie);
  std::cout << "[ info ] " << GetParam() << " (converted): largest relative L2 error " << worst
            << "\n";
}

TEST_P(TinyHfGolden, WithAnF16CacheToo) {
  double worst = check(kv::KvCacheType::kF16, kMaxRelativeL2F16Cache, kNearTieF16Cache);
  std::cout << "[ info ] " << GetParam() << " (f16 cache): largest relative L2 error " << worst
            << "\n";
}

TEST_P(TinyHfGolden, ConfigJsonGivesTheSameRopeAsTheGgufFile) {
  auto dir = gguf::HfModelDir::open(case_dir(GetParam()));
  ModelConfig hf = ModelConfig::from_hf(dir);
  const ModelConfig& gg = model_->config();
  EXPECT_EQ(hf.architecture, gg.architecture);
  EXPECT_EQ(hf.head_dim_k, gg.head_dim_k);
  EXPECT_TRUE(hf.unsupported.empty());
  EXPECT_DOUBLE_EQ(hf.rope_freq_base, gg.rope_freq_base);
  EXPECT_EQ(hf.rope_scaling_type, golden_["rope_parameters"]["rope_type"] == "default"
                                      ? std::string("none")
                                      : golden_["rope_parameters"]["rope_type"].get<std::string>());
  RopeFrequencies a = rope_frequencies(hf, hf.rope_freq_base, true);
  RopeFrequencies b = rope_frequencies(gg, gg.rope_freq_base, true);
  ASSERT_EQ(a.inv_freq.size(), b.inv_freq.size());
  for (size_t i = 0; i < a.inv_freq.size(); ++i) {
    // The GGUF stores Llama 3's divisors as f32.
    EXPECT_NEAR(a.inv_freq[i], b.inv_freq[i], 1e-6 * a.inv_freq[i]) << "pair " << i;
  }
  EXPECT_DOUBLE_EQ(a.attention_factor, b.attention_factor);
}

INSTANTIATE_TEST_SUITE_P(Cases, TinyHfGolden,
                         ::testing::Values("llama", "qwen3", "llama-linear", "llama-llama3",
                                           "qwen2-yarn", "qwen3-yarn"),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace llms::model
