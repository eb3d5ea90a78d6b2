// spec::SpeculativeConfig::validate() and parse_method(): out-of-range values are refused with
// llms::Error(kInvalidArgument) naming the flag (--num-speculative-tokens, --speculative-method,
// the prompt-lookup range); every accepted spelling of a method parses; enabled() needs a method
// and at least one token.
#include "spec/speculative_config.h"

#include <gtest/gtest.h>

#include <string>

#include "util/error.h"

namespace llms::spec {
namespace {

void expect_refused(const SpeculativeConfig& c, const std::string& needle) {
  try {
    c.validate();
    ADD_FAILURE() << "accepted; expected a refusal naming '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

SpeculativeConfig ngram(int32_t k) {
  SpeculativeConfig c;
  c.method = Method::kNgram;
  c.num_speculative_tokens = k;
  return c;
}

TEST(SpeculativeConfig, DefaultsAreValidAndOff) {
  SpeculativeConfig c;
  EXPECT_NO_THROW(c.validate());
  EXPECT_FALSE(c.enabled());
  EXPECT_TRUE(ngram(1).enabled());
  EXPECT_FALSE(ngram(0).enabled());
}

TEST(SpeculativeConfig, NumSpeculativeTokensMustBeIn0To16) {
  for (int32_t k : {-1, 17, 1000}) {
    SpeculativeConfig c;
    c.num_speculative_tokens = k;
    expect_refused(c, "--num-speculative-tokens");
    expect_refused(c, std::to_string(k));
    expect_refused(ngram(k), "--num-speculative-tokens");
  }
  for (int32_t k : {1, 4, 16}) EXPECT_NO_THROW(ngram(k).validate()) << k;
  SpeculativeConfig off;
  off.num_speculative_tokens = 16;  // no method: allowed, just off
  EXPECT_NO_THROW(off.validate());
  EXPECT_FALSE(off.enabled());
}

TEST(SpeculativeConfig, AMethodNeedsTokens) {
  expect_refused(ngram(0), "--num-speculative-tokens");
  SpeculativeConfig draft = ngram(0);
  draft.method = Method::kDraft;
  expect_refused(draft, "--num-speculative-tokens");
  expect_refused(draft, "draft");
}

TEST(SpeculativeConfig, PromptLookupRange) {
  const auto with = [](int32_t lo, int32_t hi) {
    SpeculativeConfig c = ngram(4);
    c.prompt_lookup_min = lo;
    c.prompt_lookup_max = hi;
    return c;
  };
  expect_refused(with(0, 3), "prompt_lookup_min");
  expect_refused(with(-2, 3), "prompt_lookup_min");
  expect_refused(with(4, 3), "prompt_lookup_max");
  expect_refused(with(1, 65), "prompt_lookup_max");
  EXPECT_NO_THROW(with(1, 1).validate());
  EXPECT_NO_THROW(with(3, 64).validate());
}

TEST(SpeculativeConfig, OtherFieldsMustNotBeNegative) {
  SpeculativeConfig c = ngram(4);
  c.disable_by_batch_size = -1;
  expect_refused(c, "disable_by_batch_size");
  c.disable_by_batch_size = 0;
  c.draft_vocab_size = -5;
  expect_refused(c, "--draft-vocab-size");
}

TEST(SpeculativeConfig, DraftTreeWidthIs1To8AndNeedsADraftModel) {
  SpeculativeConfig c = ngram(4);
  c.method = Method::kDraft;
  for (int32_t w : {1, 2, 8}) {
    c.draft_tree_width = w;
    EXPECT_NO_THROW(c.validate()) << w;
  }
  for (int32_t w : {0, 9, -1}) {
    c.draft_tree_width = w;
    expect_refused(c, "--draft-tree-width");
  }
  SpeculativeConfig n = ngram(4);
  n.draft_tree_width = 2;
  expect_refused(n, "--draft-tree-width: token trees need --speculative-method draft");
}

TEST(SpeculativeConfig, ParseMethod) {
  EXPECT_EQ(parse_method("ngram"), Method::kNgram);
  EXPECT_EQ(parse_method("[ngram]"), Method::kNgram);
  EXPECT_EQ(parse_method("prompt_lookup"), Method::kNgram);
  EXPECT_EQ(parse_method("draft"), Method::kDraft);
  EXPECT_EQ(parse_method("draft_model"), Method::kDraft);
  EXPECT_EQ(parse_method("none"), Method::kNone);
  EXPECT_EQ(parse_method(""), Method::kNone);
  for (const char* bad : {"eagle", "NGRAM", "ngram ", "[draft]", "medusa"}) {
    try {
      parse_method(bad);
      ADD_FAILURE() << "'" << bad << "' accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("--speculative-method"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
  for (Method m : {Method::kNone, Method::kNgram, Method::kDraft}) {
    EXPECT_EQ(parse_method(method_name(m)), m);  // names round-trip
  }
}

}  // namespace
}  // namespace llms::spec
