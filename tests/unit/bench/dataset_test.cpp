// Datasets: token-exact growth against a counter with multi-token words, determinism, shared
// prefixes, JSONL parsing and its refusals.
#include "bench/dataset.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>

#include "util/error.h"

namespace llms::bench {
namespace {

// BOS + ceil(len / 6) per word: words of 7+ letters are two tokens, so growing by whole words
// cannot always land on the target and the search must swap words.
int64_t rule_count(const std::string& text) {
  int64_t n = 1;
  std::istringstream in(text);
  for (std::string w; in >> w;) n += (static_cast<int64_t>(w.size()) + 5) / 6;
  return n;
}

TEST(GrowToTokens, HitsEveryTargetExactly) {
  int calls = 0;
  TokenCounter counter = [&](const std::string& t) -> std::optional<int64_t> {
    ++calls;
    return rule_count(t);
  };
  uint64_t rng = 1;
  for (int64_t target : {2, 3, 5, 17, 64, 100, 333, 1024}) {
    GrownText g = grow_to_tokens("", target, rng, counter);
    EXPECT_TRUE(g.exact) << target;
    EXPECT_EQ(g.tokens, target);
    EXPECT_EQ(rule_count(g.text), target);
    EXPECT_LE(g.n_counter_calls, 40);
  }
  // With a base: the base is kept verbatim at the front.
  GrownText g = grow_to_tokens("shared prefix here\n", 20, rng, counter);
  EXPECT_TRUE(g.exact);
  EXPECT_EQ(g.text.rfind("shared prefix here\n", 0), 0u);
  EXPECT_EQ(rule_count(g.text), 20);
  EXPECT_GT(calls, 0);
}

TEST(GrowToTokens, ReportsClosestWhenTheTargetIsBelowTheBase) {
  TokenCounter counter = [](const std::string& t) -> std::optional<int64_t> {
    return rule_count(t);
  };
  uint64_t rng = 1;
  GrownText g = grow_to_tokens("one two three", 2, rng, counter);  // the base is 4 tokens
  EXPECT_FALSE(g.exact);
  EXPECT_EQ(g.tokens, 4);
  EXPECT_EQ(g.text, "one two three");
}

TEST(GrowToTokens, WithoutCounterOneWordPerToken) {
  uint64_t rng = 3;
  GrownText g = grow_to_tokens("", 50, rng, {});
  EXPECT_FALSE(g.exact);
  std::istringstream in(g.text);
  int words = 0;
  for (std::string w; in >> w;) ++words;
  EXPECT_EQ(words, 50);
  EXPECT_EQ(g.n_counter_calls, 0);
}

TEST(RandomDataset, ExactLengthsInRangeAndDeterministic) {
  TokenCounter counter = [](const std::string& t) -> std::optional<int64_t> {
    return rule_count(t);
  };
  RandomSpec spec;
  spec.n_prompts = 30;
  spec.input = {100, 0.5};
  spec.output = {20, 0.25};
  spec.seed = 9;
  Dataset a = make_random_dataset(spec, counter, "rule");
  Dataset b = make_random_dataset(spec, counter, "rule");
  EXPECT_TRUE(a.token_exact);
  EXPECT_EQ(a.length_source, "rule");
  ASSERT_EQ(a.prompts.size(), 30u);
  std::set<int64_t> lengths;
  for (size_t i = 0; i < a.prompts.size(); ++i) {
    const Prompt& p = a.prompts[i];
    EXPECT_EQ(p.text, b.prompts[i].text);
    EXPECT_EQ(rule_count(p.text), p.input_tokens);
    EXPECT_GE(p.input_tokens, 50);
    EXPECT_LE(p.input_tokens, 150);
    EXPECT_GE(p.max_tokens, 15);
    EXPECT_LE(p.max_tokens, 25);
    lengths.insert(p.input_tokens);
  }
  EXPECT_GT(lengths.size(), 10u);  // lengths really vary
  spec.seed = 10;
  EXPECT_NE(make_random_dataset(spec, counter, "rule").prompts[0].text, a.prompts[0].text);

  Dataset approx = make_random_dataset(spec, {}, "word list");
  EXPECT_FALSE(approx.token_exact);
  EXPECT_EQ(approx.prompts[0].input_tokens, -1);
  EXPECT_THROW(make_random_dataset(RandomSpec{0, {1, 0}, {1, 0}, 0}, {}, ""), Error);
  EXPECT_THROW(make_random_dataset(RandomSpec{1, {0, 0}, {1, 0}, 0}, {}, ""), Error);
  EXPECT_THROW(make_random_dataset(RandomSpec{1, {5, 1.5}, {1, 0}, 0}, {}, ""), Error);
}

TEST(SharedPrefixDataset, GroupsShareTheirPrefixExactly) {
  TokenCounter counter = [](const std::string& t) -> std::optional<int64_t> {
    return rule_count(t);
  };
  SharedPrefixSpec spec;
  spec.n_groups = 3;
  spec.n_questions = 5;
  spec.prefix_tokens = 200;
  spec.question_tokens = 30;
  spec.output_tokens = 16;
  Dataset ds = make_shared_prefix_dataset(spec, counter, "rule");
  ASSERT_EQ(ds.prompts.size(), 15u);
  EXPECT_TRUE(ds.token_exact);
  std::map<std::string, int> prefixes;
  std::set<std::string> texts;
  for (const auto& p : ds.prompts) {
    const size_t nl = p.text.find('\n');
    ASSERT_NE(nl, std::string::npos);
    const std::string prefix = p.text.substr(0, nl);
    ++prefixes[prefix];
    EXPECT_EQ(rule_count(prefix), 200);
    EXPECT_EQ(p.input_tokens, 230);
    EXPECT_EQ(rule_count(p.text), 230);
    EXPECT_EQ(p.max_tokens, 16);
    texts.insert(p.text);
  }
  EXPECT_EQ(prefixes.size(), 3u);
  for (const auto& [prefix, n] : prefixes) EXPECT_EQ(n, 5);
  EXPECT_EQ(texts.size(), 15u);  // every question differs
  // Shuffled: the first five prompts are not all from one group.
  std::set<std::string> first_five;
  for (size_t i = 0; i < 5; ++i)
    first_five.insert(ds.prompts[i].text.substr(0, ds.prompts[i].text.find('\n')));
  EXPECT_GT(first_five.size(), 1u);
}

TEST(JsonlDataset, PromptsMessagesAndLengths) {
  const std::string text =
      "{\"prompt\": \"Hello\"}\n"
      "\n"
      "{\"text\": \"Bonjour\", \"max_tokens\": 5}\r\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"output_len\": 9}\n";
  Dataset ds = parse_jsonl_dataset(text, "f.jsonl", 32);
  EXPECT_EQ(ds.kind, "jsonl");
  ASSERT_EQ(ds.prompts.size(), 3u);
  EXPECT_EQ(ds.prompts[0].text, "Hello");
  EXPECT_EQ(ds.prompts[0].max_tokens, 32);
  EXPECT_FALSE(ds.prompts[0].is_chat());
  EXPECT_EQ(ds.prompts[1].text, "Bonjour");
  EXPECT_EQ(ds.prompts[1].max_tokens, 5);
  EXPECT_TRUE(ds.prompts[2].is_chat());
  EXPECT_EQ(ds.prompts[2].max_tokens, 9);
}

TEST(JsonlDataset, RefusalsNameTheLine) {
  auto message = [](const std::string& text) {
    try {
      parse_jsonl_dataset(text, "d.jsonl", -1);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("{\"prompt\":\"a\"}\n[1]\n"), "d.jsonl:2: not a JSON object");
  EXPECT_EQ(message("{\"prompt\": 3}"),
            "d.jsonl:1: needs a string \"prompt\" (or \"text\") or a \"messages\" array");
  EXPECT_EQ(message("{\"messages\": []}"), "d.jsonl:1: \"messages\" must be a non-empty array");
  EXPECT_EQ(message("{\"messages\": [{\"content\": \"x\"}]}"),
            "d.jsonl:1: every message must be an object with a \"role\"");
  EXPECT_EQ(message("{\"prompt\":\"a\",\"max_tokens\":0}"),
            "d.jsonl:1: \"max_tokens\" must be an integer >= 1");
  EXPECT_EQ(message("\n\n"), "d.jsonl: no prompts in the file");
  EXPECT_EQ(message("{\"prompt\":\"a\"}\n{broken"), "d.jsonl:2: not a JSON object");
  EXPECT_THROW(load_jsonl_dataset("/nonexistent/bench.jsonl", 1), Error);
}

}  // namespace
}  // namespace llms::bench
