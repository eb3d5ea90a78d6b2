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

void MaskWalker::fill(const EarleySet& set, std::span<uint32_t> words, CompileBudget& budget) {
  seen_infos_.clear();
  for (const EarleyItem& item : set.items) {
    if (!(g_.flags_of(item.state) & kHasBytes)) continue;
    budget.charge(1, "token mask items");
    const StateMaskInfo* long_info = g_.long_mask_info(item.state, item.count, budget);
    for (const StateMaskInfo* info : {&g_.mask_info(item.state, item.count, budget), long_info}) {
      if (info == nullptr) continue;
      // Items sharing an info share `accepted`; only their continuations depend on the origin.
      if (std::find(seen_infos_.begin(), seen_infos_.end(), info) == seen_infos_.end()) {
        seen_infos_.push_back(info);
        info->accepted.or_into(words);
      }
      for (const Continuation& c : info->continuations) {
        walk_continuation(c, item.state, item.count, item.origin, words, budget);
      }
    }
  }
}

void MaskWalker::walk_continuation(const Continuation& c, int32_t item_state, int32_t item_count,
                                   const EarleySet* origin, std::span<uint32_t> words,
                                   CompileBudget& budget) {
  const detail::TokenTrie& trie = g_.index->trie();
  const auto& nodes = trie.nodes();
  const detail::TrieNode& base = nodes[static_cast<size_t>(c.node)];
  const int32_t count = c.relative ? g_.add_iterations(item_state, item_count, c.count) : c.count;
  const EarleyItem seed{c.state, count, origin};
  builder_.start(levels_[0], std::span<const EarleyItem>(&seed, 1));
  for (size_t i = static_cast<size_t>(c.node) + 1; i < base.subtree_end;) {
    const detail::TrieNode& node = nodes[i];
    const size_t level = node.depth - base.depth;
    if (!builder_.step(levels_[level - 1], node.byte, levels_[level])) {
      i = node.subtree_end;
      continue;
    }
    budget.charge(static_cast<int64_t>(levels_[level].items.size()), "token mask walks");
    for (int32_t id : trie.tokens_at(i)) words[static_cast<size_t>(id) / 32] |= 1u << (id % 32);
    ++i;
  }
}

}  // namespace llms::structured
