// Hessians gathered through the transformer's observer: each is exactly sum x x^T of the rows the
// observer was told (symmetric), q/k/v and gate/up share one matrix, and the collector's rules
// (at least 16 rows, blk.* only, one width per weight, no sharing across other names, only the
// wanted weights) hold; the memory plan counts a shared input once and groups layers under a
// budget.
#include "quantize/hessian.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <string_view>
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
  HessianCollector collector;
  std::vector<double> manual;  // blk.1.ffn_down's x x^T, from the told rows
  int64_t width = 0;
  fixtures::observe_chunks(path, 2, 48, [&](const model::MatmulInput& in) {
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
  });  // two chunks, each a fresh sequence
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
  c.add("token_embd.weight", x.data(), 32, 8);    // the embedding (or a head tied to it)
  c.add("rope_freqs.weight", x.data(), 32, 8);    // neither a layer's nor the head
  EXPECT_EQ(c.bytes(), 0u);
  c.add("blk.0.attn_q.weight", x.data(), 32, 8);
  // The same buffer told for a weight that is not q/k/v's sibling is summed on its own.
  c.add("blk.0.attn_output.weight", x.data(), 32, 8);
  EXPECT_THROW(c.add("blk.0.attn_output.weight", x.data(), 16, 16), Error);
  c.add("output.weight", x.data(), 32, 8);  // the output head
  const HessianSet set = c.take();
  ASSERT_EQ(set.n_distinct(), 3u);
  EXPECT_FLOAT_EQ(set.find("blk.0.attn_q.weight")->h[0], 32.0f);
  EXPECT_FLOAT_EQ(set.find("blk.0.attn_output.weight")->h[7], 32.0f);
  EXPECT_FLOAT_EQ(set.find("output.weight")->h[7], 32.0f);
}

TEST(HessianCollection, OnlyTheWantedWeights) {
  HessianCollector c([](std::string_view weight) { return weight.starts_with("blk.1."); });
  std::vector<float> x(32 * 8, 1.0f);
  c.add("blk.0.attn_q.weight", x.data(), 32, 8);
  EXPECT_EQ(c.bytes(), 0u);
  c.add("blk.1.attn_q.weight", x.data(), 32, 8);
  c.add("blk.1.attn_k.weight", x.data(), 32, 8);  // q's input: shared
  const HessianSet set = c.take();
  EXPECT_EQ(set.find("blk.0.attn_q.weight"), nullptr);
  EXPECT_EQ(set.find("blk.1.attn_q.weight"), set.find("blk.1.attn_k.weight"));
  EXPECT_EQ(set.n_distinct(), 1u);
}

// The next calibration chunk reuses the forward pass's buffers: a weight told the same buffer again
// is a new step and is summed again, even when it is the only weight wanted or its sibling was
// told last (a filter letting through only q and k).
TEST(HessianCollection, TheSameBufferInTheNextStepIsSummedAgain) {
  std::vector<float> x(32 * 8, 1.0f);
  HessianCollector down_only([](std::string_view w) { return w == "blk.0.ffn_down.weight"; });
  for (int step = 0; step < 3; ++step) down_only.add("blk.0.ffn_down.weight", x.data(), 32, 8);
  HessianSet set = down_only.take();
  EXPECT_EQ(set.find("blk.0.ffn_down.weight")->n_rows, 96);
  EXPECT_FLOAT_EQ(set.find("blk.0.ffn_down.weight")->h[0], 96.0f);

  HessianCollector siblings;
  for (int step = 0; step < 2; ++step) {
    siblings.add("blk.0.attn_q.weight", x.data(), 32, 8);
    siblings.add("blk.0.attn_k.weight", x.data(), 32, 8);  // shared: summed once per step
  }
  set = siblings.take();
  EXPECT_EQ(set.find("blk.0.attn_k.weight"), set.find("blk.0.attn_q.weight"));
  EXPECT_EQ(set.find("blk.0.attn_q.weight")->n_rows, 64);
  EXPECT_FLOAT_EQ(set.find("blk.0.attn_q.weight")->h[9], 64.0f);
}

// Two layers of a Qwen-like shape: q/k/v share one input, gate/up another.
std::vector<GptqTensor> two_layers() {
  std::vector<GptqTensor> tensors;
  for (int64_t layer : {0, 1}) {
    const std::string blk = "blk." + std::to_string(layer) + ".";
    for (const char* name : {"attn_q", "attn_k", "attn_v"}) {
      tensors.push_back({blk + name + ".weight", layer, 64});
    }
    tensors.push_back({blk + "attn_output.weight", layer, 64});
    tensors.push_back({blk + "ffn_gate.weight", layer, 64});
    tensors.push_back({blk + "ffn_up.weight", layer, 64});
    tensors.push_back({blk + "ffn_down.weight", layer, 128});
  }
  return tensors;
}

TEST(HessianMemory, SharedInputsCountOnce) {
  EXPECT_EQ(hessian_input_key("blk.3.attn_k.weight"), "blk.3.attn_input");
  EXPECT_EQ(hessian_input_key("blk.3.ffn_up.weight"), "blk.3.ffn_input");
  EXPECT_EQ(hessian_input_key("blk.3.ffn_down.weight"), "blk.3.ffn_down.weight");
  const std::vector<GptqTensor> tensors = two_layers();
  // Per layer: attention input, attention output, FFN input (64^2 each), FFN down (128^2).
  EXPECT_EQ(hessian_bytes(tensors), 2u * (3u * 64 * 64 + 128 * 128) * sizeof(float));
}

TEST(HessianMemory, LayersGroupedUnderTheBudget) {
  const std::vector<GptqTensor> tensors = two_layers();
  const uint64_t layer_bytes = (3u * 64 * 64 + 128 * 128) * sizeof(float);
  const std::vector<LayerGroup> one = group_layers(tensors, 2 * layer_bytes);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].first_layer, 0);
  EXPECT_EQ(one[0].last_layer, 1);
  EXPECT_EQ(one[0].hessian_bytes, 2 * layer_bytes);
  const std::vector<LayerGroup> two = group_layers(tensors, 2 * layer_bytes - 1);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].first_layer, 1);
  EXPECT_EQ(two[1].last_layer, 1);
  EXPECT_EQ(two[1].hessian_bytes, layer_bytes);
  EXPECT_TRUE(group_layers({}, 1).empty());
  try {
    group_layers(tensors, layer_bytes - 1);
    ADD_FAILURE() << "a layer over the budget was grouped";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("layer 0's Hessians take"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace llms::quantize
