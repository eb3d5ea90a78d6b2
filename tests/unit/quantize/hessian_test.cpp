// Hessians gathered through the transformer's observer: each is exactly sum x x^T of the rows the
// observer was told (symmetric), q/k/v and gate/up share one matrix, and the collector's rules
// (at least 16 rows, blk.* only, one width per weight, no sharing across other names) hold.
#include "quantize/hessian.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "gguf/gguf_file.h"
#include "kv/step_batch.h"
#include "model/cpu_runner.h"
#include "model/tiny_model.h"
#include "quantize_fixtures.h"
#include "temp_dir.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace llms::quantize {
namespace {

using fixtures::tokens;

TEST(HessianCollection, EqualsTheOuterProductsOfWhatTheObserverWasTold) {
  testing::TempDir dir;
  const auto path = dir.path() / "tiny.gguf";
  model::write_tiny_model(model::TinyModelSpec{}, path);
  const gguf::GgufFile file = gguf::GgufFile::open(path);
  model::CpuRunner runner(file, std::make_shared<ThreadPool>(2));
  runner.allocate_kv(16, 4, kv::KvCacheType::kF16, runner.config().single_kv_layout());
  HessianCollector collector;
  std::vector<double> manual;  // blk.1.ffn_down's x x^T, from the told rows
  int64_t width = 0;
  runner.transformer().set_activation_observer([&](const model::MatmulInput& in) {
    collector.add(in.weight, in.data, in.n_rows, in.n_columns);
    if (in.weight != "blk.1.ffn_down.weight") return;
    width = in.n_columns;
    manual.resize(static_cast<size_t>(width * width));
    for (int64_t r = 0; r < in.n_rows; ++r) {
      const float* x = in.data + r * width;
      for (int64_t i = 0; i < width; ++i) {
        for (int64_t j = 0; j < width; ++j) manual[i * width + j] += double{x[i]} * x[j];
      }
    }
  });
  const std::vector<kv::BlockId> table = {0, 1, 2, 3};
  for (int chunk = 0; chunk < 2; ++chunk) {
    kv::StepBatch batch;
    batch.add_sequence(chunk, tokens(48, chunk), 0, table, 0);
    runner.execute(batch);
  }
  const HessianSet set = collector.take();
  EXPECT_EQ(set.by_weight.size(), 14u);  // 2 layers x 7 matrices
  EXPECT_EQ(set.n_distinct(), 8u);       // per layer: q/k/v, o, gate/up, down
  const HessianSet::Entry* e = set.find("blk.1.ffn_down.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->n_rows, 96);
  ASSERT_EQ(e->n_columns, width);
  for (int64_t i = 0; i < width; ++i) {
    for (int64_t j = 0; j < width; ++j) {
      const double want = manual[i * width + j];
      ASSERT_NEAR(e->h[i * width + j], want, 1e-4 * (1.0 + std::fabs(want))) << i << "," << j;
      ASSERT_EQ(e->h[i * width + j], e->h[j * width + i]);
    }
  }
  EXPECT_EQ(set.find("blk.0.attn_q.weight"), set.find("blk.0.attn_v.weight"));
  EXPECT_EQ(set.find("blk.0.attn_k.weight"), set.find("blk.0.attn_q.weight"));
  EXPECT_EQ(set.find("blk.1.ffn_gate.weight"), set.find("blk.1.ffn_up.weight"));
  EXPECT_NE(set.find("blk.0.attn_q.weight"), set.find("blk.0.attn_output.weight"));
  EXPECT_NE(set.find("blk.0.attn_q.weight"), set.find("blk.1.attn_q.weight"));
  EXPECT_EQ(set.find("output.weight"), nullptr);
}

TEST(HessianCollection, Rules) {
  HessianCollector c;
  std::vector<float> x(32 * 8, 1.0f);
  c.add("blk.0.attn_q.weight", x.data(), 15, 8);  // too few rows
  c.add("output.weight", x.data(), 32, 8);        // not a repeating layer
  EXPECT_EQ(c.bytes(), 0u);
  c.add("blk.0.attn_q.weight", x.data(), 32, 8);
  // The same buffer told for a weight that is not q/k/v's sibling is summed on its own.
  c.add("blk.0.attn_output.weight", x.data(), 32, 8);
  EXPECT_THROW(c.add("blk.0.attn_output.weight", x.data(), 16, 16), Error);
  const HessianSet set = c.take();
  ASSERT_EQ(set.n_distinct(), 2u);
  EXPECT_FLOAT_EQ(set.find("blk.0.attn_q.weight")->h[0], 32.0f);
  EXPECT_FLOAT_EQ(set.find("blk.0.attn_output.weight")->h[7], 32.0f);
}

}  // namespace
}  // namespace llms::quantize
