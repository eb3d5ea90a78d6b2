// The importance-matrix file (llama.cpp's imatrix GGUF) and its collector: a written file has
// exactly the keys and tensors the header lists, reads back equal, llama.cpp's 1-D spelling of the
// same shapes reads too, and every malformed file is refused naming the tensor or key. The
// collector keeps llama-imatrix's rules (blk.* weights, output.weight on request, >= 16 rows).
#include "quantize/importance_matrix.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "temp_dir.h"
#include "util/error.h"

namespace llms::quantize {
namespace {

namespace fs = std::filesystem;
using gguf::GgmlType;
using ::testing::HasSubstr;

ImportanceMatrix sample_matrix() {
  ImportanceMatrix m;
  m.entries["blk.0.attn_q.weight"] = {{1.0f, 2.5f, 0.0f, 4.0f}, 32};
  m.entries["blk.0.ffn_down.weight"] = {{0.25f, 8.0f, 3.0f, 1.0f, 0.5f, 6.0f, 7.0f, 2.0f}, 48};
  m.datasets = {"calibration.txt"};
  m.chunk_count = 3;
  m.chunk_size = 16;
  return m;
}

std::span<const uint8_t> bytes_of(const std::vector<float>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float)};
}

// A hand-made imatrix-like file: general.type as given (none when empty) and the tensors added
// by `add`.
template <class Add>
fs::path write_file(const testing::TempDir& dir, const std::string& type, Add add) {
  gguf::GgufWriter w;
  if (!type.empty()) w.set_string("general.type", type);
  add(w);
  const fs::path path = dir.path() / "m.imatrix";
  w.write(path);
  return path;
}

void add_f32(gguf::GgufWriter& w, const std::string& name, std::vector<uint64_t> ne,
             const std::vector<float>& values) {
  w.add_tensor(name, GgmlType::kF32, ne, bytes_of(values));
}

// One well-formed entry, llama.cpp's way (1-D tensors), plus whatever else `add` puts in.
template <class Add>
fs::path write_entry_and(const testing::TempDir& dir, Add add) {
  return write_file(dir, "imatrix", [&](gguf::GgufWriter& w) {
    add_f32(w, "blk.0.attn_k.weight.in_sum2", {4}, {1, 2, 3, 4});
    add_f32(w, "blk.0.attn_k.weight.counts", {1}, {16});
    add(w);
  });
}

void expect_refused(const fs::path& path, const std::string& what) {
  try {
    read_importance_matrix(path);
    ADD_FAILURE() << "accepted; expected a refusal naming " << what;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kInvalidFile) << e.what();
    EXPECT_THAT(e.what(), HasSubstr(what));
  }
}

TEST(ImportanceMatrix, RoundTrips) {
  testing::TempDir dir;
  const ImportanceMatrix m = sample_matrix();
  write_importance_matrix(m, dir.path() / "m.imatrix");
  const ImportanceMatrix back = read_importance_matrix(dir.path() / "m.imatrix");
  ASSERT_EQ(back.entries.size(), m.entries.size());
  for (const auto& [name, entry] : m.entries) {
    const ImportanceMatrix::Entry* read = back.find(name);
    ASSERT_NE(read, nullptr) << name;
    EXPECT_EQ(read->sum_squares, entry.sum_squares) << name;
    EXPECT_EQ(read->n_tokens, entry.n_tokens) << name;
  }
  EXPECT_EQ(back.datasets, m.datasets);
  EXPECT_EQ(back.chunk_count, 3);
  EXPECT_EQ(back.chunk_size, 16);
  EXPECT_EQ(back.find("blk.9.attn_q.weight"), nullptr);
}

TEST(ImportanceMatrix, WrittenFileHasExactlyTheHeadersTensorsAndKeys) {
  testing::TempDir dir;
  write_importance_matrix(sample_matrix(), dir.path() / "m.imatrix");
  const gguf::GgufFile file = gguf::GgufFile::open(dir.path() / "m.imatrix");
  std::set<std::string> keys;
  for (const gguf::KeyValue& kv : file.metadata()) keys.insert(kv.key);
  EXPECT_EQ(keys, (std::set<std::string>{"general.type", "imatrix.datasets", "imatrix.chunk_count",
                                         "imatrix.chunk_size"}));
  EXPECT_EQ(file.get_string("general.type"), "imatrix");
  EXPECT_EQ(file.get_strings("imatrix.datasets"), std::vector<std::string>{"calibration.txt"});
  EXPECT_EQ(file.find("imatrix.chunk_count")->type(), gguf::ValueType::kUint32);
  EXPECT_EQ(file.find("imatrix.chunk_size")->type(), gguf::ValueType::kUint32);
  EXPECT_EQ(file.get_uint("imatrix.chunk_count"), 3u);
  EXPECT_EQ(file.get_uint("imatrix.chunk_size"), 16u);

  std::set<std::string> names;
  for (const gguf::TensorInfo& t : file.tensors()) names.insert(t.name);
  EXPECT_EQ(names, (std::set<std::string>{
                       "blk.0.attn_q.weight.in_sum2", "blk.0.attn_q.weight.counts",
                       "blk.0.ffn_down.weight.in_sum2", "blk.0.ffn_down.weight.counts"}));
  for (const auto& [name, entry] : sample_matrix().entries) {
    const gguf::TensorInfo* sums = file.find_tensor(name + ".in_sum2");
    const gguf::TensorInfo* counts = file.find_tensor(name + ".counts");
    ASSERT_NE(sums, nullptr);
    ASSERT_NE(counts, nullptr);
    EXPECT_EQ(sums->type, GgmlType::kF32);
    EXPECT_EQ(counts->type, GgmlType::kF32);
    EXPECT_EQ(sums->n_dims, 2u);
    EXPECT_EQ(sums->ne, (std::array<uint64_t, 4>{entry.sum_squares.size(), 1, 1, 1}));
    EXPECT_EQ(counts->n_dims, 2u);
    EXPECT_EQ(counts->ne, (std::array<uint64_t, 4>{1, 1, 1, 1}));
    std::vector<float> values(entry.sum_squares.size());
    std::memcpy(values.data(), file.tensor_data(*sums).data(), values.size() * sizeof(float));
    EXPECT_EQ(values, entry.sum_squares);
    float count = 0;
    std::memcpy(&count, file.tensor_data(*counts).data(), sizeof(float));
    EXPECT_EQ(count, static_cast<float>(entry.n_tokens));
  }
}

TEST(ImportanceMatrix, ReadsLlamaCppsOneDimensionalTensorsAndMissingOptionalKeys) {
  testing::TempDir dir;
  const ImportanceMatrix m = read_importance_matrix(write_entry_and(dir, [](auto&) {}));
  ASSERT_EQ(m.entries.size(), 1u);
  const ImportanceMatrix::Entry* e = m.find("blk.0.attn_k.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->sum_squares, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(e->n_tokens, 16);
  EXPECT_TRUE(m.datasets.empty());
  EXPECT_EQ(m.chunk_count, 0);
}

TEST(ImportanceMatrix, RefusesAMissingFileAndOneThatIsNotGguf) {
  testing::TempDir dir;
  try {
    read_importance_matrix(dir.path() / "absent.imatrix");
    ADD_FAILURE() << "accepted a missing file";
  } catch (const Error& e) {
    EXPECT_TRUE(e.kind() == Error::Kind::kNotFound || e.kind() == Error::Kind::kIo) << e.what();
    EXPECT_THAT(e.what(), HasSubstr("absent.imatrix"));
  }
  const fs::path text = dir.write("text.imatrix", std::string_view("not a gguf file at all"));
  EXPECT_THROW(read_importance_matrix(text), Error);
}

TEST(ImportanceMatrix, RefusesAFileOfAnotherType) {
  testing::TempDir dir;
  expect_refused(write_file(dir, "model",
                            [](gguf::GgufWriter& w) {
                              add_f32(w, "blk.0.attn_k.weight.in_sum2", {4}, {1, 2, 3, 4});
                              add_f32(w, "blk.0.attn_k.weight.counts", {1}, {16});
                            }),
                 "general.type is 'model'");
  expect_refused(write_file(dir, "", [](gguf::GgufWriter& w) { add_f32(w, "x", {1}, {1}); }),
                 "no general.type");
}

TEST(ImportanceMatrix, RefusesSumsWithoutCountsAndTheReverse) {
  testing::TempDir dir;
  expect_refused(write_entry_and(dir,
                                 [](gguf::GgufWriter& w) {
                                   add_f32(w, "blk.1.attn_k.weight.in_sum2", {4}, {1, 2, 3, 4});
                                 }),
                 "'blk.1.attn_k.weight.in_sum2' has no 'blk.1.attn_k.weight.counts'");
  expect_refused(
      write_entry_and(
          dir, [](gguf::GgufWriter& w) { add_f32(w, "blk.1.attn_k.weight.counts", {1}, {4}); }),
      "'blk.1.attn_k.weight.counts' has no 'blk.1.attn_k.weight.in_sum2'");
}

TEST(ImportanceMatrix, RefusesATensorThatIsNotF32) {
  testing::TempDir dir;
  const std::vector<uint16_t> halves = {0x3c00, 0x3c00, 0x3c00, 0x3c00};
  expect_refused(write_file(dir, "imatrix",
                            [&](gguf::GgufWriter& w) {
                              const uint64_t ne[] = {4};
                              w.add_tensor("blk.0.attn_k.weight.in_sum2", GgmlType::kF16, ne,
                                           std::span<const uint8_t>(
                                               reinterpret_cast<const uint8_t*>(halves.data()), 8));
                              add_f32(w, "blk.0.attn_k.weight.counts", {1}, {16});
                            }),
                 "'blk.0.attn_k.weight.in_sum2' is F16, not F32");
}

TEST(ImportanceMatrix, RefusesOtherShapes) {
  testing::TempDir dir;
  // Two matrices per tensor: a mixture-of-experts model's layout.
  expect_refused(write_entry_and(dir,
                                 [](gguf::GgufWriter& w) {
                                   add_f32(w, "blk.1.ffn_up.weight.in_sum2", {2, 2}, {1, 2, 3, 4});
                                   add_f32(w, "blk.1.ffn_up.weight.counts", {1, 2}, {4, 4});
                                 }),
                 "'blk.1.ffn_up.weight.counts' holds 2 matrices");
  expect_refused(write_entry_and(dir,
                                 [](gguf::GgufWriter& w) {
                                   add_f32(w, "blk.1.ffn_up.weight.in_sum2", {2}, {1, 2});
                                   add_f32(w, "blk.1.ffn_up.weight.counts", {2}, {4, 4});
                                 }),
                 "'blk.1.ffn_up.weight.counts' has 2 values, not 1");
  expect_refused(
      write_entry_and(dir,
                      [](gguf::GgufWriter& w) {
                        add_f32(w, "blk.1.ffn_up.weight.in_sum2", {2, 1, 2}, {1, 2, 3, 4});
                        add_f32(w, "blk.1.ffn_up.weight.counts", {1}, {4});
                      }),
      "'blk.1.ffn_up.weight.in_sum2' has more than 2 dimensions");
}

TEST(ImportanceMatrix, RefusesNegativeOrNonFiniteValues) {
  testing::TempDir dir;
  expect_refused(write_entry_and(dir,
                                 [](gguf::GgufWriter& w) {
                                   add_f32(w, "blk.1.attn_q.weight.in_sum2", {2}, {1, -2});
                                   add_f32(w, "blk.1.attn_q.weight.counts", {1}, {4});
                                 }),
                 "'blk.1.attn_q.weight.in_sum2' value 1 is -2");
  expect_refused(write_entry_and(dir,
                                 [](gguf::GgufWriter& w) {
                                   add_f32(w, "blk.1.attn_q.weight.in_sum2", {2},
                                           {std::numeric_limits<float>::quiet_NaN(), 1});
                                   add_f32(w, "blk.1.attn_q.weight.counts", {1}, {4});
                                 }),
                 "'blk.1.attn_q.weight.in_sum2' value 0 is");
  expect_refused(write_entry_and(dir,
                                 [](gguf::GgufWriter& w) {
                                   add_f32(w, "blk.1.attn_q.weight.in_sum2", {2}, {1, 2});
                                   add_f32(w, "blk.1.attn_q.weight.counts", {1},
                                           {std::numeric_limits<float>::infinity()});
                                 }),
                 "'blk.1.attn_q.weight.counts' value 0 is inf");
  for (float count : {0.0f, 2.5f}) {
    expect_refused(write_entry_and(dir,
                                   [&](gguf::GgufWriter& w) {
                                     add_f32(w, "blk.1.attn_q.weight.in_sum2", {2}, {1, 2});
                                     add_f32(w, "blk.1.attn_q.weight.counts", {1}, {count});
                                   }),
                   "'blk.1.attn_q.weight.counts' counts");
  }
}

TEST(ImportanceMatrix, RefusesForeignTensorsAndAFileWithoutEntries) {
  testing::TempDir dir;
  expect_refused(write_entry_and(dir,
                                 [](gguf::GgufWriter& w) {
                                   add_f32(w, "blk.0.attn_k.weight", {4}, {1, 2, 3, 4});
                                 }),
                 "tensor 'blk.0.attn_k.weight' is neither NAME.in_sum2 nor NAME.counts");
  expect_refused(write_file(dir, "imatrix", [](gguf::GgufWriter&) {}), "no importance entry");
}

TEST(ImportanceMatrix, WriteRefusesWhatTheFormatCannotHold) {
  testing::TempDir dir;
  const fs::path path = dir.path() / "m.imatrix";
  auto expect_write_refused = [&](const ImportanceMatrix& m, const std::string& what) {
    try {
      write_importance_matrix(m, path);
      ADD_FAILURE() << "written; expected a refusal naming " << what;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument) << e.what();
      EXPECT_THAT(e.what(), HasSubstr(what));
    }
    EXPECT_FALSE(fs::exists(path));
  };
  expect_write_refused(ImportanceMatrix{}, "no entry");
  ImportanceMatrix m = sample_matrix();
  m.entries["blk.1.attn_q.weight"] = {{}, 4};
  expect_write_refused(m, "'blk.1.attn_q.weight' has no columns");
  m = sample_matrix();
  m.entries["blk.1.attn_q.weight"] = {{1.0f}, 0};
  expect_write_refused(m, "'blk.1.attn_q.weight' counts 0 tokens");
  m = sample_matrix();
  m.chunk_count = -1;
  expect_write_refused(m, "chunk_count -1");
}

TEST(ImportanceMatrixCollector, KeepsLlamaImatrixsWeightsAndRowCounts) {
  ImportanceMatrixCollector plain;
  EXPECT_TRUE(plain.accepts("blk.0.attn_q.weight", 16));
  EXPECT_FALSE(plain.accepts("blk.0.attn_q.weight", 15));
  EXPECT_FALSE(plain.accepts("output.weight", 512));
  EXPECT_FALSE(plain.accepts("token_embd.weight", 512));
  ImportanceMatrixCollector with_output(true);
  EXPECT_TRUE(with_output.accepts("output.weight", 16));
  EXPECT_FALSE(with_output.accepts("output.weight", 1));
  EXPECT_FALSE(with_output.accepts("token_embd.weight", 512));
}

TEST(ImportanceMatrixCollector, SumsSquaresPerColumnAndCountsRows) {
  ImportanceMatrixCollector c;
  std::vector<float> rows(16 * 3);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(i % 3) - 0.5f * (i % 5);
  c.add("blk.2.ffn_down.weight", rows.data(), 16, 3);
  c.add("blk.2.ffn_down.weight", rows.data(), 16, 3);
  c.add("blk.2.ffn_down.weight", rows.data(), 4, 3);  // too few rows: not counted
  c.add("output.weight", rows.data(), 16, 3);         // not asked for
  EXPECT_EQ(c.n_entries(), 1u);
  const ImportanceMatrix m = c.take();
  const ImportanceMatrix::Entry* e = m.find("blk.2.ffn_down.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->n_tokens, 32);
  for (size_t j = 0; j < 3; ++j) {
    double expected = 0;
    for (size_t r = 0; r < 16; ++r) expected += 2.0 * rows[r * 3 + j] * rows[r * 3 + j];
    EXPECT_FLOAT_EQ(e->sum_squares[j], static_cast<float>(expected)) << j;
  }
  try {
    c.add("blk.2.ffn_down.weight", rows.data(), 16, 2);
    ADD_FAILURE() << "accepted another column count";
  } catch (const Error& err) {
    EXPECT_THAT(err.what(), HasSubstr("told with 2 columns after 3"));
  }
}

}  // namespace
}  // namespace llms::quantize
