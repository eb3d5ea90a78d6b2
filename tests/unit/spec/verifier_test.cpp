// spec::Verifier on hand-built logits rows. Greedy: drafts equal to each row's argmax are all
// kept plus the bonus token; the first mismatch is replaced by its row's argmax; the sampler's
// penalty state sees the emitted tokens only (a rejected draft never penalises a later row, an
// accepted one does); no drafts is exactly one sample(); rows that are missing are refused.
// Sampling: rejection sampling must be lossless, so chi-square tests (fixed seeds, >= 20,000
// verifications each) check that the first emitted token follows the target's processed
// distribution p for a draft drawn from a different q, for point-mass drafts, with temperature 1
// and with top_p; and, with two drafts, that the joint law of the first two tokens on the event
// "the first token is draft 0" is P(event) * p1(.).
#include "spec/verifier.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "chi_square.h"
#include "util/error.h"

namespace llms::spec {
namespace {

using llms::testing::chi_square;
using llms::testing::chi_square_critical_p001;
using sampling::Distribution;
using sampling::Sampler;
using sampling::SamplingParams;

struct Rows {
  std::vector<float> data;
  int32_t n_rows = 0;
  int32_t n_vocab = 0;
  explicit Rows(const std::vector<std::vector<float>>& rows)
      : n_rows(static_cast<int32_t>(rows.size())), n_vocab(static_cast<int32_t>(rows[0].size())) {
    for (const auto& r : rows) data.insert(data.end(), r.begin(), r.end());
  }
  model::LogitsView view() const { return {data.data(), n_rows, n_vocab}; }
};

// A row of n logits, all low, with `hot` set to the given values.
std::vector<float> row_with(int n, std::vector<std::pair<int32_t, float>> hot) {
  std::vector<float> r(static_cast<size_t>(n), -2.0f);
  for (auto [id, v] : hot) r[static_cast<size_t>(id)] = v;
  return r;
}

SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

TEST(Verifier, GreedyKeepsDraftsEqualToTheArgmaxAndAddsTheBonus) {
  const Rows rows({row_with(8, {{3, 1.0f}}), row_with(8, {{5, 1.0f}}), row_with(8, {{0, 1.0f}}),
                   row_with(8, {{7, 1.0f}})});
  Verifier v;
  Sampler s(greedy(), 8);
  const std::vector<int32_t> drafts = {3, 5, 0};
  const Verification all = v.verify(s, rows.view(), 0, drafts);
  EXPECT_EQ(all.n_accepted, 3);
  EXPECT_EQ(all.tokens, (std::vector<int32_t>{3, 5, 0, 7}));

  for (int32_t j = 0; j < 3; ++j) {  // first mismatch at j
    std::vector<int32_t> d = drafts;
    d[static_cast<size_t>(j)] = 6;
    Sampler fresh(greedy(), 8);
    const Verification r = v.verify(fresh, rows.view(), 0, d);
    EXPECT_EQ(r.n_accepted, j);
    std::vector<int32_t> want(drafts.begin(), drafts.begin() + j);
    want.push_back(drafts[static_cast<size_t>(j)]);  // the row's argmax replaces the draft
    EXPECT_EQ(r.tokens, want) << "mismatch at " << j;
  }
}

TEST(Verifier, RowsStartAtFirstRow) {
  const Rows rows({row_with(6, {{0, 1.0f}}), row_with(6, {{1, 1.0f}}), row_with(6, {{2, 1.0f}}),
                   row_with(6, {{3, 1.0f}})});
  Verifier v;
  Sampler s(greedy(), 6);
  const Verification r = v.verify(s, rows.view(), 2, std::vector<int32_t>{2});
  EXPECT_EQ(r.n_accepted, 1);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{2, 3}));
  Sampler t(greedy(), 6);
  EXPECT_EQ(v.verify(t, rows.view(), 3, {}).tokens, std::vector<int32_t>{3});
}

// The penalty state, checked with a strong repetition penalty (4: a positive logit is divided by
// 4) for greedy and for top_k = 1 sampling (a point-mass p through the non-greedy path).
TEST(Verifier, PenaltiesSeeEmittedTokensOnly) {
  for (const bool is_greedy : {true, false}) {
    SCOPED_TRACE(is_greedy ? "greedy" : "top_k 1");
    SamplingParams p;
    p.repetition_penalty = 4.0f;
    p.seed = 3;
    if (is_greedy) {
      p.temperature = 0.0f;
    } else {
      p.top_k = 1;
    }
    Verifier v;
    // An accepted draft is penalised in the next row: 2 (3.0 -> 0.75) loses row 1 to 4 (2.0).
    {
      Sampler s(p, 8);
      const Rows rows({row_with(8, {{2, 3.0f}}), row_with(8, {{2, 3.0f}, {4, 2.0f}}),
                       row_with(8, {{0, 1.0f}})});
      const Verification r = v.verify(s, rows.view(), 0, std::vector<int32_t>{2, 2});
      EXPECT_EQ(r.n_accepted, 1);
      EXPECT_EQ(r.tokens, (std::vector<int32_t>{2, 4}));
    }
    // A rejected draft (5 at row 1, whose argmax is 3) is never recorded: in the next step's row
    // 5 (3.0) stays ahead of 6 (2.0); had it been recorded, 6 would win.
    const Rows step1(
        {row_with(8, {{1, 3.0f}}), row_with(8, {{3, 3.0f}}), row_with(8, {{0, 1.0f}})});
    const Rows step2({row_with(8, {{5, 3.0f}, {6, 2.0f}, {1, 2.9f}, {3, 2.9f}})});
    Sampler s(p, 8);
    const Verification r = v.verify(s, step1.view(), 0, std::vector<int32_t>{1, 5});
    EXPECT_EQ(r.n_accepted, 1);
    EXPECT_EQ(r.tokens, (std::vector<int32_t>{1, 3}));
    EXPECT_EQ(v.verify(s, step2.view(), 0, {}).tokens, std::vector<int32_t>{5});
    // Control: had 5 been emitted too, the same row would give 6, so the check above can fail.
    Sampler control(p, 8);
    for (int32_t t : {1, 3, 5}) control.accept(t);
    EXPECT_EQ(v.verify(control, step2.view(), 0, {}).tokens, std::vector<int32_t>{6});
  }
}

TEST(Verifier, NoDraftsIsOneSampleWithTheSameSeed) {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_p = 0.95f;
  p.repetition_penalty = 1.3f;
  p.seed = 42;
  Sampler via_verifier(p, 10), direct(p, 10);
  Verifier v;
  std::mt19937 rng(11);
  std::normal_distribution<float> logit(0.0f, 1.5f);
  std::vector<int32_t> got, want;
  for (int i = 0; i < 300; ++i) {
    std::vector<float> row(10);
    for (float& x : row) x = logit(rng);
    const Rows rows({row});
    const Verification r = v.verify(via_verifier, rows.view(), 0, {});
    ASSERT_EQ(r.n_accepted, 0);
    ASSERT_EQ(r.tokens.size(), 1u);
    got.push_back(r.tokens[0]);
    const int32_t t = direct.sample(row).token;
    direct.accept(t);  // the verifier accept()s what it emits
    want.push_back(t);
  }
  EXPECT_EQ(got, want);
}

TEST(Verifier, MissingRowsAreRefused) {
  const Rows rows({row_with(4, {{0, 1.0f}}), row_with(4, {{1, 1.0f}})});
  Verifier v;
  Sampler s(greedy(), 4);
  const std::vector<int32_t> d1 = {0}, d2 = {0, 1};
  EXPECT_THROW(v.verify(s, rows.view(), 0, d2), Error);  // needs 3 rows
  EXPECT_THROW(v.verify(s, rows.view(), 1, d1), Error);  // needs rows 1 and 2
  EXPECT_THROW(v.verify(s, rows.view(), 2, {}), Error);
  EXPECT_THROW(v.verify(s, rows.view(), -1, {}), Error);
  Distribution q;
  q.ids = {0};
  q.probs = {1.0f};
  const std::vector<Distribution> one_q = {q};
  EXPECT_THROW(v.verify(s, rows.view(), 0, std::vector<int32_t>{}, one_q), Error);  // 1 q, 0 drafts
  EXPECT_EQ(v.verify(s, rows.view(), 0, d1).tokens,
            (std::vector<int32_t>{0, 1}));  // exactly enough
}

// ---- statistical tests ----

constexpr int kVocab = 10;
const std::vector<float> kTarget = {0.5f, 1.2f, -0.3f, 2.0f, 0.0f, 1.5f, -1.0f, 0.8f, -0.6f, 1.0f};
const std::vector<float> kSecond = {-0.2f, 0.4f, 1.8f, -1.1f, 0.9f, 0.1f, 1.3f, -0.5f, 0.6f, 0.0f};
// A draft distribution unlike the target: much mass where p is small, little where it is large.
const std::vector<float> kDraftProbs = {0.02f, 0.05f, 0.2f,  0.03f, 0.25f,
                                        0.05f, 0.15f, 0.05f, 0.15f, 0.05f};

Distribution full_q(const std::vector<float>& probs) {
  Distribution q;
  for (int32_t i = 0; i < static_cast<int32_t>(probs.size()); ++i) {
    q.ids.push_back(i);
    q.probs.push_back(probs[static_cast<size_t>(i)]);
  }
  return q;
}

// The target's processed distribution of `row`, from a separate sampler, dense over the vocab.
std::vector<double> processed(const SamplingParams& params, std::vector<float> row) {
  Sampler ref(params, kVocab);
  Distribution d;
  ref.distribution(row, d);
  std::vector<double> p(kVocab, 0.0);
  for (size_t i = 0; i < d.ids.size(); ++i) p[static_cast<size_t>(d.ids[i])] = d.probs[i];
  return p;
}

// A draw from q with the test's own generator (independent of the sampler's).
int32_t draw(const Distribution& q, std::mt19937_64& rng) {
  double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  for (size_t i = 0; i < q.ids.size(); ++i) {
    u -= q.probs[i];
    if (u < 0) return q.ids[i];
  }
  return q.ids.back();
}

void expect_follows(const std::vector<double>& counts, const std::vector<double>& p, int n,
                    const std::string& what) {
  std::vector<double> expected;
  for (size_t i = 0; i < counts.size(); ++i) {
    expected.push_back(n * p[i]);
    if (p[i] == 0.0) {
      EXPECT_EQ(counts[i], 0.0) << what << ": token " << i << " has p = 0";
    }
  }
  const auto chi = chi_square(counts, expected);
  EXPECT_GE(chi.df, 2) << what;
  EXPECT_TRUE(chi.passes()) << what << ": chi-square " << chi.statistic
                            << " >= " << chi_square_critical_p001(chi.df) << " (df " << chi.df
                            << ")";
}

struct StatCase {
  const char* name;
  float top_p;
  bool point_mass;  // drafts without a q (a fixed rule), else drawn from kDraftProbs
};

class VerifierOneDraft : public ::testing::TestWithParam<StatCase> {};

TEST_P(VerifierOneDraft, FirstTokenFollowsTheTarget) {
  const StatCase& c = GetParam();
  SamplingParams params;
  params.temperature = 1.0f;
  params.top_p = c.top_p;
  params.seed = 1234;
  const std::vector<double> p = processed(params, kTarget);
  const Distribution q = full_q(kDraftProbs);
  const std::vector<Distribution> qs = {q};
  const Rows rows({kTarget, kSecond});
  Sampler s(params, kVocab);
  Verifier v;
  std::mt19937_64 draft_rng(99);
  const int n = 40000;
  std::vector<double> counts(kVocab, 0);
  double n_kept = 0, want_kept = 0;
  for (int i = 0; i < n; ++i) {
    const int32_t d = c.point_mass ? (i * 7) % kVocab : draw(q, draft_rng);
    const std::vector<int32_t> drafts = {d};
    const Verification r = c.point_mass ? v.verify(s, rows.view(), 0, drafts)
                                        : v.verify(s, rows.view(), 0, drafts, qs);
    ASSERT_EQ(r.tokens.size(), static_cast<size_t>(1 + r.n_accepted));
    ASSERT_EQ(r.tokens[0] == d, r.n_accepted == 1);  // a rejected draft is never re-emitted
    ++counts[static_cast<size_t>(r.tokens[0])];
    n_kept += r.n_accepted;
    // P(keep d) = min(1, p(d) / q(d)).
    const double qd = c.point_mass ? 1.0 : kDraftProbs[static_cast<size_t>(d)];
    want_kept += std::min(1.0, p[static_cast<size_t>(d)] / qd);
  }
  expect_follows(counts, p, n, c.name);
  // The acceptance count is a sum of independent Bernoullis: within 5 sigma of its mean.
  EXPECT_NEAR(n_kept, want_kept, 5 * std::sqrt(n * 0.25)) << c.name;
}

INSTANTIATE_TEST_SUITE_P(Cases, VerifierOneDraft,
                         ::testing::Values(StatCase{"temperature_1", 1.0f, false},
                                           StatCase{"top_p_0_8", 0.8f, false},
                                           StatCase{"temperature_1_point_mass", 1.0f, true},
                                           StatCase{"top_p_0_8_point_mass", 0.8f, true}),
                         [](const ::testing::TestParamInfo<StatCase>& param_info) {
                           return std::string(param_info.param.name);
                         });

// Two drafts. Row 0 is the target after the last sampled token, row 1 after draft 0. On the event
// "first emitted token == draft 0" (draft 0 kept) the second token comes from row 1 and must
// follow p1 whatever draft 1 was; the event itself has probability sum_x min(p0(x), q0(x)),
// which is p0(d0) for a fixed d0. Cells: (event, second token = y) for each y, and "not event".
TEST(Verifier, TwoDraftsJointLawOnTheFirstDraftKept) {
  for (const bool fixed_first : {true, false}) {
    SCOPED_TRACE(fixed_first ? "draft 0 fixed" : "draft 0 drawn from q0");
    SamplingParams params;
    params.temperature = 1.0f;
    params.top_k = 8;
    params.seed = 777;
    const std::vector<double> p0 = processed(params, kTarget);
    const std::vector<double> p1 = processed(params, kSecond);
    const int32_t fixed_d0 = 5;
    Distribution q0 = full_q(kDraftProbs);
    if (fixed_first) {
      q0.ids = {fixed_d0};
      q0.probs = {1.0f};
    }
    const Distribution q1 =
        full_q({0.1f, 0.1f, 0.05f, 0.3f, 0.05f, 0.1f, 0.05f, 0.1f, 0.1f, 0.05f});
    const std::vector<Distribution> qs = {q0, q1};
    double p_event = 0;
    for (size_t x = 0; x < q0.ids.size(); ++x) {
      p_event += std::min<double>(p0[static_cast<size_t>(q0.ids[x])], q0.probs[x]);
    }
    const Rows rows({kTarget, kSecond, kTarget});
    Sampler s(params, kVocab);
    Verifier v;
    std::mt19937_64 draft_rng(5);
    const int n = 40000;
    std::vector<double> counts(kVocab + 1, 0);
    for (int i = 0; i < n; ++i) {
      const std::vector<int32_t> drafts = {draw(q0, draft_rng), draw(q1, draft_rng)};
      const Verification r = v.verify(s, rows.view(), 0, drafts, qs);
      if (r.tokens[0] == drafts[0]) {
        ASSERT_GE(r.tokens.size(), 2u);
        ++counts[static_cast<size_t>(r.tokens[1])];
      } else {
        ASSERT_EQ(r.tokens.size(), 1u);
        ++counts[kVocab];
      }
    }
    std::vector<double> expected_p(kVocab + 1);
    for (int y = 0; y < kVocab; ++y)
      expected_p[static_cast<size_t>(y)] = p_event * p1[static_cast<size_t>(y)];
    expected_p[kVocab] = 1.0 - p_event;
    expect_follows(counts, expected_p, n, fixed_first ? "fixed d0" : "drawn d0");
  }
}

// Trees: root 0 with children 1 (token 3) and 2 (token 5); node 2 has child 3 (token 2).
// Rows: 0 follows the root, 1 node 1, 2 node 2, 3 node 3.
TEST(VerifierTree, GreedyFollowsTheArgmaxBranchAndMovesOnPastIt) {
  const std::vector<int32_t> nodes = {3, 5, 2};
  const std::vector<int32_t> parents = {-1, 0, 0, 2};
  Verifier v;
  {  // the argmax after the root is 5 (node 2), then 2 (node 3), then the bonus 7.
    const Rows rows({row_with(8, {{5, 1.0f}}), row_with(8, {{1, 1.0f}}), row_with(8, {{2, 1.0f}}),
                     row_with(8, {{7, 1.0f}})});
    Sampler s(greedy(), 8);
    const Verification out = v.verify_tree(s, rows.view(), 0, nodes, parents);
    EXPECT_EQ(out.tokens, (std::vector<int32_t>{5, 2, 7}));
    EXPECT_EQ(out.n_accepted, 2);
    EXPECT_EQ(out.rows, (std::vector<int32_t>{0, 2, 3}));
  }
  {  // the argmax after the root is 3 (node 1), then 4, which no child holds.
    const Rows rows({row_with(8, {{3, 1.0f}}), row_with(8, {{4, 1.0f}}), row_with(8, {{2, 1.0f}}),
                     row_with(8, {{7, 1.0f}})});
    Sampler s(greedy(), 8);
    const Verification out = v.verify_tree(s, rows.view(), 0, nodes, parents);
    EXPECT_EQ(out.tokens, (std::vector<int32_t>{3, 4}));
    EXPECT_EQ(out.n_accepted, 1);
    EXPECT_EQ(out.rows, (std::vector<int32_t>{0, 1}));
  }
  {  // no branch holds the argmax 6: one token, as a plain decode step.
    const Rows rows({row_with(8, {{6, 1.0f}}), row_with(8, {{4, 1.0f}}), row_with(8, {{2, 1.0f}}),
                     row_with(8, {{7, 1.0f}})});
    Sampler s(greedy(), 8);
    const Verification out = v.verify_tree(s, rows.view(), 0, nodes, parents);
    EXPECT_EQ(out.tokens, (std::vector<int32_t>{6}));
    EXPECT_EQ(out.n_accepted, 0);
  }
  const Rows three({row_with(8, {{6, 1.0f}}), row_with(8, {{4, 1.0f}}), row_with(8, {{2, 1.0f}})});
  Sampler s(greedy(), 8);
  EXPECT_THROW(v.verify_tree(s, three.view(), 0, nodes, parents), Error);
  EXPECT_THROW(v.verify_tree(s, three.view(), 0, nodes, std::vector<int32_t>{0, 0, 0, 2}), Error);
}

// Sampling through a tree is lossless: the first token follows p0 (whichever branch holds it),
// and given that the first token is node 2's, the second follows p2.
TEST(VerifierTree, SampledTokensFollowTheTargetWhateverTheTree) {
  for (float top_p : {1.0f, 0.8f}) {
    SamplingParams params;
    params.temperature = 1.0f;
    params.top_p = top_p;
    params.seed = 99;
    Sampler s(params, kVocab);
    Verifier v;
    const Rows rows({kTarget, kSecond, kSecond, kTarget});
    const std::vector<int32_t> nodes = {3, 5, 2};  // 3 and 5 are p0's two likeliest tokens
    const std::vector<int32_t> parents = {-1, 0, 0, 2};
    const int n = 20000;
    std::vector<double> first(kVocab, 0), second(kVocab, 0);
    int n_second = 0;
    for (int i = 0; i < n; ++i) {
      const Verification out = v.verify_tree(s, rows.view(), 0, nodes, parents);
      first[static_cast<size_t>(out.tokens[0])] += 1;
      if (out.tokens[0] == 5) {
        ASSERT_GE(out.tokens.size(), 2u);
        second[static_cast<size_t>(out.tokens[1])] += 1;
        ++n_second;
      }
    }
    const std::string what = "top_p " + std::to_string(top_p);
    expect_follows(first, processed(params, kTarget), n, what + " first token");
    expect_follows(second, processed(params, kSecond), n_second, what + " after node 2");
  }
}

}  // namespace
}  // namespace llms::spec
