// Token trees in one forward pass (kv/step_batch.h): every node of a tree step gets the logits
// its branch gets when computed as a plain run, bit for bit, and moving a kept branch into the
// plain run's slots (copy_slots) leaves the cache as if that branch had been decoded alone.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "gguf/gguf_file.h"
#include "kv/step_batch.h"
#include "model/cpu_runner.h"
#include "model/tiny_model.h"
#include "temp_dir.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace llms::model {
namespace {

constexpr int32_t kBlock = 4;

class TokenTreeAttention
    : public ::testing::TestWithParam<std::tuple<const char*, kv::KvCacheType>> {
 protected:
  void SetUp() override {
    TinyModelSpec spec;
    spec.architecture = std::get<0>(GetParam());
    if (spec.architecture == "gemma3") {
      spec.tokenizer = TinyTokenizerKind::kSentencePieceLike;
      spec.sliding_window = 8;  // windows reach into the tree
    }
    spec.weight_stddev = 0.3f;
    path_ = dir_.path() / "tiny.gguf";
    write_tiny_model(spec, path_);
    file_ = std::make_unique<gguf::GgufFile>(gguf::GgufFile::open(path_));
    runner_ = std::make_unique<CpuRunner>(*file_, std::make_shared<ThreadPool>(2));
    runner_->allocate_kv(kBlock, 64, std::get<1>(GetParam()), runner_->config().single_kv_layout());
  }

  // Rows of a plain run: `prefix` is computed first (in a step of its own), then `run` in one
  // step, with logits for every token of `run`.
  std::vector<std::vector<float>> plain(const std::vector<kv::BlockId>& table,
                                        const std::vector<int32_t>& prefix,
                                        const std::vector<int32_t>& run) {
    kv::StepBatch b;
    b.add_sequence(1, prefix, 0, table, 0);
    runner_->execute(b);
    b.clear();
    b.add_sequence(1, run, static_cast<int32_t>(prefix.size()), table,
                   static_cast<int32_t>(run.size()));
    return rows_of(runner_->execute(b));
  }

  static std::vector<std::vector<float>> rows_of(const LogitsView& v) {
    std::vector<std::vector<float>> rows;
    for (int32_t r = 0; r < v.n_rows; ++r) rows.emplace_back(v.row(r).begin(), v.row(r).end());
    return rows;
  }

  testing::TempDir dir_;
  std::filesystem::path path_;
  std::unique_ptr<gguf::GgufFile> file_;
  std::unique_ptr<CpuRunner> runner_;
};

TEST_P(TokenTreeAttention, EveryNodeGetsItsBranchsPlainRows) {
  const std::vector<int32_t> prefix = {5,  17, 33, 2, 9,
                                       41, 7,  12, 30};  // 9: the tree straddles blocks
  // Region: root 0; 1 and 2 follow it; 3 follows 1; 4 and 5 follow 2; 6 follows 5.
  const std::vector<int32_t> tree = {20, 21, 22, 23, 24, 25, 26};
  const std::vector<int32_t> parents = {-1, 0, 0, 1, 2, 2, 5};
  std::vector<kv::BlockId> tree_table = {0, 1, 2, 3};  // 16 slots >= 9 + 7
  kv::StepBatch b;
  b.add_sequence(1, prefix, 0, tree_table, 0);
  runner_->execute(b);
  b.clear();
  b.add_sequence(1, tree, 9, tree_table, 7, parents);
  b.validate(kBlock, 64);
  EXPECT_EQ(b.positions, (std::vector<int32_t>{9, 10, 10, 11, 11, 11, 12}));
  const auto tree_rows = rows_of(runner_->execute(b));

  for (int32_t node = 0; node < 7; ++node) {
    std::vector<int32_t> branch;
    for (int32_t r = node; r >= 0; r = parents[static_cast<size_t>(r)]) {
      branch.insert(branch.begin(), tree[static_cast<size_t>(r)]);
    }
    const std::vector<kv::BlockId> table = {10, 11, 12, 13};
    const auto rows = plain(table, prefix, branch);
    EXPECT_EQ(tree_rows[static_cast<size_t>(node)], rows.back()) << "node " << node;
  }

  // Keep branch 0 -> 2 -> 5 -> 6: move nodes 2, 5, 6 into slots 10, 11, 12, then decode one
  // token after it; the cache must give what decoding that branch alone gives.
  const std::vector<kv::SlotCopy> moves = {{2, 11 % kBlock, 2, 10 % kBlock},
                                           {3, 14 % kBlock, 2, 11 % kBlock},
                                           {3, 15 % kBlock, 3, 12 % kBlock}};
  runner_->copy_slots(moves);
  b.clear();
  b.add_sequence(1, std::vector<int32_t>{27}, 13, tree_table, 1);
  const auto after_tree = rows_of(runner_->execute(b));
  const std::vector<kv::BlockId> table = {20, 21, 22, 23};
  const auto alone = plain(table, prefix, {20, 22, 25, 26, 27});
  EXPECT_EQ(after_tree.back(), alone.back());
}

TEST_P(TokenTreeAttention, ADraftModelGrowsItsTreeOneLevelPerStep) {
  const std::vector<int32_t> prefix = {3, 8, 13, 21, 34};
  std::vector<kv::BlockId> table = {0, 1, 2};  // 12 slots
  kv::StepBatch b;
  b.add_sequence(1, prefix, 0, table, 0);
  runner_->execute(b);
  // Level 1: two siblings that follow the context; level 2: one child of each.
  const std::vector<int32_t> parents = {-1, -1, 0, 1};
  b.clear();
  b.add_sequence(1, std::vector<int32_t>{40, 41}, 5, table, 2,
                 std::span<const int32_t>(parents).first(2));
  const auto level1 = rows_of(runner_->execute(b));
  b.clear();
  b.add_sequence(1, std::vector<int32_t>{42, 43}, 7, table, 2, parents);
  EXPECT_EQ(b.positions, (std::vector<int32_t>{6, 6}));
  const auto level2 = rows_of(runner_->execute(b));

  const std::vector<kv::BlockId> other = {10, 11, 12};
  EXPECT_EQ(level1[1], plain(other, prefix, {41}).back());
  EXPECT_EQ(level2[0], plain(other, prefix, {40, 42}).back());
  EXPECT_EQ(level2[1], plain(other, prefix, {41, 43}).back());
}

TEST(TokenTreeBatch, ValidateRefusesParentsThatDoNotPrecede) {
  kv::StepBatch b;
  const std::vector<kv::BlockId> table = {0, 1};
  const std::vector<int32_t> parents = {-1, 2, 0};
  b.add_sequence(1, std::vector<int32_t>{1, 2, 3}, 2, table, 3, parents);
  EXPECT_THROW(b.validate(kBlock, 8), Error);
}

INSTANTIATE_TEST_SUITE_P(
    Architectures, TokenTreeAttention,
    ::testing::Combine(::testing::Values("qwen2", "gemma3"),
                       ::testing::Values(kv::KvCacheType::kF32, kv::KvCacheType::kF16,
                                         kv::KvCacheType::kInt8, kv::KvCacheType::kFp8)));

}  // namespace
}  // namespace llms::model
