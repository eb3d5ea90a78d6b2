// quantize_model with Hessians (GPTQ), on a tiny model: Hessians gathered from a calibration run
// make every blk.* matrix GPTQ-quantized, with a lower output error trace((W - Q) H (W - Q)^T)
// than round-to-nearest's, the file runs; a Hessian of the wrong width, one no converted tensor
// can use, and GPTQ together with an imatrix are refused before any file exists.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "kv/step_batch.h"
#include "model/cpu_runner.h"
#include "model/tiny_model.h"
#include "quant/quant.h"
#include "quantize/hessian.h"
#include "quantize/model_quantizer.h"
#include "quantize_fixtures.h"
#include "temp_dir.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace llms::quantize {
namespace {

using fixtures::k_friendly_spec;
using fixtures::options_for;
using fixtures::tokens;
using fixtures::values_of;

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// n_logits > 0: the output head runs on that many rows of each chunk, so it gets a Hessian too.
HessianSet calibrate(const fs::path& model_path, int32_t n_logits = 0) {
  HessianCollector collector;
  fixtures::observe_chunks(
      model_path, 6, 64,
      [&](const model::MatmulInput& in) {
        collector.add(in.weight, in.data, in.n_rows, in.n_columns);
      },
      n_logits);
  return collector.take();
}

double output_error(const std::vector<float>& w, const std::vector<float>& q,
                    const HessianSet::Entry& e) {
  const auto n = static_cast<size_t>(e.n_columns);
  double total = 0.0;
  std::vector<double> d(n);
  for (size_t r = 0; r < w.size() / n; ++r) {
    for (size_t j = 0; j < n; ++j) d[j] = static_cast<double>(w[r * n + j]) - q[r * n + j];
    for (size_t i = 0; i < n; ++i) {
      double s = 0.0;
      for (size_t j = 0; j < n; ++j) s += e.h[i * n + j] * d[j];
      total += d[i] * s;
    }
  }
  return total;
}

class GptqQuantizeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    in_ = dir_.path() / "f32.gguf";
    model::write_tiny_model(k_friendly_spec(2), in_);
    hessians_ = calibrate(in_);
  }

  void expect_refused(QuantizeOptions o, const std::string& what) {
    try {
      quantize_model(o);
      ADD_FAILURE() << "quantized; expected a refusal naming " << what;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(what));
    }
    EXPECT_FALSE(fs::exists(o.output));
  }

  testing::TempDir dir_;
  fs::path in_;
  HessianSet hessians_;
};

TEST_F(GptqQuantizeTest, EveryLayerMatrixByGptqWithLessOutputErrorAndTheFileRuns) {
  const fs::path rtn_path = dir_.path() / "rtn.gguf";
  const fs::path gptq_path = dir_.path() / "gptq.gguf";
  quantize_model(options_for(in_, rtn_path, QuantizeTarget::kQ4_K_M));
  QuantizeOptions o = options_for(in_, gptq_path, QuantizeTarget::kQ4_K_M);
  o.hessians = lookup_in(hessians_);
  std::set<std::string> told;
  o.on_tensor = [&](const TensorProgress& p) {
    if (p.uses_gptq) told.insert(std::string(p.name));
  };
  const QuantizeReport report = quantize_model(o);
  EXPECT_EQ(report.n_gptq, hessians_.by_weight.size());
  EXPECT_EQ(told.size(), hessians_.by_weight.size());

  const gguf::GgufFile input = gguf::GgufFile::open(in_);
  const gguf::GgufFile rtn = gguf::GgufFile::open(rtn_path);
  const gguf::GgufFile gptq = gguf::GgufFile::open(gptq_path);
  double error_rtn = 0.0;
  double error_gptq = 0.0;
  for (const auto& [name, entry] : hessians_.by_weight) {
    SCOPED_TRACE(name);
    const std::vector<float> w = values_of(input, *input.find_tensor(name));
    const gguf::TensorInfo& g = *gptq.find_tensor(name);
    EXPECT_EQ(g.type, rtn.find_tensor(name)->type);
    error_rtn += output_error(w, values_of(rtn, *rtn.find_tensor(name)), *entry);
    error_gptq += output_error(w, values_of(gptq, g), *entry);
  }
  EXPECT_LT(error_gptq, 0.9 * error_rtn) << "rtn " << error_rtn << " gptq " << error_gptq;

  model::CpuRunner runner(gptq, std::make_shared<ThreadPool>(2));
  runner.allocate_kv(16, 4, kv::KvCacheType::kF16, runner.config().single_kv_layout());
  const std::vector<kv::BlockId> table = {0, 1, 2, 3};
  kv::StepBatch batch;
  batch.add_sequence(0, tokens(16, 9), 0, table, 1);
  try {
    runner.execute(batch);
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
}

// With logits on every calibration row the output head has a Hessian: GPTQ quantizes it too (it
// comes last, after the layers) with less output error than round-to-nearest. A head tied to the
// embedding has no output.weight and stays round-to-nearest.
TEST_F(GptqQuantizeTest, TheOutputHeadToo) {
  const HessianSet hessians = calibrate(in_, 64);
  const HessianSet::Entry* head = hessians.find(kOutputHead);
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->n_rows, 6 * 64);
  const fs::path rtn_path = dir_.path() / "rtn.gguf";
  const fs::path gptq_path = dir_.path() / "gptq.gguf";
  quantize_model(options_for(in_, rtn_path, QuantizeTarget::kQ4_K));
  QuantizeOptions o = options_for(in_, gptq_path, QuantizeTarget::kQ4_K);
  std::vector<GptqTensor> asked;
  o.hessians = [&](const GptqTensor& t) {
    asked.push_back(t);
    return hessians.find(t.name);
  };
  std::string last_by_gptq;
  o.on_tensor = [&](const TensorProgress& p) {
    if (p.uses_gptq) last_by_gptq = std::string(p.name);
  };
  const std::vector<GptqTensor> listed = gptq_tensors(o);
  ASSERT_FALSE(listed.empty());
  EXPECT_EQ(listed.back().name, kOutputHead);
  EXPECT_EQ(listed.back().layer, 2);  // the tiny model's layers are 0 and 1
  quantize_model(o);
  ASSERT_FALSE(asked.empty());
  EXPECT_EQ(asked.back().name, kOutputHead);
  EXPECT_EQ(last_by_gptq, kOutputHead);
  const gguf::GgufFile input = gguf::GgufFile::open(in_);
  const gguf::GgufFile rtn = gguf::GgufFile::open(rtn_path);
  const gguf::GgufFile gptq = gguf::GgufFile::open(gptq_path);
  const std::string name(kOutputHead);
  const std::vector<float> w = values_of(input, *input.find_tensor(name));
  const double error_rtn = output_error(w, values_of(rtn, *rtn.find_tensor(name)), *head);
  const double error_gptq = output_error(w, values_of(gptq, *gptq.find_tensor(name)), *head);
  EXPECT_LT(error_gptq, 0.9 * error_rtn) << "rtn " << error_rtn << " gptq " << error_gptq;

  model::TinyModelSpec tied = k_friendly_spec(2);
  tied.tie_embeddings = true;
  const fs::path tied_path = dir_.path() / "tied.gguf";
  model::write_tiny_model(tied, tied_path);
  const HessianSet tied_hessians = calibrate(tied_path, 64);
  EXPECT_EQ(tied_hessians.find(kOutputHead), nullptr);
  EXPECT_EQ(tied_hessians.find("token_embd.weight"), nullptr);
  for (const GptqTensor& t :
       gptq_tensors(options_for(tied_path, dir_.path() / "x.gguf", QuantizeTarget::kQ4_K))) {
    EXPECT_TRUE(t.name.starts_with("blk.")) << t.name;
  }
}

TEST_F(GptqQuantizeTest, Refusals) {
  // A Hessian of another width (another model's).
  HessianSet wrong = hessians_;
  auto bad = std::make_shared<HessianSet::Entry>();
  bad->n_columns = 64;
  bad->h.assign(64 * 64, 1.0f);
  wrong.by_weight["blk.0.ffn_down.weight"] = bad;
  QuantizeOptions o = options_for(in_, dir_.path() / "out.gguf", QuantizeTarget::kQ4_K_M);
  o.hessians = lookup_in(wrong);
  expect_refused(o, "the Hessian of 'blk.0.ffn_down.weight' has 64 columns");
  // No converted tensor has a GPTQ quantizer (F16 has none).
  o = options_for(in_, dir_.path() / "out.gguf", QuantizeTarget::kF16);
  o.hessians = lookup_in(hessians_);
  expect_refused(
      o, "no tensor of the repeating layers or the output head is converted to a type with a GPTQ");
  // A lookup that gives no tensor a Hessian.
  o = options_for(in_, dir_.path() / "out.gguf", QuantizeTarget::kQ4_K_M);
  o.hessians = [](const GptqTensor&) -> const HessianSet::Entry* { return nullptr; };
  expect_refused(o, "tensors it may quantize has a Hessian");
  // Not together with an importance matrix.
  o = options_for(in_, dir_.path() / "out.gguf", QuantizeTarget::kQ4_K_M);
  o.hessians = lookup_in(hessians_);
  o.imatrix = dir_.path() / "any.imatrix";
  expect_refused(o, "do not combine");
}

}  // namespace
}  // namespace llms::quantize
