// Saved log-probabilities round-trip (to f16 precision), and a file of another model, vocabulary,
// window or text, a truncated file and a file of another kind are refused naming the problem.
#include "eval/logits_file.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "eval/kl_divergence.h"
#include "eval/log_probs.h"
#include "temp_dir.h"
#include "util/error.h"

namespace llms::eval {
namespace {

LogitsFileHeader small_header() {
  LogitsFileHeader h;
  h.n_vocab = 5;
  h.ctx = 8;
  h.n_windows = 2;
  h.rows_per_window = 3;
  VocabularyHash v;
  for (const char* t : {"a", "b", "ab", "<s>", "c"}) v.add_token(t);
  h.vocabulary_hash = v.value();
  for (int32_t i = 0; i < 16; ++i) h.tokens.push_back(i % 5);
  return h;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LogitsFile, RowsRoundTripToHalfPrecision) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "base.logp").string();
  const LogitsFileHeader h = small_header();
  std::vector<std::vector<float>> rows;
  {
    LogitsFileWriter w(path, h);
    for (int r = 0; r < 6; ++r) {
      std::vector<float> logits = {0.1f * r, 1.0f, -2.0f, 3.5f, static_cast<float>(r)};
      std::vector<float> lp(5);
      log_softmax(logits, lp);
      rows.push_back(lp);
      w.write_row(lp);
    }
    w.finish();
  }
  LogitsFileReader reader(path);
  EXPECT_NO_THROW(reader.header().check_matches(h, path));
  std::vector<float> back(5);
  for (const auto& row : rows) {
    reader.read_row(back);
    for (size_t i = 0; i < row.size(); ++i) EXPECT_NEAR(back[i], row[i], 4e-3f * (1 + std::fabs(row[i])));
  }
  EXPECT_NE(error_of([&] { reader.read_row(back); }).find("ended early"), std::string::npos);
}

TEST(LogitsFile, WriterCountsItsRows) {
  testing::TempDir dir;
  LogitsFileWriter w((dir.path() / "short.logp").string(), small_header());
  w.write_row(std::vector<float>(5, -1.6f));
  EXPECT_THROW(w.finish(), Error);  // 1 of 6 rows
}

TEST(LogitsFile, OtherModelsTextsAndFilesAreRefused) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "base.logp").string();
  const LogitsFileHeader h = small_header();
  {
    LogitsFileWriter w(path, h);
    for (int r = 0; r < 6; ++r) w.write_row(std::vector<float>(5, -1.6f));
    w.finish();
  }
  const LogitsFileReader reader(path);
  const LogitsFileHeader& saved = reader.header();
  LogitsFileHeader other = h;
  other.n_vocab = 6;
  EXPECT_NE(error_of([&] { LogitsFileReader(path).header().check_matches(other, path); })
                .find("rows of 5 logits; this model has 6"),
            std::string::npos);
  other = h;
  VocabularyHash v;
  for (const char* t : {"a", "b", "a", "b<s>", "c"}) v.add_token(t);
  other.vocabulary_hash = v.value();
  EXPECT_NE(error_of([&] { saved.check_matches(other, path); }).find("another vocabulary"),
            std::string::npos);
  other = h;
  other.ctx = 16;
  EXPECT_NE(error_of([&] { saved.check_matches(other, path); }).find("--ctx 8, not 16"),
            std::string::npos);
  other = h;
  other.tokens[3] = 4;
  EXPECT_NE(error_of([&] { saved.check_matches(other, path); }).find("another text"),
            std::string::npos);

  // Truncated, and not a logits file at all.
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = (dir.path() / "cut.logp").string();
  std::ofstream(cut, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 3));
  EXPECT_NE(error_of([&] { LogitsFileReader r(cut); }).find("its header says"), std::string::npos);
  const std::string text = (dir.path() / "text.txt").string();
  std::ofstream(text) << "hello, this is not a logits file";
  EXPECT_NE(error_of([&] { LogitsFileReader r(text); }).find("is not a logits file"),
            std::string::npos);
  EXPECT_NE(error_of([&] { LogitsFileReader r((dir.path() / "missing").string()); })
                .find("cannot be opened"),
            std::string::npos);
}

TEST(KlDivergence, MatchesTheDefinition) {
  KlDivergence kl;
  const std::vector<float> p = {std::log(0.5f), std::log(0.5f)};
  const std::vector<float> q = {std::log(0.25f), std::log(0.75f)};
  kl.add(p, p);
  kl.add(p, q);  // 0.5 ln 2 + 0.5 ln(2/3)
  const std::vector<float> r = {std::log(0.9f), std::log(0.1f)};
  const std::vector<float> s = {std::log(0.2f), std::log(0.8f)};
  kl.add(r, s);  // top tokens differ
  const KlDivergenceSummary sum = kl.summary();
  const double expected_pq = 0.5 * std::log(2.0) + 0.5 * std::log(2.0 / 3.0);
  const double expected_rs = 0.9 * std::log(0.9 / 0.2) + 0.1 * std::log(0.1 / 0.8);
  EXPECT_EQ(sum.n_rows, 3);
  EXPECT_NEAR(sum.mean, (expected_pq + expected_rs) / 3, 1e-6);
  EXPECT_NEAR(sum.median, expected_pq, 1e-6);
  EXPECT_NEAR(sum.max, expected_rs, 1e-6);
  // Only (p, p) agrees: p's tie keeps the first index, q's top is the second; r and s differ.
  EXPECT_NEAR(sum.same_top, 1.0 / 3.0, 1e-12);
}

}  // namespace
}  // namespace llms::eval
