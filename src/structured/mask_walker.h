// structured/mask_walker: the token mask of one Earley set.
//
// mask = OR over the set's items of what their state decides alone (StateMaskInfo::accepted),
// plus, for each continuation of an item's state (a trie node where the state may end its rule
// or call another), the tokens below that node that the real parse accepts: the walker starts a
// scratch Earley set from the item advanced to that state and walks the node's subtree byte by
// byte, skipping every subtree where no item survives.
//
// Scratch sets live in the walker (one per trie depth, reused), so a mask allocates nothing
// once warm. One walker per matcher; not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "earley.h"

namespace llms::structured {

class MaskWalker {
 public:
  explicit MaskWalker(const CompiledGrammar& grammar);

  // ORs the allowed text tokens after `set` into words (mask layout). Stop tokens are not
  // handled here. Work beyond the budget (one mask's: CompiledGrammar::mask_limits) throws
  // llms::Error(kInvalidArgument).
  void fill(const EarleySet& set, std::span<uint32_t> words, CompileBudget& budget);

 private:
  void walk_continuation(const Continuation& c, int32_t item_state, int32_t item_count,
                         const EarleySet* origin, std::span<uint32_t> words, CompileBudget& budget);

  const CompiledGrammar& g_;
  EarleyBuilder builder_;
  std::unique_ptr<EarleySet[]> levels_;  // levels_[d]: the set d bytes below a continuation node
  std::vector<const StateMaskInfo*> seen_infos_;
};

}  // namespace llms::structured
