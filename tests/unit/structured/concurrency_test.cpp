// One CompiledGrammar used from several threads at once (its automaton's rows and its mask cache
// fill lazily and are shared), each thread with its own matchers and forks of them (forks share
// parse history, which may be released from any thread): every mask equals the one computed
// alone beforehand.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <thread>

#include "grammar_test_support.h"

namespace llms::structured {
namespace {

using testing::allowed_ids;

// Masks along random walks of `steps` tokens, computed alone; then the same walks from 8 threads
// at once on one shared compile, 3 rounds each, forks released out of order: no mismatch.
void expect_same_masks_on_every_thread(
    const std::function<std::shared_ptr<const CompiledGrammar>()>& compile, int steps) {
  std::vector<std::vector<int32_t>> walks;
  std::vector<std::vector<std::vector<int32_t>>> expected;
  {
    auto reference = compile();
    std::mt19937 rng(5);
    for (int w = 0; w < 8; ++w) {
      Matcher m(reference);
      walks.emplace_back();
      expected.emplace_back();
      for (int step = 0;; ++step) {
        auto ids = allowed_ids(m);
        expected.back().push_back(ids);  // one more mask than tokens: after the last one too
        std::erase(ids, testing::kStopId);
        if (ids.empty() || step == steps) break;
        const int32_t pick = ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)];
        walks.back().push_back(pick);
        ASSERT_TRUE(m.accept_token(pick));
      }
    }
  }
  auto shared = compile();
  std::vector<int> mismatches(walks.size(), 0);
  std::vector<std::thread> threads;
  for (size_t w = 0; w < walks.size(); ++w) {
    threads.emplace_back([&, w] {
      for (int round = 0; round < 3; ++round) {
        Matcher m(shared);
        std::vector<Matcher> forks;
        for (size_t step = 0; step <= walks[w].size(); ++step) {
          if (allowed_ids(m) != expected[w][step]) ++mismatches[w];
          if (step == walks[w].size()) break;
          forks.push_back(m);  // released at the end of the round, out of order
          if (!m.accept_token(walks[w][step])) ++mismatches[w];
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (size_t w = 0; w < walks.size(); ++w) EXPECT_EQ(mismatches[w], 0) << "thread " << w;
}

TEST(Concurrency, StatesBuiltOnDemandFromSeveralThreads) {
  // 2^21 automaton states in all, far more than compiling builds ahead: the threads' walks
  // build the rows they need concurrently.
  auto index = testing::byte_index({"ab", "ba", "aab", "bbb", "abx"});
  expect_same_masks_on_every_thread([&] { return compile_regex("(a|b)*a(a|b){20}x", index); }, 60);
}

TEST(Concurrency, SharedGrammarGivesTheSameMasksOnEveryThread) {
  const char* text = R"G(
root ::= value
value ::= object | array | string | [0-9]{1,3} | "true"
object ::= "{" ( string ":" value ( "," string ":" value )* )? "}"
array ::= "[" ( value ( "," value ){0,40} )? "]"
string ::= "\"" [^"\\\x00-\x1f]{0,30} "\""
)G";
  auto index = testing::byte_index({"{\"", "\":", "\",", "\"}", "[1", "],", "true", "ab", "abc"});
  expect_same_masks_on_every_thread([&] { return compile_grammar(text, index); }, 40);
}

}  // namespace
}  // namespace llms::structured
