// The transformer's activation observer (Transformer::set_activation_observer): it is told every
// weight matmul's input by the weight's GGUF name, in order and with the right shape, the shared
// inputs once per weight; what it is told is what the matmul multiplies (the first layer's
// attn_q input is the RMS-normed embedding, recomputed here from the file); the output matrix only
// over logits rows, under its tied name when tied; observing changes no logit; and an int8 KV
// store's calibration pass is not told.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "kv/step_batch.h"
#include "model/cpu_runner.h"
#include "model/tiny_model.h"
#include "temp_dir.h"
#include "util/thread_pool.h"

namespace llms::model {
namespace {

constexpr int32_t kBlock = 16;

struct Told {
  std::string weight;
  const float* data;
  int64_t n_rows;
  int64_t n_columns;
  std::vector<float> values;
};

class ActivationObserverTest : public ::testing::Test {
 protected:
  // With `observe_first`, the observer is set before the KV storage exists (an int8 store's
  // key-smoothing calibration runs a forward pass of its own then).
  void open(const TinyModelSpec& spec, kv::KvCacheType kv_type = kv::KvCacheType::kF32,
            bool observe_first = false) {
    path_ = dir_.path() / "tiny.gguf";
    write_tiny_model(spec, path_);
    file_ = std::make_unique<gguf::GgufFile>(gguf::GgufFile::open(path_));
    runner_ = std::make_unique<CpuRunner>(*file_, std::make_shared<ThreadPool>(2));
    if (observe_first) observe();
    runner_->allocate_kv(kBlock, 8, kv_type, runner_->config().single_kv_layout());
  }

  static std::vector<int32_t> tokens(int32_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = (i * 37 + 5) % 250 + 3;
    return t;
  }

  // Runs one prefill of `ids` asking for `n_logits` rows; returns the logits.
  std::vector<float> run(const std::vector<int32_t>& ids, int32_t n_logits) {
    kv::StepBatch batch;
    const std::vector<kv::BlockId> table = {0, 1, 2, 3};
    batch.add_sequence(1, ids, 0, table, n_logits);
    const LogitsView logits = runner_->execute(batch);
    return std::vector<float>(logits.data, logits.data + logits.n_rows * logits.n_vocab);
  }

  void observe() {
    runner_->transformer().set_activation_observer([this](const MatmulInput& in) {
      told_.push_back({std::string(in.weight), in.data, in.n_rows, in.n_columns,
                       std::vector<float>(in.data, in.data + in.n_rows * in.n_columns)});
    });
  }

  std::vector<float> tensor_values(const std::string& name) {
    const gguf::TensorInfo* t = file_->find_tensor(name);
    EXPECT_NE(t, nullptr) << name;
    EXPECT_EQ(t->type, gguf::GgmlType::kF32) << name;
    std::vector<float> v(t->n_elements);
    std::memcpy(v.data(), file_->tensor_data(*t).data(), v.size() * sizeof(float));
    return v;
  }

  testing::TempDir dir_;
  std::filesystem::path path_;
  std::unique_ptr<gguf::GgufFile> file_;
  std::unique_ptr<CpuRunner> runner_;
  std::vector<Told> told_;
};

TEST_F(ActivationObserverTest, ToldEveryMatmulByNameInOrderWithItsShape) {
  TinyModelSpec spec;
  spec.n_layers = 2;
  open(spec);
  observe();
  run(tokens(20), 3);
  const ModelConfig& c = runner_->config();
  const auto d = static_cast<int64_t>(c.n_embd);
  const auto ff = static_cast<int64_t>(c.n_ff);
  const auto attn = static_cast<int64_t>(c.n_heads * c.head_dim_v);
  std::vector<std::pair<std::string, int64_t>> expected;
  for (int layer = 0; layer < 2; ++layer) {
    const std::string p = "blk." + std::to_string(layer) + ".";
    expected.insert(expected.end(), {{p + "attn_q.weight", d},
                                     {p + "attn_k.weight", d},
                                     {p + "attn_v.weight", d},
                                     {p + "attn_output.weight", attn},
                                     {p + "ffn_gate.weight", d},
                                     {p + "ffn_up.weight", d},
                                     {p + "ffn_down.weight", ff}});
  }
  expected.push_back({"output.weight", d});
  ASSERT_EQ(told_.size(), expected.size());
  for (size_t i = 0; i < told_.size(); ++i) {
    SCOPED_TRACE(told_[i].weight);
    EXPECT_EQ(told_[i].weight, expected[i].first);
    EXPECT_EQ(told_[i].n_columns, expected[i].second);
    // Its input width is the weight's ne[0].
    EXPECT_EQ(static_cast<int64_t>(file_->find_tensor(told_[i].weight)->ne[0]), told_[i].n_columns);
    EXPECT_EQ(told_[i].n_rows, told_[i].weight == "output.weight" ? 3 : 20);
  }
  // q, k and v share one input, as gate and up do: the same rows, told once per weight.
  EXPECT_EQ(told_[0].data, told_[1].data);
  EXPECT_EQ(told_[1].data, told_[2].data);
  EXPECT_EQ(told_[4].data, told_[5].data);
}

TEST_F(ActivationObserverTest, TheFirstAttentionInputIsTheNormedEmbedding) {
  open(TinyModelSpec{});
  observe();
  const std::vector<int32_t> ids = tokens(17);
  run(ids, 0);
  ASSERT_FALSE(told_.empty());
  const Told& q = told_[0];
  ASSERT_EQ(q.weight, "blk.0.attn_q.weight");
  const ModelConfig& c = runner_->config();
  const size_t d = c.n_embd;
  const std::vector<float> embd = tensor_values("token_embd.weight");
  const std::vector<float> norm = tensor_values("blk.0.attn_norm.weight");
  for (size_t i = 0; i < ids.size(); ++i) {
    const float* x = embd.data() + static_cast<size_t>(ids[i]) * d;
    double sum_xx = 0;
    for (size_t j = 0; j < d; ++j) sum_xx += static_cast<double>(x[j]) * x[j];
    const double inv_rms = 1.0 / std::sqrt(sum_xx / static_cast<double>(d) + c.rms_norm_eps);
    for (size_t j = 0; j < d; ++j) {
      const double expected = x[j] * inv_rms * norm[j];
      EXPECT_NEAR(q.values[i * d + j], expected, 1e-5 * (1.0 + std::fabs(expected)))
          << "token " << i << " column " << j;
    }
  }
}

TEST_F(ActivationObserverTest, NoLogitsRowsNoOutputMatmulAndATiedOutputByItsName) {
  TinyModelSpec spec;
  spec.tie_embeddings = true;
  open(spec);
  observe();
  run(tokens(16), 0);
  for (const Told& t : told_) EXPECT_NE(t.weight.rfind("blk.", 0), std::string::npos) << t.weight;
  told_.clear();
  run(tokens(16), 16);
  ASSERT_FALSE(told_.empty());
  EXPECT_EQ(told_.back().weight, "token_embd.weight");
  EXPECT_EQ(told_.back().n_rows, 16);
}

TEST_F(ActivationObserverTest, ObservingChangesNoLogit) {
  open(TinyModelSpec{});
  const std::vector<float> plain = run(tokens(24), 24);
  observe();
  const std::vector<float> observed = run(tokens(24), 24);
  EXPECT_EQ(plain, observed);
  EXPECT_FALSE(told_.empty());
  runner_->transformer().set_activation_observer(nullptr);
  told_.clear();
  EXPECT_EQ(run(tokens(24), 24), plain);
  EXPECT_TRUE(told_.empty());
}

TEST_F(ActivationObserverTest, TheKeySmoothingCalibrationPassIsNotTold) {
  open(TinyModelSpec{}, kv::KvCacheType::kInt8, /*observe_first=*/true);
  EXPECT_TRUE(told_.empty());
  run(tokens(16), 0);
  EXPECT_EQ(told_.size(), 14u);  // 2 layers x 7 matrices
}

}  // namespace
}  // namespace llms::model
