#include "spec/speculative_config.h"

#include <fmt/core.h>

#include "util/error.h"

namespace llms::spec {

void SpeculativeConfig::validate() const {
  auto bad = [](const std::string& what) { throw Error(Error::Kind::kInvalidArgument, what); };
  if (num_speculative_tokens < 0 || num_speculative_tokens > kMaxSpeculativeTokens) {
    bad(fmt::format("--num-speculative-tokens must be in [0, {}], got {}", kMaxSpeculativeTokens,
                    num_speculative_tokens));
  }
  if (method != Method::kNone && num_speculative_tokens == 0) {
    bad(fmt::format("--speculative-method {} needs --num-speculative-tokens in [1, {}]",
                    method_name(method), kMaxSpeculativeTokens));
  }
  if (prompt_lookup_min < 1 || prompt_lookup_max < prompt_lookup_min || prompt_lookup_max > 64) {
    bad(
        fmt::format("prompt_lookup_min ({}) and prompt_lookup_max ({}) must satisfy 1 <= min <= "
                    "max <= 64",
                    prompt_lookup_min, prompt_lookup_max));
  }
  if (draft_vocab_size < 0) {
    bad(fmt::format("--draft-vocab-size must be >= 0, got {}", draft_vocab_size));
  }
  if (draft_tree_width < 1 || draft_tree_width > kMaxDraftTreeWidth) {
    bad(fmt::format("--draft-tree-width must be in [1, {}], got {}", kMaxDraftTreeWidth,
                    draft_tree_width));
  }
  if (draft_tree_width > 1 && method != Method::kDraft) {
    bad("--draft-tree-width: token trees need --speculative-method draft");
  }
  if (disable_by_batch_size < 0) {
    bad(fmt::format("speculative_disable_by_batch_size must be >= 0, got {}",
                    disable_by_batch_size));
  }
}

Method parse_method(const std::string& name) {
  if (name.empty() || name == "none") return Method::kNone;
  if (name == "ngram" || name == "[ngram]" || name == "prompt_lookup") return Method::kNgram;
  if (name == "draft" || name == "draft_model") return Method::kDraft;
  throw Error(Error::Kind::kInvalidArgument,
              fmt::format("--speculative-method: unknown method '{}' (ngram, draft)", name));
}

const char* method_name(Method method) {
  switch (method) {
    case Method::kNgram:
      return "ngram";
    case Method::kDraft:
      return "draft";
    case Method::kNone:
      break;
  }
  return "none";
}

}  // namespace llms::spec
