// The forward pass against Hugging Face transformers on the same GGUF files
// (tests/data/logits/*.json, made by tools/make_logits_golden.py).
//
// For each registered model that is cached: the last-position logits of each golden prompt match
// within a stated relative L2 error, and the 32-token greedy continuation is reproduced; a
// divergence is accepted only where the reference's own top-2 margin was a near-tie, and is
// reported. Also: the same prompts run together in one ragged batch give the same logits as
// when each runs alone (batch invariance of the paged forward pass).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "kv/step_batch.h"
#include "model/kv_storage.h"
#include "model/transformer.h"
#include "model_dir.h"
#include "sanitizer.h"

namespace llms {
namespace {

using nlohmann::json;

using testing::model_dir;

struct Case {
  const char* golden;  // file under tests/data/logits
  // Relative L2 error bound on the sampled logits in the fast path. Both sides use the same
  // quantized weights; we additionally quantize activations to 8 bits for integer dot products
  // (as llama.cpp does), which is what the bound pays for. Measured when written: Qwen 0.5B
  // 0.011-0.020, 1.5B 0.015-0.023, Gemma 3 0.019-0.096 (its activations have large outliers).
  double max_relative_l2;
  // A greedy divergence is accepted only where the reference's best two logits were this close.
  double near_tie;
  // Also run with weights dequantized to F32 (no activation quantization), where the forward
  // pass must equal transformers to float rounding. Off for the 1.5B (6 GB of F32 weights).
  bool check_f32_reference;
  // With an fp8 (E4M3) KV cache: its 3 mantissa bits cost more than 8-bit activations where keys
  // have outlier dimensions. Measured: 0.5B 0.022-0.042, 1.5B 0.026-0.079 with greedy
  // continuations leaving the reference at margins up to 2.3 (so not checked there: fp8 is not
  // fit for that model, docs/EVAL.md), Gemma 3 0.031-0.050.
  double fp8_max_relative_l2;
  double fp8_near_tie;
  // Run the quantized-cache variants in the sanitizer build too. Off for the 1.5B: the cache code
  // is the same for every model and runs there on the 0.5B and Gemma, while the 1.5B's three
  // variants took 9.5 of the sanitizer build's 55 test minutes; the release build runs them all.
  bool cache_variants_under_sanitizer;
};

// With F32 weights the only differences left are summation order and float rounding (measured
// 6e-7 to 9e-7 on Gemma 3).
constexpr double kF32MaxRelativeL2 = 1e-4;

// A near-tie bound that accepts any divergence: the greedy continuation is not checked.
constexpr double kNoGreedy = std::numeric_limits<double>::infinity();

class TransformerGolden : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    std::ifstream in(std::string(LLMS_TEST_DATA_DIR) + "/logits/" + GetParam().golden);
    if (!in) GTEST_SKIP() << "no golden file " << GetParam().golden;
    golden_ = json::parse(in);
    path_ = model_dir() / golden_["file"].get<std::string>();
    if (!std::filesystem::exists(path_)) GTEST_SKIP() << path_ << " not cached";
    file_ = std::make_unique<gguf::GgufFile>(gguf::GgufFile::open(path_));
    model_ = std::make_unique<model::Transformer>(*file_, 2);
  }

  void check_against_golden(double max_relative_l2, double near_tie,
                            kv::KvCacheType kv_type = kv::KvCacheType::kF32);

  bool skip_cache_variant() const {
    return testing::kUnderSanitizer && !GetParam().cache_variants_under_sanitizer;
  }

  // Runs `ids` as one prefill step in a fresh cache; returns the last row's logits.
  std::vector<float> prefill(const std::vector<int32_t>& ids, model::KvStorage& kv,
                             std::vector<kv::BlockId>& table) {
    table.resize((ids.size() + 64 + kv.block_size() - 1) / kv.block_size());
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<kv::BlockId>(i);
    kv::StepBatch batch;
    batch.add_sequence(1, ids, 0, table, true);
    std::vector<float> logits(model_->n_vocab());
    model_->forward(batch, kv, logits.data());
    return logits;
  }

  json golden_;
  std::filesystem::path path_;
  std::unique_ptr<gguf::GgufFile> file_;
  std::unique_ptr<model::Transformer> model_;
};

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

TEST_P(TransformerGolden, LogitsAndGreedyContinuationMatchTransformers) {
  check_against_golden(GetParam().max_relative_l2, GetParam().near_tie);
}

// The engine's default cache stores keys and values as f16 (as llama.cpp's does): the same
// tolerance against transformers holds with it.
TEST_P(TransformerGolden, LogitsAndGreedyContinuationMatchTransformersWithAnF16Cache) {
  if (skip_cache_variant()) GTEST_SKIP() << "runs in the release build";
  check_against_golden(GetParam().max_relative_l2, GetParam().near_tie, kv::KvCacheType::kF16);
}

// An int8 cache (a scale per token and KV head, keys smoothed) holds the same bound: its
// rounding of keys and values is small next to the 8-bit activations the bound already pays for.
TEST_P(TransformerGolden, LogitsAndGreedyContinuationMatchTransformersWithAnInt8Cache) {
  if (skip_cache_variant()) GTEST_SKIP() << "runs in the release build";
  check_against_golden(GetParam().max_relative_l2, GetParam().near_tie, kv::KvCacheType::kInt8);
}

TEST_P(TransformerGolden, LogitsStayCloseToTransformersWithAnFp8Cache) {
  if (skip_cache_variant()) GTEST_SKIP() << "runs in the release build";
  check_against_golden(GetParam().fp8_max_relative_l2, GetParam().fp8_near_tie,
                       kv::KvCacheType::kFp8);
}

TEST_P(TransformerGolden, WithF32WeightsEqualsTransformersToRounding) {
  if (!GetParam().check_f32_reference) GTEST_SKIP() << "F32 reference not run for this model";
  model_ = std::make_unique<model::Transformer>(*file_, 2, model::WeightMode::kDequantizedF32);
  check_against_golden(kF32MaxRelativeL2, 1e-3);
}

void TransformerGolden::check_against_golden(double max_relative_l2, double near_tie,
                                             kv::KvCacheType kv_type) {
  for (const auto& rec : golden_["records"]) {
    SCOPED_TRACE(rec["prompt"].get<std::string>());
    auto ids = rec["prompt_ids"].get<std::vector<int32_t>>();
    ASSERT_EQ(rec["n_vocab"].get<int32_t>(), model_->n_vocab());
    model::KvStorage kv(model_->config(), 16, 16, kv_type);
    model_->calibrate_key_smoothing(kv);
    std::vector<kv::BlockId> table;
    auto logits = prefill(ids, kv, table);

    auto logit_ids = rec["logit_ids"].get<std::vector<int32_t>>();
    auto want = rec["logits"].get<std::vector<double>>();
    double err = 0, norm = 0;
    for (size_t i = 0; i < logit_ids.size(); ++i) {
      double d = logits[logit_ids[i]] - want[i];
      err += d * d;
      norm += want[i] * want[i];
    }
    double rel = std::sqrt(err / norm);
    RecordProperty("relative_l2", std::to_string(rel));
    std::cout << "[ info ] relative L2 error of the logits: " << rel << "\n";
    EXPECT_LE(rel, max_relative_l2);

    // Greedy continuation, one decode step at a time through the paged cache.
    auto greedy = rec["greedy"].get<std::vector<int32_t>>();
    auto margins = rec["greedy_margins"].get<std::vector<double>>();
    int32_t next = argmax(logits);
    int32_t n_cached = static_cast<int32_t>(ids.size());
    for (size_t step = 0; step < greedy.size(); ++step) {
      if (next != greedy[step]) {
        EXPECT_LT(margins[step], near_tie)
            << "diverged at step " << step << " (ours " << next << ", reference " << greedy[step]
            << ") where the reference margin was " << margins[step];
        std::cout << "[ note ] near-tie divergence at step " << step << " (margin " << margins[step]
                  << ")\n";
        break;
      }
      kv::StepBatch batch;
      std::vector<int32_t> one = {next};
      batch.add_sequence(1, one, n_cached++, table, true);
      model_->forward(batch, kv, logits.data());
      next = argmax(logits);
    }
  }
}

TEST_P(TransformerGolden, RaggedBatchEqualsEachSequenceAlone) {
  const auto& records = golden_["records"];
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& rec : records) prompts.push_back(rec["prompt_ids"].get<std::vector<int32_t>>());
  // Alone.
  std::vector<std::vector<float>> alone;
  for (const auto& ids : prompts) {
    model::KvStorage kv(model_->config(), 16, 16);
    std::vector<kv::BlockId> table;
    alone.push_back(prefill(ids, kv, table));
  }
  // Together, each with its own non-contiguous blocks of one shared pool.
  const int32_t per_seq = 8;
  model::KvStorage kv(model_->config(), 16, per_seq * static_cast<int32_t>(prompts.size()));
  std::vector<std::vector<kv::BlockId>> tables(prompts.size());
  kv::StepBatch batch;
  for (size_t s = 0; s < prompts.size(); ++s) {
    for (int32_t b = 0; b < per_seq; ++b) {
      tables[s].push_back(static_cast<kv::BlockId>(b * prompts.size() + s));  // interleaved
    }
    batch.add_sequence(static_cast<int64_t>(s), prompts[s], 0, tables[s], true);
  }
  std::vector<float> logits(prompts.size() * model_->n_vocab());
  model_->forward(batch, kv, logits.data());
  for (size_t s = 0; s < prompts.size(); ++s) {
    std::vector<float> row(logits.begin() + s * model_->n_vocab(),
                           logits.begin() + (s + 1) * model_->n_vocab());
    EXPECT_EQ(argmax(row), argmax(alone[s])) << "sequence " << s;
    double err = 0, norm = 0;
    for (size_t i = 0; i < row.size(); ++i) {
      err += (row[i] - alone[s][i]) * double(row[i] - alone[s][i]);
      norm += alone[s][i] * double(alone[s][i]);
    }
    EXPECT_LE(std::sqrt(err / norm), 1e-4) << "sequence " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, TransformerGolden,
    ::testing::Values(Case{"qwen2.5-coder-0.5b-instruct.json", 0.05, 0.25, true, 0.07, 0.25, true},
                      Case{"qwen2.5-coder-1.5b-instruct.json", 0.05, 0.25, false, 0.12, kNoGreedy,
                           false},
                      Case{"gemma-3-270m.json", 0.15, 0.5, true, 0.15, 0.5, true}),
    [](const auto& param_info) {
      std::string n = param_info.param.golden;
      n = n.substr(0, n.rfind('.'));
      for (char& ch : n) {
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return n;
    });

}  // namespace
}  // namespace llms
