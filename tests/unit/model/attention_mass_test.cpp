// Attention mass per KV block (ModelRunner::track_attention_mass, for H2O-style eviction): every
// query row's softmax weights sum to one, so a slice's blocks together draw layers x heads x its
// queries; a block given back (kNoBlock) draws nothing and the rest still sum to the same; and
// tracking changes no logit.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

#include "gguf/gguf_file.h"
#include "kv/step_batch.h"
#include "model/cpu_runner.h"
#include "model/tiny_model.h"
#include "temp_dir.h"
#include "util/thread_pool.h"

namespace llms::model {
namespace {

constexpr int32_t kBlock = 8;

class AttentionMassTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TinyModelSpec spec;
    spec.n_layers = 3;
    spec.weight_stddev = 0.3f;
    path_ = dir_.path() / "tiny.gguf";
    write_tiny_model(spec, path_);
    file_ = std::make_unique<gguf::GgufFile>(gguf::GgufFile::open(path_));
    runner_ = std::make_unique<CpuRunner>(*file_, std::make_shared<ThreadPool>(2));
    runner_->allocate_kv(kBlock, 32, kv::KvCacheType::kF32, runner_->config().single_kv_layout());
  }

  static std::vector<int32_t> tokens(int32_t n, int32_t seed) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = (i * 37 + seed * 11) % 250 + 3;
    return t;
  }

  testing::TempDir dir_;
  std::filesystem::path path_;
  std::unique_ptr<gguf::GgufFile> file_;
  std::unique_ptr<CpuRunner> runner_;
};

TEST_F(AttentionMassTest, EveryQueryRowDistributesOneUnitOverTheBlocks) {
  const ModelConfig& c = runner_->config();
  const double per_row = static_cast<double>(c.n_layers * c.n_heads);
  std::vector<kv::BlockId> a = {0, 1, 2, 3, 4};
  std::vector<kv::BlockId> b = {10, 11, 12};
  runner_->track_attention_mass(true);
  kv::StepBatch batch;
  batch.add_sequence(1, tokens(37, 1), 0, a, 1);  // a prefill of 37 (5 blocks)
  batch.add_sequence(2, tokens(20, 2), 0, b, 1);  // and one of 20 (3 blocks)
  runner_->execute(batch);
  const auto mass_a = runner_->attention_mass(0);
  const auto mass_b = runner_->attention_mass(1);
  ASSERT_EQ(mass_a.size(), 5u);
  ASSERT_EQ(mass_b.size(), 3u);
  for (float m : mass_a) EXPECT_GT(m, 0.0f);
  EXPECT_NEAR(std::accumulate(mass_a.begin(), mass_a.end(), 0.0), per_row * 37,
              1e-3 * per_row * 37);
  EXPECT_NEAR(std::accumulate(mass_b.begin(), mass_b.end(), 0.0), per_row * 20,
              1e-3 * per_row * 20);
  // Causal: block 0 is seen by every query, block 4 only by the last five.
  EXPECT_GT(mass_a[0], mass_a[4]);

  // Decode one token of sequence 1 with its block 1 given back: it draws nothing, the others
  // one unit per (layer, head) between them, and the logits are those without tracking.
  std::vector<kv::BlockId> holed = a;
  holed[1] = kv::kNoBlock;
  batch.clear();
  const std::vector<int32_t> next = {tokens(38, 1).back()};
  batch.add_sequence(1, next, 37, holed, 1);
  const LogitsView tracked = runner_->execute(batch);
  const std::vector<float> with(tracked.row(0).begin(), tracked.row(0).end());
  const auto mass = runner_->attention_mass(0);
  EXPECT_EQ(mass[1], 0.0f);
  EXPECT_NEAR(std::accumulate(mass.begin(), mass.end(), 0.0), per_row, 1e-3 * per_row);
  runner_->track_attention_mass(false);
  const LogitsView plain = runner_->execute(batch);  // rewrites the same slot: same values
  for (int32_t i = 0; i < plain.n_vocab; ++i)
    ASSERT_EQ(plain.row(0)[i], with[static_cast<size_t>(i)]);
}

}  // namespace
}  // namespace llms::model
