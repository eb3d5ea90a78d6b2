// structured/mask_walker: see mask_walker.h.
#include "mask_walker.h"

#include <algorithm>

#include "token_trie.h"

namespace llms::structured {

MaskWalker::MaskWalker(const CompiledGrammar& grammar)
    : g_(grammar),
      builder_(grammar),
      levels_(std::make_unique<EarleySet[]>(static_cast<size_t>(grammar.index->trie().max_depth()) +
                                            1)) {}

void MaskWalker::fill(const EarleySet& set, std::span<uint32_t> words) {
  seen_states_.clear();
  for (const EarleyItem& item : set.items) {
    if (!(g_.flags[static_cast<size_t>(item.state)] & kHasBytes)) continue;
    const StateMaskInfo& info = g_.mask_info(item.state);
    // Items of one state share `accepted`; only their continuations depend on the origin.
    if (std::find(seen_states_.begin(), seen_states_.end(), item.state) == seen_states_.end()) {
      seen_states_.push_back(item.state);
      info.accepted.or_into(words);
    }
    for (const Continuation& c : info.continuations) walk_continuation(c, item.origin, words);
  }
}

void MaskWalker::walk_continuation(const Continuation& c, const EarleySet* origin,
                                   std::span<uint32_t> words) {
  const detail::TokenTrie& trie = g_.index->trie();
  const auto& nodes = trie.nodes();
  const detail::TrieNode& base = nodes[static_cast<size_t>(c.node)];
  const EarleyItem seed{c.state, origin};
  builder_.start(levels_[0], std::span<const EarleyItem>(&seed, 1));
  for (size_t i = static_cast<size_t>(c.node) + 1; i < base.subtree_end;) {
    const detail::TrieNode& node = nodes[i];
    const size_t level = node.depth - base.depth;
    if (!builder_.step(levels_[level - 1], node.byte, levels_[level])) {
      i = node.subtree_end;
      continue;
    }
    for (int32_t id : trie.tokens_at(node)) words[static_cast<size_t>(id) / 32] |= 1u << (id % 32);
    ++i;
  }
}

}  // namespace llms::structured
