// quantize_model with an importance matrix, on tiny models: an imatrix gathered through the
// transformer's observer sums exactly what the observer was told; tensors with an entry are
// quantized by the weighted quantizers (different bytes from round-to-nearest, valid blocks, lower
// weighted error), the others keep RTN's bytes; the output records the imatrix as llama-quantize
// does; and a mismatched, foreign, useless or unreadable imatrix is refused before any file exists.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "kv/step_batch.h"
#include "model/cpu_runner.h"
#include "model/tiny_model.h"
#include "quant/quant.h"
#include "quantize/importance_matrix.h"
#include "quantize/model_quantizer.h"
#include "quantize/weighted_quantizers.h"
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
using gguf::GgmlType;
using ::testing::HasSubstr;

// An imatrix of every blk.* matrix of the file with skewed random sums (a few loud columns, as
// real activations have).
ImportanceMatrix synthetic_imatrix(const gguf::GgufFile& file) {
  ImportanceMatrix m;
  std::mt19937 rng(17);
  std::lognormal_distribution<float> skew(0.0f, 1.5f);
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (t.n_dims != 2 || t.name.rfind("blk.", 0) != 0) continue;
    ImportanceMatrix::Entry e;
    e.n_tokens = 64;
    for (uint64_t j = 0; j < t.ne[0]; ++j) e.sum_squares.push_back(64.0f * skew(rng));
    m.entries[t.name] = std::move(e);
  }
  m.datasets = {"synthetic.txt"};
  m.chunk_count = 4;
  m.chunk_size = 16;
  return m;
}

// sum over rows and columns of importance_j * (x - y)^2: the error the imatrix asks to lower.
double importance_error(const std::vector<float>& x, const std::vector<float>& y,
                        const ImportanceMatrix::Entry& e) {
  const size_t n = e.sum_squares.size();
  double error = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = static_cast<double>(x[i]) - y[i];
    error += e.sum_squares[i % n] * d * d;
  }
  return error;
}

class ImatrixQuantizeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    in_ = dir_.path() / "f32.gguf";
    model::write_tiny_model(k_friendly_spec(), in_);
  }

  fs::path write_imatrix(const ImportanceMatrix& m, const std::string& name = "m.imatrix") {
    const fs::path path = dir_.path() / name;
    write_importance_matrix(m, path);
    return path;
  }

  // Quantizes with `imatrix` expecting a refusal that says `what`; no output may appear.
  void expect_refused(const fs::path& imatrix, QuantizeTarget target, const std::string& what) {
    const fs::path out = dir_.path() / "refused.gguf";
    QuantizeOptions o = options_for(in_, out, target);
    o.imatrix = imatrix;
    try {
      quantize_model(o);
      ADD_FAILURE() << "quantized; expected a refusal naming " << what;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(what));
    }
    EXPECT_FALSE(fs::exists(out));
  }

  testing::TempDir dir_;
  fs::path in_;
};

TEST(ImatrixCollection, SumsEqualTheSquaresOfWhatTheObserverWasTold) {
  testing::TempDir dir;
  const fs::path path = dir.path() / "tiny.gguf";
  model::write_tiny_model(model::TinyModelSpec{}, path);
  ImportanceMatrixCollector collector;
  std::vector<double> manual;  // blk.1.ffn_down's column sums, from the told rows
  int64_t manual_rows = 0;
  fixtures::observe_chunks(path, 2, 48, [&](const model::MatmulInput& in) {
    collector.add(in.weight, in.data, in.n_rows, in.n_columns);
    if (in.weight != "blk.1.ffn_down.weight") return;
    manual.resize(static_cast<size_t>(in.n_columns));
    for (int64_t r = 0; r < in.n_rows; ++r) {
      for (int64_t j = 0; j < in.n_columns; ++j) {
        const double x = in.data[r * in.n_columns + j];
        manual[static_cast<size_t>(j)] += x * x;
      }
    }
    manual_rows += in.n_rows;
  });  // two chunks, each a fresh sequence
  const ImportanceMatrix m = collector.take();
  // 2 layers x 7 matrices; no output (not asked for, and no logits rows anyway).
  EXPECT_EQ(m.entries.size(), 14u);
  const ImportanceMatrix::Entry* e = m.find("blk.1.ffn_down.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->n_tokens, 96);
  EXPECT_EQ(manual_rows, 96);
  ASSERT_EQ(e->sum_squares.size(), manual.size());
  for (size_t j = 0; j < manual.size(); ++j) {
    EXPECT_FLOAT_EQ(e->sum_squares[j], static_cast<float>(manual[j])) << j;
  }
  // q, k and v saw one input: their sums are the same.
  EXPECT_EQ(m.find("blk.0.attn_q.weight")->sum_squares, m.find("blk.0.attn_v.weight")->sum_squares);
}

TEST_F(ImatrixQuantizeTest, EntriesChangeTheirTensorsOnlyAndLowerTheirWeightedError) {
  const gguf::GgufFile input = gguf::GgufFile::open(in_);
  ImportanceMatrix m = synthetic_imatrix(input);
  m.entries.erase("blk.0.attn_q.weight");  // a tensor left without an entry stays RTN
  const fs::path imatrix = write_imatrix(m);
  const fs::path rtn_path = dir_.path() / "rtn.gguf";
  const fs::path imat_path = dir_.path() / "imat.gguf";
  quantize_model(options_for(in_, rtn_path, QuantizeTarget::kQ4_K_M));
  QuantizeOptions o = options_for(in_, imat_path, QuantizeTarget::kQ4_K_M);
  o.imatrix = imatrix;
  std::set<std::string> told_imatrix;
  o.on_tensor = [&](const TensorProgress& p) {
    if (p.uses_imatrix) told_imatrix.insert(std::string(p.name));
  };
  const QuantizeReport report = quantize_model(o);
  EXPECT_EQ(report.n_imatrix, m.entries.size());
  EXPECT_EQ(report.n_imatrix_entries, m.entries.size());
  EXPECT_EQ(told_imatrix.size(), m.entries.size());

  const gguf::GgufFile rtn = gguf::GgufFile::open(rtn_path);
  const gguf::GgufFile imat = gguf::GgufFile::open(imat_path);
  ASSERT_EQ(imat.tensors().size(), rtn.tensors().size());
  double error_rtn = 0;
  double error_imat = 0;
  for (const gguf::TensorInfo& t : imat.tensors()) {
    SCOPED_TRACE(t.name);
    const gguf::TensorInfo& r = *rtn.find_tensor(t.name);
    EXPECT_EQ(t.type, r.type);
    EXPECT_EQ(t.ne, r.ne);
    const auto a = imat.tensor_data(t);
    const auto b = rtn.tensor_data(r);
    const bool same = std::equal(a.begin(), a.end(), b.begin(), b.end());
    const ImportanceMatrix::Entry* e = m.find(t.name);
    EXPECT_EQ(told_imatrix.count(t.name) == 1, e != nullptr);
    if (!e) {
      EXPECT_TRUE(same) << "a tensor without an entry must keep round-to-nearest's bytes";
      continue;
    }
    EXPECT_FALSE(same);
    const std::vector<float> original = values_of(input, *input.find_tensor(t.name));
    const std::vector<float> weighted = values_of(imat, t);  // valid blocks: they decode
    for (size_t i = 0; i < original.size(); ++i) {
      ASSERT_NEAR(weighted[i], original[i], 0.05) << i;  // the tiny model's weights are ~0.05
    }
    const double tensor_imat = importance_error(original, weighted, *e);
    const double tensor_rtn = importance_error(original, values_of(rtn, r), *e);
    EXPECT_LT(tensor_imat, tensor_rtn);
    error_imat += tensor_imat;
    error_rtn += tensor_rtn;
  }
  EXPECT_LT(error_imat, 0.9 * error_rtn);

  EXPECT_EQ(imat.get_string("quantize.imatrix.file"), imatrix.string());
  EXPECT_EQ(imat.get_string("quantize.imatrix.dataset"), "synthetic.txt");
  EXPECT_EQ(imat.get_int("quantize.imatrix.entries_count"), static_cast<int64_t>(m.entries.size()));
  EXPECT_EQ(imat.get_int("quantize.imatrix.chunks_count"), 4);
  EXPECT_EQ(rtn.find("quantize.imatrix.file"), nullptr);

  // Requantizing the imatrix file without one drops its record: it would describe another file.
  const fs::path again = dir_.path() / "again.gguf";
  quantize_model(options_for(imat_path, again, QuantizeTarget::kQ8_0));
  EXPECT_EQ(gguf::GgufFile::open(again).find("quantize.imatrix.file"), nullptr);
}

TEST_F(ImatrixQuantizeTest, RefusesAnEntryOfAnotherWidthNamingBoth) {
  ImportanceMatrix m = synthetic_imatrix(gguf::GgufFile::open(in_));
  m.entries["blk.2.ffn_down.weight"].sum_squares.resize(256);  // ffn_down's ne[0] is 512
  expect_refused(write_imatrix(m), QuantizeTarget::kQ4_K_M,
                 "entry 'blk.2.ffn_down.weight' has 256 columns, but the model's tensor "
                 "'blk.2.ffn_down.weight' has 512 (ne[0])");
}

TEST_F(ImatrixQuantizeTest, RefusesAnotherModelsImatrix) {
  ImportanceMatrix m;
  m.entries["blk.40.attn_q.weight"] = {std::vector<float>(256, 1.0f), 16};
  m.entries["blk.41.attn_q.weight"] = {std::vector<float>(256, 1.0f), 16};
  expect_refused(write_imatrix(m), QuantizeTarget::kQ4_K_M,
                 "has no entry for any tensor of '" + in_.string() +
                     "' (its 2 entries name e.g. 'blk.40.attn_q.weight'): it was made for "
                     "another model");
}

TEST_F(ImatrixQuantizeTest, RefusesAnImatrixNoConvertedTensorCanUse) {
  const fs::path imatrix = write_imatrix(synthetic_imatrix(gguf::GgufFile::open(in_)));
  expect_refused(imatrix, QuantizeTarget::kF16, "is converted to a type with a weighted quantizer");
}

TEST_F(ImatrixQuantizeTest, RefusesAnUnreadableImatrix) {
  expect_refused(dir_.path() / "absent.imatrix", QuantizeTarget::kQ4_K_M, "absent.imatrix");
  const fs::path text = dir_.write("text.imatrix", std::string_view("plain text, not GGUF"));
  expect_refused(text, QuantizeTarget::kQ4_K_M, "text.imatrix");
  // A model file is a GGUF, but not an imatrix.
  expect_refused(in_, QuantizeTarget::kQ4_K_M, "imatrix '" + in_.string() + "': ");
}

}  // namespace
}  // namespace llms::quantize
