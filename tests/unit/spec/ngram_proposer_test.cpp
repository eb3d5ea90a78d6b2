// spec::lookup_ngram and NgramProposer (prompt lookup): the latest earlier occurrence of the last
// n tokens wins, a longer n is preferred to a shorter one, proposals stop at max_drafts and at the
// end of the tokens, min_n is respected, short inputs and no match give nothing; a brute-force
// reference agrees on random token strings; the proposer sizes its answer to the requests and
// refuses a bad n range.
#include "spec/ngram_proposer.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "util/error.h"

namespace llms::spec {
namespace {

using Tokens = std::vector<int32_t>;

Tokens lookup(const Tokens& t, int32_t min_n, int32_t max_n, int32_t max_drafts) {
  return lookup_ngram(t, min_n, max_n, max_drafts);
}

TEST(NgramLookup, TheLatestEarlierMatchWins) {
  // [1 2 3] occurs at 0 and at 7 before the tail: the one at 7 is proposed.
  const Tokens t = {1, 2, 3, 10, 11, 12, 7, 1, 2, 3, 20, 21, 22, 8, 1, 2, 3};
  EXPECT_EQ(lookup(t, 1, 3, 3), (Tokens{20, 21, 22}));
  EXPECT_EQ(lookup(t, 3, 3, 2), (Tokens{20, 21}));
  EXPECT_EQ(lookup(t, 1, 1, 4), (Tokens{20, 21, 22, 8}));  // [3] too: latest at 9
}

TEST(NgramLookup, ALongerMatchIsPreferredToALaterShorterOne) {
  // Tail [7 1 2]: the 3-gram occurs at 0; only the 2-gram [1 2] occurs later, at 7.
  const Tokens t = {7, 1, 2, 30, 31, 32, 8, 1, 2, 40, 41, 42, 7, 1, 2};
  EXPECT_EQ(lookup(t, 1, 3, 3), (Tokens{30, 31, 32}));
  EXPECT_EQ(lookup(t, 1, 2, 3), (Tokens{40, 41, 42}));  // max_n 2: the later 2-gram
  EXPECT_EQ(lookup(t, 1, 5, 3), (Tokens{30, 31, 32}));  // max_n past any match: still 3
}

TEST(NgramLookup, TruncatedAtMaxDraftsAndAtTheEnd) {
  const Tokens t = {1, 2, 3, 4, 5, 1, 2};
  EXPECT_EQ(lookup(t, 2, 2, 3), (Tokens{3, 4, 5}));
  EXPECT_EQ(lookup(t, 2, 2, 10), (Tokens{3, 4, 5, 1, 2}));  // the rest of the tokens
  EXPECT_EQ(lookup(t, 2, 2, 1), (Tokens{3}));
  EXPECT_TRUE(lookup(t, 2, 2, 0).empty());
  // A match overlapping the tail: [9 9 9] at 0 ends right before the last token.
  EXPECT_EQ(lookup(Tokens{9, 9, 9, 9}, 1, 3, 5), (Tokens{9}));
  EXPECT_EQ(lookup(Tokens{4, 9, 9, 9, 9}, 2, 2, 5), (Tokens{9}));  // latest: at 2
}

TEST(NgramLookup, MinNIsRespected) {
  // Only a 1-gram recurs: [9] at 1.
  const Tokens t = {3, 9, 4, 5, 9};
  EXPECT_EQ(lookup(t, 1, 4, 5), (Tokens{4, 5, 9}));
  EXPECT_TRUE(lookup(t, 2, 4, 5).empty());
  // A 2-gram and a 3-gram recur; min_n = max_n = 3 takes the 3-gram only.
  const Tokens u = {5, 6, 7, 1, 6, 7, 2, 5, 6, 7};
  EXPECT_EQ(lookup(u, 3, 3, 2), (Tokens{1, 6}));
  EXPECT_EQ(lookup(u, 2, 2, 2), (Tokens{2, 5}));  // latest [6 7] at 4
}

TEST(NgramLookup, NoMatchAndShortInputsGiveNothing) {
  EXPECT_TRUE(lookup(Tokens{1, 2, 3, 4, 5}, 1, 3, 4).empty());
  EXPECT_TRUE(lookup(Tokens{}, 1, 3, 4).empty());
  EXPECT_TRUE(lookup(Tokens{1}, 1, 3, 4).empty());
  EXPECT_TRUE(lookup(Tokens{1, 1}, 2, 3, 4).empty());  // a 2-gram needs an earlier occurrence
  EXPECT_EQ(lookup(Tokens{1, 1}, 1, 3, 4), (Tokens{1}));
  EXPECT_TRUE(lookup(Tokens{1, 2, 1, 2}, 3, 2, 4).empty());  // max_n < min_n: no n to try
}

// The rule, written the slow way: for n = max_n .. min_n, scan every start from the latest.
Tokens brute_force(const Tokens& t, int32_t min_n, int32_t max_n, int32_t max_drafts) {
  const auto size = static_cast<int64_t>(t.size());
  for (int64_t n = max_n; n >= min_n; --n) {
    if (n >= size) continue;
    for (int64_t start = size - n - 1; start >= 0; --start) {
      bool same = true;
      for (int64_t i = 0; i < n; ++i) same = same && t[start + i] == t[size - n + i];
      if (!same) continue;
      Tokens out;
      for (int64_t i = start + n; i < size && static_cast<int64_t>(out.size()) < max_drafts; ++i) {
        out.push_back(t[static_cast<size_t>(i)]);
      }
      return out;
    }
  }
  return {};
}

TEST(NgramLookup, AgreesWithABruteForceReference) {
  std::mt19937 rng(17);
  int n_nonempty = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int len = std::uniform_int_distribution<int>(0, 40)(rng);
    const int alphabet = std::uniform_int_distribution<int>(2, 6)(rng);
    Tokens t(static_cast<size_t>(len));
    for (auto& x : t) x = std::uniform_int_distribution<int>(0, alphabet - 1)(rng);
    const int32_t min_n = std::uniform_int_distribution<int32_t>(1, 4)(rng);
    const int32_t max_n = min_n + std::uniform_int_distribution<int32_t>(0, 4)(rng);
    const int32_t max_drafts = std::uniform_int_distribution<int32_t>(1, 8)(rng);
    const Tokens want = brute_force(t, min_n, max_n, max_drafts);
    ASSERT_EQ(lookup(t, min_n, max_n, max_drafts), want)
        << "trial " << trial << " min_n " << min_n << " max_n " << max_n;
    n_nonempty += want.empty() ? 0 : 1;
  }
  EXPECT_GT(n_nonempty, 1000);
}

TEST(NgramProposer, ProposesPerRequestSizedToTheRequests) {
  NgramProposer proposer(2, 3);
  const Tokens a = {1, 2, 3, 4, 5, 6, 1, 2, 3};
  const Tokens b = {8, 9, 8};  // only a 1-gram recurs: nothing at min_n 2
  const Tokens c = {5, 6, 7, 8, 5, 6};
  const std::vector<ProposalRequest> requests = {{10, a, 2}, {11, b, 4}, {12, c, 5}};
  std::vector<std::vector<int32_t>> drafts(7, Tokens{99});  // stale contents
  proposer.propose(requests, drafts);
  ASSERT_EQ(drafts.size(), 3u);
  EXPECT_EQ(drafts[0], (Tokens{4, 5}));
  EXPECT_TRUE(drafts[1].empty());
  EXPECT_EQ(drafts[2], (Tokens{7, 8, 5, 6}));
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_LE(static_cast<int32_t>(drafts[i].size()), requests[i].max_drafts);
    EXPECT_EQ(drafts[i], lookup_ngram(requests[i].tokens, 2, 3, requests[i].max_drafts));
  }
  drafts.assign(2, Tokens{1});
  proposer.propose({}, drafts);
  EXPECT_TRUE(drafts.empty());
  proposer.remove(10);  // stateless: nothing to forget, nothing breaks
}

TEST(NgramProposer, RefusesABadNRange) {
  for (auto [min_n, max_n] : {std::pair{0, 3}, std::pair{-1, 2}, std::pair{3, 2}}) {
    try {
      NgramProposer p(min_n, max_n);
      ADD_FAILURE() << min_n << ", " << max_n << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument) << e.what();
    }
  }
  EXPECT_NO_THROW(NgramProposer(1, 1));
  EXPECT_NO_THROW(NgramProposer(2, 5));
}

}  // namespace
}  // namespace llms::spec
