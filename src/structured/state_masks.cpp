// structured/state_masks: what one automaton state decides about every token on its own.
//
// For a state s, walk the token trie by s's byte edges only (no calls, no returns):
// - a token read to its end is allowed wherever an item is in s (the state can still finish
//   its rule, and the rest of the parse is complete-able by construction): `accepted`;
// - a walk that passes a state that may end its rule or call another needs the parser for the
//   tokens below that trie node: a `continuation`, walked per mask with the real parse;
// - a walk that dies otherwise rejects the whole subtree, skipped in one jump.
// Before walking, character classes give whole families of tokens at once: if every string of
// up to n class-k characters stays alive from s, all class-k tokens of at most n characters
// are accepted (precomputed bitsets) and subtrees made only of them are skipped. Inside a JSON
// string that is nearly the whole vocabulary, so the walk visits only the rest.
#include <algorithm>

#include "compiled_grammar.h"
#include "token_trie.h"

namespace llms::structured {
namespace {

// How many characters of class k state s absorbs: every string of at most that many stays
// alive by byte edges. detail::kAllChars when unbounded (the set of states reached repeats).
int absorbed_chars(const CompiledGrammar& g, int32_t s, int k) {
  const auto& sequences = detail::TokenTrie::class_sequences(k);
  std::vector<int32_t> current{s};
  std::vector<int32_t> reached;
  std::vector<int32_t> frontier;
  std::vector<int32_t> next_frontier;
  const auto n_classes = static_cast<size_t>(g.n_classes);
  for (int n = 1; n <= detail::kMaxCountedChars; ++n) {
    reached.clear();
    for (int32_t q : current) {
      for (const ByteSequence& seq : sequences) {
        frontier.assign(1, q);
        for (int i = 0; i < seq.length; ++i) {
          const ByteRange& range = seq.ranges[static_cast<size_t>(i)];
          next_frontier.clear();
          for (int c = g.byte_class[range.lo]; c <= g.byte_class[range.hi]; ++c) {
            for (int32_t f : frontier) {
              const int32_t t = g.next[static_cast<size_t>(f) * n_classes + static_cast<size_t>(c)];
              if (t < 0) return n - 1;
              next_frontier.push_back(t);
            }
          }
          std::sort(next_frontier.begin(), next_frontier.end());
          next_frontier.erase(std::unique(next_frontier.begin(), next_frontier.end()),
                              next_frontier.end());
          frontier.swap(next_frontier);
        }
        reached.insert(reached.end(), frontier.begin(), frontier.end());
      }
    }
    std::sort(reached.begin(), reached.end());
    reached.erase(std::unique(reached.begin(), reached.end()), reached.end());
    if (reached == current) return detail::kAllChars;
    current.swap(reached);
  }
  return detail::kMaxCountedChars;
}

std::unique_ptr<StateMaskInfo> compute_mask_info(const CompiledGrammar& g, int32_t state) {
  const detail::TokenTrie& trie = g.index->trie();
  std::vector<uint32_t> bits(static_cast<size_t>(trie.n_words()), 0);
  auto info = std::make_unique<StateMaskInfo>();

  std::array<int, detail::kNumTokenClasses> absorbed{};
  for (int k = 0; k < detail::kNumTokenClasses; ++k) {
    absorbed[static_cast<size_t>(k)] = absorbed_chars(g, state, k);
    if (absorbed[static_cast<size_t>(k)] == 0) continue;
    const auto class_bits = trie.class_tokens(k, absorbed[static_cast<size_t>(k)]);
    for (size_t i = 0; i < bits.size(); ++i) bits[i] |= class_bits[i];
  }
  auto covered = [&](const detail::TrieNode& node) {
    for (int k = 0; k < detail::kNumTokenClasses; ++k) {
      const int n = absorbed[static_cast<size_t>(k)];
      if (n == 0 || !(node.class_all & (1u << k))) continue;
      if (n == detail::kAllChars || node.class_max_chars[static_cast<size_t>(k)] <= n) return true;
    }
    return false;
  };

  const auto& nodes = trie.nodes();
  std::vector<int32_t> stack(static_cast<size_t>(trie.max_depth()) + 1, -1);
  stack[0] = state;
  for (size_t i = 1; i < nodes.size();) {
    const detail::TrieNode& node = nodes[i];
    if (covered(node)) {
      i = node.subtree_end;
      continue;
    }
    const int32_t t = g.step(stack[node.depth - 1u], node.byte);
    if (t < 0) {
      i = node.subtree_end;
      continue;
    }
    stack[node.depth] = t;
    for (int32_t id : trie.tokens_at(node)) bits[static_cast<size_t>(id) / 32] |= 1u << (id % 32);
    if (node.subtree_end > i + 1 && (g.flags[static_cast<size_t>(t)] & (kFinal | kHasCalls))) {
      info->continuations.push_back(Continuation{static_cast<int32_t>(i), t});
    }
    ++i;
  }
  info->accepted = TokenSet::from_bits(bits);
  return info;
}

}  // namespace

CompiledGrammar::CompiledGrammar() = default;

CompiledGrammar::~CompiledGrammar() {
  if (!mask_infos_) return;
  for (int32_t s = 0; s < n_states; ++s) delete mask_infos_[static_cast<size_t>(s)].load();
}

void CompiledGrammar::init_mask_cache() {
  mask_infos_ =
      std::make_unique<std::atomic<const StateMaskInfo*>[]>(static_cast<size_t>(n_states));
}

const StateMaskInfo& CompiledGrammar::mask_info(int32_t state) const {
  std::atomic<const StateMaskInfo*>& slot = mask_infos_[static_cast<size_t>(state)];
  const StateMaskInfo* cached = slot.load(std::memory_order_acquire);
  if (cached != nullptr) return *cached;
  std::unique_ptr<StateMaskInfo> computed = compute_mask_info(*this, state);
  const StateMaskInfo* expected = nullptr;
  if (slot.compare_exchange_strong(expected, computed.get(), std::memory_order_acq_rel)) {
    return *computed.release();
  }
  return *expected;  // another thread published first; ours is dropped
}

}  // namespace llms::structured
