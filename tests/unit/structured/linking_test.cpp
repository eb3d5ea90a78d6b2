// Linking a grammar into automata: which rules stay calls of the parser and which are inlined.
// Every inlined reference is a walk the masks never have to do with the parser, so the shapes
// the JSON Schema compiler writes should become one automaton wherever they fit.
#include <gtest/gtest.h>

#include <string>

#include "grammar_test_support.h"

namespace llms::structured {
namespace {

using testing::accepts;
using testing::byte_index;

// The JSON Schema compiler's shape for optional properties in a fixed order: p<i> is what may
// follow when nothing was written yet, p<i>-2 after some property (so a comma comes first).
// Written as a tree each rule holds the next one twice, so copying references would double the
// automaton per property.
std::string optional_properties(int n) {
  auto name = [](int i) { return "\\\"a" + std::to_string(i) + "\\\":1"; };
  std::string text = "root ::= \"{\" p1 \"}\"\n";
  for (int i = 1; i <= n; ++i) {
    const std::string next = std::to_string(i + 1);
    if (i < n) {
      text +=
          "p" + std::to_string(i) + " ::= \"" + name(i) + "\" p" + next + "-2 | p" + next + "\n";
      text += "p" + std::to_string(i) + "-2 ::= \"," + name(i) + "\" p" + next + "-2 | p" + next +
              "-2\n";
    } else {
      text += "p" + std::to_string(i) + " ::= \"" + name(i) + "\"?\n";
      text += "p" + std::to_string(i) + "-2 ::= \"," + name(i) + "\"?\n";
    }
  }
  return text;
}

TEST(Linking, OptionalPropertiesInARowBecomeOneLinearAutomaton) {
  const int n = 40;
  auto g = compile_grammar(optional_properties(n), byte_index());
  const GrammarStats stats = grammar_stats(*g);
  EXPECT_EQ(stats.rules, 1);  // no property is a parser call
  // Each property's text is read once or twice (before and after a first property): linear.
  EXPECT_LT(stats.states, 2 * n * 12);
  EXPECT_TRUE(accepts(g, "{}"));
  EXPECT_TRUE(accepts(g, "{\"a1\":1}"));
  EXPECT_TRUE(accepts(g, "{\"a40\":1}"));
  EXPECT_TRUE(accepts(g, "{\"a2\":1,\"a7\":1,\"a40\":1}"));
  std::string all = "{";
  for (int i = 1; i <= n; ++i) all += (i > 1 ? ",\"a" : "\"a") + std::to_string(i) + "\":1";
  EXPECT_TRUE(accepts(g, all + "}"));
  EXPECT_FALSE(accepts(g, "{\"a7\":1,\"a2\":1}"));  // out of order
  EXPECT_FALSE(accepts(g, "{\"a2\":1,\"a2\":1}"));  // twice
  EXPECT_FALSE(accepts(g, "{,\"a2\":1}"));
  EXPECT_FALSE(accepts(g, "{\"a2\":1,}"));
  EXPECT_FALSE(accepts(g, "{\"a2\":1\"a3\":1}"));
}

TEST(Linking, LargeRulesUsedInManyPlacesStayCalls) {
  // A large rule with two different continuations would be copied whole; past the inlining
  // limits it stays one rule that the parser calls.
  std::string big = "big ::= ";
  for (int i = 0; i < 3000; ++i) big += (i ? " | \"w" : "\"w") + std::to_string(i) + "\"";
  auto g = compile_grammar("root ::= big \"x\" big \"y\"\n" + big + "\n", byte_index());
  EXPECT_EQ(grammar_stats(*g).rules, 2);
  EXPECT_TRUE(accepts(g, "w12xw2999y"));
  EXPECT_FALSE(accepts(g, "w12yw2999x"));
  // The same rule used once is inlined.
  auto once = compile_grammar("root ::= big \"x\"\n" + big + "\n", byte_index());
  EXPECT_EQ(grammar_stats(*once).rules, 1);
  EXPECT_TRUE(accepts(once, "w2999x"));
}

}  // namespace
}  // namespace llms::structured
