// structured/vocabulary: see vocabulary.h.
#include "structured/vocabulary.h"

#include "token_trie.h"

namespace llms::structured {

TokenIndex::TokenIndex(std::unique_ptr<const detail::TokenTrie> trie) : trie_(std::move(trie)) {}
TokenIndex::~TokenIndex() = default;

int32_t TokenIndex::n_tokens() const { return trie_->n_tokens(); }

std::string_view TokenIndex::token_bytes(int32_t id) const {
  if (id < 0 || id >= n_tokens()) return {};
  return trie_->bytes(id);
}

bool TokenIndex::is_text_token(int32_t id) const {
  return id >= 0 && id < n_tokens() && trie_->is_text(id);
}

bool TokenIndex::is_stop_token(int32_t id) const {
  return id >= 0 && id < n_tokens() && trie_->is_stop(id);
}

std::span<const int32_t> TokenIndex::stop_token_ids() const { return trie_->stop_ids(); }

std::shared_ptr<const TokenIndex> build_token_index(Vocabulary vocabulary) {
  return std::make_shared<const TokenIndex>(
      std::make_unique<const detail::TokenTrie>(std::move(vocabulary)));
}

}  // namespace llms::structured
