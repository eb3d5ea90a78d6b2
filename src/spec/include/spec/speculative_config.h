// spec/speculative_config: how a server speculates, as vLLM's --speculative-config names it.
//
// method "ngram" proposes what followed the latest earlier occurrence of the sequence's last
// n tokens (prompt lookup, prompt_lookup_min..prompt_lookup_max); "draft" runs a smaller model
// with the same tokenizer. num_speculative_tokens (1..16) is the most drafts per sequence per
// step; the engine proposes fewer, down to none, when measured acceptance or the batch's size
// make verifying them cost more than it gives (spec/draft_length_policy.h).
#pragma once

#include <cstdint>
#include <string>

namespace llms::spec {

enum class Method { kNone, kNgram, kDraft };

inline constexpr int32_t kMaxSpeculativeTokens = 16;
inline constexpr int32_t kMaxDraftTreeWidth = 8;

struct SpeculativeConfig {
  Method method = Method::kNone;
  int32_t num_speculative_tokens = 0;
  int32_t prompt_lookup_min = 2;
  int32_t prompt_lookup_max = 5;
  // Speculate only while at most this many sequences decode (0: no fixed limit; the
  // draft-length policy decides from measured step costs alone).
  int32_t disable_by_batch_size = 0;
  // A draft model's head over token ids [0, draft_vocab_size) only (0: its whole vocabulary).
  // Its output matrix is a large part of a small model's bytes (a third of Qwen2.5-0.5B's), and
  // byte-level BPE numbers tokens most frequent first, so a head over the first 32k ids keeps
  // most drafts and reads far fewer bytes.
  int32_t draft_vocab_size = 0;
  // A draft model proposes a token tree: at each depth the draft_tree_width likeliest
  // continuations (by the draft's probability of the whole branch) are kept and verified in
  // the same target pass, num_speculative_tokens nodes in all. 1: one chain (no tree).
  int32_t draft_tree_width = 1;
  // Fix the draft length at num_speculative_tokens (no adaptation): for tests and for
  // measuring acceptance at one length.
  bool fixed_length = false;

  bool enabled() const { return method != Method::kNone && num_speculative_tokens > 0; }
  // Throws llms::Error(kInvalidArgument) naming the flag that is out of range.
  void validate() const;
};

// "ngram" (also "[ngram]" and "prompt_lookup"), "draft" (also "draft_model"), "none" or "";
// anything else throws llms::Error(kInvalidArgument) naming --speculative-method.
Method parse_method(const std::string& name);
const char* method_name(Method method);

}  // namespace llms::spec
