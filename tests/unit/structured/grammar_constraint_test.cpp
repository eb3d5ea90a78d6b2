// The sampler adapter: a row is -infinity exactly where the matcher refuses the token, rows past
// the vocabulary (padding of the output matrix) always are, and the rest keep their logits.
#include "structured/grammar_constraint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "grammar_test_support.h"
#include "util/error.h"

namespace llms::structured {
namespace {

using testing::allowed_ids;
using testing::byte_index;

// Masks a row of `n_rows` logits (value = row index) after `prefix` and checks it row by row
// against the matcher's own mask.
void expect_mask_matches(const std::string& grammar, const std::string& prefix, size_t n_rows) {
  const auto g = compile_grammar(grammar, byte_index({"ab", "abc", "b", "zz"}));
  GrammarConstraintFactory factory(g);
  auto constraint = factory.make();
  Matcher reference(g);
  for (const char c : prefix) {
    constraint->accept(static_cast<unsigned char>(c));
    ASSERT_TRUE(reference.accept_token(static_cast<unsigned char>(c)));
  }
  const std::vector<int32_t> allowed = allowed_ids(reference);
  std::vector<float> logits(n_rows);
  for (size_t i = 0; i < n_rows; ++i) logits[i] = static_cast<float>(i);
  EXPECT_EQ(constraint->mask(logits), !allowed.empty());
  std::vector<int32_t> kept;
  for (size_t i = 0; i < n_rows; ++i) {
    if (std::isinf(logits[i])) {
      EXPECT_LT(logits[i], 0.0f);
    } else {
      EXPECT_EQ(logits[i], static_cast<float>(i));
      kept.push_back(static_cast<int32_t>(i));
    }
  }
  EXPECT_EQ(kept, allowed) << grammar << " after '" << prefix << "'";
}

TEST(GrammarConstraint, RowsAreRefusedExactlyWhereTheMatcherRefuses) {
  const size_t n_tokens = static_cast<size_t>(byte_index({"ab", "abc", "b", "zz"})->n_tokens());
  for (const size_t n_rows : {n_tokens, n_tokens + 7, n_tokens + 64}) {
    expect_mask_matches("root ::= [a-z]+", "", n_rows);  // mixed words, whole words refused
    expect_mask_matches("root ::= [^q]*", "", n_rows);   // nearly every word all allowed
    expect_mask_matches("root ::= \"ab\" [c-e]", "a", n_rows);
    expect_mask_matches("root ::= \"ab\" [c-e]", "ab", n_rows);
    expect_mask_matches("root ::= \"ab\"", "ab", n_rows);  // only the stop token
  }
}

}  // namespace
}  // namespace llms::structured
