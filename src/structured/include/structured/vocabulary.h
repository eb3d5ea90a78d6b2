// structured/vocabulary: a model's tokens as byte strings, and the index every grammar walks.
//
// A Vocabulary has one entry per logits row (ids 0..n-1). Padding rows have empty bytes and
// is_special = 1. Special/control tokens and empty tokens are never allowed by a constraint,
// except the stop tokens, which are allowed exactly when the text so far is a complete sentence.
//
// The TokenIndex is built once per model and shared (read-only, thread-safe) by every compiled
// grammar: the allowed tokens sorted by their bytes into a trie laid out in depth-first order,
// plus per-token facts that let masks skip whole families of tokens (e.g. tokens made only of
// characters a JSON string may hold unescaped).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace llms::structured {

struct Vocabulary {
  std::vector<std::string> token_bytes;  // one per logits row
  std::vector<uint8_t> is_special;       // same size; 1 = control/special/padding
  std::vector<int32_t> stop_token_ids;   // allowed only where the sentence is complete
};

namespace detail {
class TokenTrie;  // the trie and its per-token facts (token_trie.h, internal)
}

class TokenIndex {
 public:
  explicit TokenIndex(std::unique_ptr<const detail::TokenTrie> trie);
  ~TokenIndex();
  TokenIndex(const TokenIndex&) = delete;
  TokenIndex& operator=(const TokenIndex&) = delete;

  // Number of logits rows; masks have (n_tokens() + 31) / 32 words.
  int32_t n_tokens() const;
  int32_t n_mask_words() const { return (n_tokens() + 31) / 32; }
  std::string_view token_bytes(int32_t id) const;
  // True for tokens that may ever be allowed by a grammar's text (non-empty, not special).
  bool is_text_token(int32_t id) const;
  bool is_stop_token(int32_t id) const;
  std::span<const int32_t> stop_token_ids() const;

  const detail::TokenTrie& trie() const { return *trie_; }

 private:
  std::unique_ptr<const detail::TokenTrie> trie_;
};

// Validates the vocabulary (sizes agree, stop ids in range) and builds its index; throws
// llms::Error(kInvalidArgument) naming the problem.
std::shared_ptr<const TokenIndex> build_token_index(Vocabulary vocabulary);

}  // namespace llms::structured
