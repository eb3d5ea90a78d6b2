// SmoothQuant-style smoothing: the collector keeps each input's column-wise max |x| (q/k/v share
// one); the planned factors are s_j = m_j^alpha / w_j^(1 - alpha) with the norm (or up's rows)
// divided by them; and a tiny model rewritten with them in F32 computes the same logits while its
// weights did change.
#include "quantize/smoothing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "kv/step_batch.h"
#include "model/cpu_runner.h"
#include "model/tiny_model.h"
#include "quantize/model_quantizer.h"
#include "quantize_fixtures.h"
#include "temp_dir.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace llms::quantize {
namespace {

using fixtures::k_friendly_spec;
using fixtures::last_logits;
using fixtures::options_for;
using fixtures::relative_l2;
using fixtures::tokens;
using fixtures::values_of;

namespace fs = std::filesystem;

TEST(ActivationRanges, ColumnMaximaSharedBySiblings) {
  ActivationRangeCollector c;
  const std::vector<float> a = {1.0f, -3.0f, 0.5f, 2.0f, 1.0f, -0.25f};  // 2 rows x 3
  c.add("blk.0.attn_q.weight", a.data(), 2, 3);
  const std::vector<float> b = {-4.0f, 0.0f, 0.0f};
  c.add("blk.0.attn_v.weight", b.data(), 1, 3);  // the same input as q's
  c.add("output.weight", b.data(), 1, 3);        // not a layer's
  EXPECT_THROW(c.add("blk.0.attn_k.weight", a.data(), 1, 6), Error);
  const ActivationRanges r = c.take();
  ASSERT_NE(r.find("blk.0.attn_k.weight"), nullptr);
  EXPECT_EQ(*r.find("blk.0.attn_k.weight"), (std::vector<float>{4.0f, 3.0f, 0.5f}));
  EXPECT_EQ(r.find("output.weight"), nullptr);
  EXPECT_EQ(r.max_abs.size(), 1u);
}

ActivationRanges calibrate(const fs::path& model_path) {
  ActivationRangeCollector collector;
  fixtures::observe_chunks(model_path, 4, 48, [&](const model::MatmulInput& in) {
    collector.add(in.weight, in.data, in.n_rows, in.n_columns);
  });
  return collector.take();
}

class SmoothingTest : public ::testing::Test {
 protected:
  void SetUp() override { write_model("qwen2"); }
  void write_model(const std::string& architecture) {
    in_ = dir_.path() / (architecture + ".gguf");
    model::TinyModelSpec spec = k_friendly_spec(2);
    spec.architecture = architecture;
    model::write_tiny_model(spec, in_);
    ranges_ = calibrate(in_);
  }
  testing::TempDir dir_;
  fs::path in_;
  ActivationRanges ranges_;
};

TEST_F(SmoothingTest, FactorsFollowTheFormula) {
  const gguf::GgufFile file = gguf::GgufFile::open(in_);
  const double alpha = 0.6;
  const SmoothingPlan plan = plan_smoothing(file, ranges_, alpha);
  EXPECT_EQ(plan.n_groups, 6);  // 2 layers x (attention norm, feed-forward norm, up/down)
  // Layer 1's feed-forward group, recomputed from the file.
  const std::vector<float>& m = *ranges_.find("blk.1.ffn_gate.weight");
  const auto width = m.size();
  std::vector<double> w(width, 0.0);
  for (const char* name : {"blk.1.ffn_gate.weight", "blk.1.ffn_up.weight"}) {
    const std::vector<float> v = values_of(file, *file.find_tensor(name));
    for (size_t i = 0; i < v.size(); ++i)
      w[i % width] = std::max(w[i % width], std::fabs(double(v[i])));
  }
  const TensorRescale& norm = plan.rescales.at("blk.1.ffn_norm.weight");
  const TensorRescale& gate = plan.rescales.at("blk.1.ffn_gate.weight");
  const TensorRescale& up = plan.rescales.at("blk.1.ffn_up.weight");
  ASSERT_EQ(gate.column.size(), width);
  EXPECT_TRUE(gate.row.empty());
  ASSERT_FALSE(up.row.empty());  // also the producer of down's input
  for (size_t j = 0; j < width; ++j) {
    const double s = std::pow(m[j], alpha) / std::pow(w[j], 1.0 - alpha);
    EXPECT_NEAR(gate.column[j], s, 1e-5 * s) << j;
    EXPECT_NEAR(up.column[j], s, 1e-5 * s) << j;
    EXPECT_NEAR(norm.column[j] * s, 1.0, 1e-5) << j;
  }
  // The up/down group: up's rows divided, down's columns multiplied, by the same factors.
  const std::vector<float>& m_down = *ranges_.find("blk.1.ffn_down.weight");
  const TensorRescale& down = plan.rescales.at("blk.1.ffn_down.weight");
  ASSERT_EQ(up.row.size(), m_down.size());
  ASSERT_EQ(down.column.size(), m_down.size());
  EXPECT_TRUE(down.row.empty());
  for (size_t j = 0; j < m_down.size(); ++j) EXPECT_NEAR(up.row[j] * down.column[j], 1.0f, 1e-5);
  EXPECT_THROW(plan_smoothing(file, ranges_, 1.5), Error);
}

// Every architecture the loader runs: Qwen2's q/k/v biases, Qwen3's and Gemma 3's q/k norms,
// Gemma 3's post-norms and GELU act on outputs that smoothing leaves as they were.
TEST_F(SmoothingTest, SmoothedModelComputesTheSameLogits) {
  for (const char* architecture : {"qwen2", "llama", "qwen3", "gemma3"}) {
    SCOPED_TRACE(architecture);
    write_model(architecture);
    const gguf::GgufFile file = gguf::GgufFile::open(in_);
    const SmoothingPlan plan = plan_smoothing(file, ranges_, 0.5);
    EXPECT_EQ(plan.n_groups, 6);
    const fs::path out = dir_.path() / (std::string(architecture) + "-smoothed.gguf");
    QuantizeOptions o = options_for(in_, out, QuantizeTarget::kF32);
    o.rescales = &plan.rescales;
    size_t n_rescaled = 0;
    o.on_tensor = [&](const TensorProgress& p) { n_rescaled += p.rescaled; };
    quantize_model(o);
    EXPECT_EQ(n_rescaled, plan.rescales.size());

    // The weights moved: the attention norm is no longer what it was.
    const gguf::GgufFile smoothed = gguf::GgufFile::open(out);
    const std::vector<float> norm_before =
        values_of(file, *file.find_tensor("blk.0.attn_norm.weight"));
    const std::vector<float> norm_after =
        values_of(smoothed, *smoothed.find_tensor("blk.0.attn_norm.weight"));
    double moved = 0.0;
    for (size_t i = 0; i < norm_before.size(); ++i) {
      moved = std::max(moved, std::fabs(double(norm_after[i]) / norm_before[i] - 1.0));
    }
    EXPECT_GT(moved, 0.05);

    const std::vector<float> before = last_logits(in_);
    const std::vector<float> after = last_logits(out);
    ASSERT_EQ(before.size(), after.size());
    EXPECT_LT(relative_l2(after, before), 1e-4);
  }
}

// (With GPTQ it combines: the Hessians are rescaled; awq_test covers that.)
TEST_F(SmoothingTest, DoesNotCombineWithAnImportanceMatrix) {
  const gguf::GgufFile file = gguf::GgufFile::open(in_);
  const SmoothingPlan plan = plan_smoothing(file, ranges_, 0.5);
  QuantizeOptions o = options_for(in_, dir_.path() / "out.gguf", QuantizeTarget::kQ8_0);
  o.rescales = &plan.rescales;
  o.imatrix = dir_.path() / "any.imatrix";
  try {
    quantize_model(o);
    ADD_FAILURE() << "quantized; expected a refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rescaling does not combine with an importance matrix"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(o.output));
}

}  // namespace
}  // namespace llms::quantize
