// structured/state_masks: what one automaton state decides about every token on its own.
//
// For a state s (and, in a counted region, the item's count), walk the token trie by s's byte
// edges only (no calls, no returns):
// - a token read to its end is allowed wherever an item is in s (the state can still finish
//   its rule, and the rest of the parse is complete-able by construction): `accepted`;
// - a walk that passes a state that may end its rule or call another needs the parser for the
//   tokens below that trie node: a `continuation`, walked per mask with the real parse;
// - a walk that dies otherwise rejects the whole subtree, skipped in one jump.
// Before walking, character classes give whole families of tokens at once: if every string of
// up to n class-k characters stays alive from s, all class-k tokens of at most n characters
// are accepted (precomputed bitsets) and subtrees made only of them are skipped. Inside a JSON
// string that is nearly the whole vocabulary, so the walk visits only the rest.
//
// Counts: a walk position carries the count of its region, relative to the item's count while
// it stays in the item's region (guards then read the abstracted key: iterations still needed
// before an exit, iterations still allowed), absolute after a reset.
#include <algorithm>
#include <mutex>
#include <set>
#include <tuple>

#include "compiled_grammar.h"
#include "token_trie.h"

namespace llms::structured {
namespace {

// How far a count is from its region's bounds, capped past what one token can change.
struct CountKey {
  int32_t need = 0;  // iterations still to complete before an exit is allowed
  int32_t room = 0;  // further iterations allowed after the current one
};

struct View {
  int32_t state = -1;
  int32_t count = 0;
  bool relative = false;

  bool operator==(const View&) const = default;
  bool operator<(const View& o) const {
    return std::tie(state, count, relative) < std::tie(o.state, o.count, o.relative);
  }
};

class Walker {
 public:
  Walker(const CompiledGrammar& g, CountKey key) : g_(g), key_(key) {}

  // The largest relative count a guard was tested at so far (-1: none). The walk read the key
  // only through `count < room` and `count >= need` at counts up to this, so any key equal to
  // this one after capping both parts at max_tested() + 1 gives the very same walk.
  int32_t max_tested() const { return max_tested_; }

  // Appends the views a transition code leads to from v (none when there is no edge).
  void step(const View& v, int32_t code, std::vector<View>& out) const {
    if (code >= 0) {
      const int32_t r = g_.region_of(code);
      if (r >= 0 && r == g_.region_of(v.state)) {
        out.push_back(View{code, v.count, v.relative});
      } else {
        out.push_back(View{code, 0, false});
      }
      return;
    }
    if (code == kNoMove) return;
    const GuardedMove& m = g_.guarded_move(code);
    const int32_t r = g_.region_of(v.state);
    size_t variant = kLoopAndExit;
    if (r >= 0) {
      bool loop_ok = false;
      bool exit_ok = false;
      if (v.relative) {
        max_tested_ = std::max(max_tested_, v.count);
        loop_ok = v.count < key_.room;
        exit_ok = v.count >= key_.need;
      } else {
        const RegionInfo& region = g_.regions[static_cast<size_t>(r)];
        loop_ok = region.max == kUnbounded || v.count + 1 < region.max;
        exit_ok = v.count + 1 >= region.min;
      }
      variant = loop_ok ? (exit_ok ? kLoopAndExit : kLoopOnly) : kExitOnly;
    }
    for (uint32_t i = 0; i < m.size[variant]; ++i) {
      const MoveTarget& t = g_.move_target(m.begin[variant] + i);
      if (g_.region_of(t.target) < 0) {
        out.push_back(View{t.target, 0, false});
        continue;
      }
      switch (t.action) {
        case CountAction::kKeep:
          out.push_back(View{t.target, v.count, v.relative});
          break;
        case CountAction::kIncrement:
          // Relative counts stay exact offsets (saturation is applied when resolved); absolute
          // ones saturate like CompiledGrammar::for_each_move.
          out.push_back(View{t.target,
                             v.relative ? v.count + 1 : g_.add_iterations(v.state, v.count, 1),
                             v.relative});
          break;
        case CountAction::kReset:
          out.push_back(View{t.target, 0, false});
          break;
      }
    }
  }

  void step_byte(const View& v, uint8_t byte, std::vector<View>& out) const {
    step(v, g_.code(v.state, byte), out);
  }

 private:
  const CompiledGrammar& g_;
  CountKey key_;
  mutable int32_t max_tested_ = -1;
};

void sort_unique(std::vector<View>& views) {
  if (views.size() < 2) return;
  std::sort(views.begin(), views.end());
  views.erase(std::unique(views.begin(), views.end()), views.end());
}

// How many characters of class k the start views absorb: every string of at most that many
// stays alive by byte edges (from at least one view). Breadth-first over the view sets
// reachable by class characters: the first set (at depth j) with a dying character bounds the
// answer to j; if no new set appears, any length lives (detail::kAllChars). Search past
// kMaxCountedChars levels or kMaxSets sets stops there (a lower bound is still exact: the
// trie walk decides the rest).
int absorbed_chars(const CompiledGrammar& g, const Walker& walker, const std::vector<View>& start,
                   int k, CompileBudget& budget) {
  // The pattern classes search less: inside a counted `(\S+\s+){0,n}` their view sets multiply
  // with the words a text completes (each its own count), and a search of 512 sets cost more
  // than the trie walk it saves (o21053: 15-19 ms vs 7 ms).
  const size_t kMaxSets = k >= detail::kFirstPatternClass ? 64 : 512;
  const auto& sequences = detail::TokenTrie::class_sequences(k);
  std::vector<std::vector<View>> level{start};
  std::set<std::vector<View>> seen{start};
  std::vector<std::vector<View>> next_level;
  std::vector<std::vector<View>> frontier;  // per byte range position: the possible view sets
  std::vector<std::vector<View>> next_frontier;
  std::vector<View> moved;
  for (int depth = 0; depth < detail::kMaxCountedChars; ++depth) {
    next_level.clear();
    for (const std::vector<View>& q : level) {
      for (const ByteSequence& seq : sequences) {
        frontier.assign(1, q);
        for (int i = 0; i < seq.length; ++i) {
          const ByteRange& range = seq.ranges[static_cast<size_t>(i)];
          next_frontier.clear();
          for (int c = g.byte_class[range.lo]; c <= g.byte_class[range.hi]; ++c) {
            for (const std::vector<View>& f : frontier) {
              moved.clear();
              for (const View& v : f) {
                walker.step(v, g.row(v.state)[c], moved);
              }
              if (moved.empty()) return depth;
              budget.charge(static_cast<int64_t>(moved.size()), "token mask walks");
              sort_unique(moved);
              next_frontier.push_back(moved);
            }
          }
          std::sort(next_frontier.begin(), next_frontier.end());
          next_frontier.erase(std::unique(next_frontier.begin(), next_frontier.end()),
                              next_frontier.end());
          frontier.swap(next_frontier);
        }
        for (const std::vector<View>& t : frontier) {
          if (seen.insert(t).second) next_level.push_back(t);
        }
        if (seen.size() > kMaxSets) return depth;  // sets of this level are still unchecked
      }
    }
    if (next_level.empty()) return detail::kAllChars;
    level.swap(next_level);
  }
  return detail::kMaxCountedChars;
}

// Which tokens a walk decides: all; those of at most kShortTokenBytes bytes; or the longer ones
// (the walk then passes the shorter prefixes without recording them).
enum class WalkPart : uint8_t { kAll, kShort, kLong };

static_assert(std::tuple_size_v<decltype(StateMaskInfo::absorbed)> == detail::kNumTokenClasses);

// `tested` receives Walker::max_tested() of the walk. A long walk takes the absorbed character
// counts of the short walk of the same key (`short_info`) instead of searching them again.
std::unique_ptr<StateMaskInfo> compute_mask_info(const CompiledGrammar& g, int32_t state,
                                                 CountKey key, WalkPart part,
                                                 const StateMaskInfo* short_info,
                                                 CompileBudget& budget, int32_t& tested) {
  const detail::TokenTrie& trie = g.index->trie();
  std::vector<uint32_t> bits(static_cast<size_t>(trie.n_words()), 0);
  auto info = std::make_unique<StateMaskInfo>();
  const Walker walker(g, key);
  const std::vector<View> start{View{state, 0, g.region_of(state) >= 0}};

  std::array<int, detail::kNumTokenClasses> absorbed{};
  for (int k = 0; k < detail::kNumTokenClasses; ++k) {
    const auto kk = static_cast<size_t>(k);
    const int parent = detail::kClassParent[kk];
    bool inherited = false;
    if (part == WalkPart::kLong) {
      absorbed[kk] = short_info->absorbed[kk];
    } else if (parent >= 0 && absorbed[static_cast<size_t>(parent)] > 0) {
      // A subclass absorbs at least as much (token_trie.h).
      absorbed[kk] = absorbed[static_cast<size_t>(parent)];
      inherited = true;
    } else {
      absorbed[kk] = absorbed_chars(g, walker, start, k, budget);
    }
    info->absorbed[kk] = static_cast<int16_t>(absorbed[kk]);
    // The short walk owns the class tokens (an inherited class's are among its parent's); the
    // long walk only skips the same subtrees.
    if (absorbed[kk] == 0 || part == WalkPart::kLong || inherited) continue;
    const auto class_bits = trie.class_tokens(k, absorbed[kk]);
    for (size_t i = 0; i < bits.size(); ++i) bits[i] |= class_bits[i];
  }
  bool any_absorbed = false;
  for (int n : absorbed) any_absorbed |= n > 0;
  // Where the walk goes on after node i if the absorbed classes accept its whole subtree (a
  // class absorbed without limit: past the whole run of such siblings), else 0.
  auto covered_until = [&](size_t i, const detail::TrieNode& node) -> size_t {
    if (!any_absorbed) return 0;
    for (int k = 0; k < detail::kNumTokenClasses; ++k) {
      const int n = absorbed[static_cast<size_t>(k)];
      if (n == 0 || !(node.class_all & (1u << k))) continue;
      if (n == detail::kAllChars) return trie.class_run_end(k, i);
      if (trie.class_max_chars(i, k) <= n) return node.subtree_end;
    }
    return 0;
  };

  // Depth-first over the trie; each depth holds the views the prefix may be in (one, unless a
  // move split a subset).
  const auto& nodes = trie.nodes();
  std::vector<std::vector<View>> stack(static_cast<size_t>(trie.max_depth()) + 1);
  stack[0] = start;
  constexpr int kShort = detail::kShortTokenBytes;
  for (size_t i = 1; i < nodes.size();) {
    const detail::TrieNode& node = nodes[i];
    if ((part == WalkPart::kShort && node.depth > kShort) ||
        (part == WalkPart::kLong && trie.subtree_depth(i) <= kShort)) {
      i = node.subtree_end;
      continue;
    }
    if (const size_t end = covered_until(i, node); end != 0) {
      i = end;
      continue;
    }
    std::vector<View>& here = stack[node.depth];
    const std::vector<View>& parent = stack[node.depth - 1u];
    here.clear();
    if (parent.size() == 1) {  // the common case: one position, usually a plain move
      const View& v = parent[0];
      const int32_t code = g.code(v.state, node.byte);
      if (code >= 0 && g.region_of(code) < 0) {
        here.push_back(View{code, 0, false});
      } else {
        walker.step(v, code, here);
      }
    } else {
      for (const View& v : parent) walker.step_byte(v, node.byte, here);
    }
    if (here.empty()) {
      i = node.subtree_end;
      continue;
    }
    budget.charge(static_cast<int64_t>(here.size()), "token mask walks");
    sort_unique(here);
    const bool decides = part != WalkPart::kLong || node.depth > kShort;
    if (decides) {
      for (int32_t id : trie.tokens_at(i)) bits[static_cast<size_t>(id) / 32] |= 1u << (id % 32);
    }
    if (decides && node.subtree_end > i + 1) {
      for (const View& t : here) {
        if (g.flags_of(t.state) & (kFinal | kHasCalls)) {
          info->continuations.push_back(
              Continuation{static_cast<int32_t>(i), t.state, t.count, t.relative});
          info->continuations_read_count |= t.relative;
        }
      }
    }
    ++i;
  }
  info->accepted = TokenSet::from_bits(bits);
  tested = walker.max_tested();
  return info;
}

}  // namespace

CompiledGrammar::CompiledGrammar() = default;

CompiledGrammar::~CompiledGrammar() {
  if (!mask_infos_) return;
  for (int32_t s = 0; s < automaton->n_states(); ++s) delete (*mask_infos_)[static_cast<size_t>(s)];
}

void CompiledGrammar::init_mask_cache() {
  mask_infos_ = std::make_unique<ReservedArray<const StateMaskInfo*>>(automaton->max_states());
}

int64_t CompiledGrammar::cached_mask_infos() const {
  int64_t n = 0;
  for (int32_t s = 0; s < automaton->n_states(); ++s) {
    const StateMaskInfo*& slot = (*mask_infos_)[static_cast<size_t>(s)];
    n += std::atomic_ref<const StateMaskInfo*>(slot).load(std::memory_order_acquire) != nullptr;
  }
  std::shared_lock lock(counted_mutex_);
  for (const auto& infos : counted_infos_) {
    for (const auto& [state, entries] : infos) n += static_cast<int64_t>(entries.size());
  }
  return n;
}

const StateMaskInfo& CompiledGrammar::mask_info(int32_t state, int32_t count,
                                                CompileBudget& budget) const {
  const int32_t r = region_of(state);
  if (r < 0) {
    std::atomic_ref<const StateMaskInfo*> slot((*mask_infos_)[static_cast<size_t>(state)]);
    const StateMaskInfo* cached = slot.load(std::memory_order_acquire);
    if (cached != nullptr) return *cached;
    int32_t tested = -1;
    std::unique_ptr<StateMaskInfo> computed =
        compute_mask_info(*this, state, CountKey{}, WalkPart::kAll, nullptr, budget, tested);
    const StateMaskInfo* expected = nullptr;
    if (slot.compare_exchange_strong(expected, computed.get(), std::memory_order_acq_rel)) {
      return *computed.release();
    }
    return *expected;  // another thread published first; ours is dropped
  }
  return *counted_info(state, count, false, budget).info;
}

const StateMaskInfo* CompiledGrammar::long_mask_info(int32_t state, int32_t count,
                                                     CompileBudget& budget) const {
  if (region_of(state) < 0 || index->trie().max_depth() <= detail::kShortTokenBytes) {
    return nullptr;
  }
  return counted_info(state, count, true, budget).info.get();
}

const CompiledGrammar::CountedInfo& CompiledGrammar::counted_info(int32_t state, int32_t count,
                                                                  bool long_part,
                                                                  CompileBudget& budget) const {
  const uint64_t key_bits = count_key(state, count);
  const auto need = static_cast<int32_t>(key_bits >> 32);
  const auto room = static_cast<int32_t>(key_bits & 0xFFFFFFFF);
  auto& infos = counted_infos_[long_part ? 1 : 0];
  // An entry serves every key that agrees with its own once both are capped at its bound.
  auto find = [&]() -> const CountedInfo* {
    auto it = infos.find(state);
    if (it == infos.end()) return nullptr;
    for (const CountedInfo& e : it->second) {
      if (std::min(need, e.bound) == e.need && std::min(room, e.bound) == e.room) return &e;
    }
    return nullptr;
  };
  {
    std::shared_lock lock(counted_mutex_);
    if (const CountedInfo* cached = find()) return *cached;
  }
  // The long walk skips what the short walk's absorbed classes cover, so it also depends on
  // every count the short walk tested: its bound is at least the short entry's.
  const CountedInfo* short_entry = long_part ? &counted_info(state, count, false, budget) : nullptr;
  int32_t tested = -1;
  std::unique_ptr<const StateMaskInfo> computed = compute_mask_info(
      *this, state, CountKey{need, room}, long_part ? WalkPart::kLong : WalkPart::kShort,
      short_entry != nullptr ? short_entry->info.get() : nullptr, budget, tested);
  std::unique_lock lock(counted_mutex_);
  if (const CountedInfo* cached = find()) return *cached;  // another thread published first
  const int32_t bound = std::max(tested + 1, short_entry != nullptr ? short_entry->bound : 0);
  std::deque<CountedInfo>& entries = infos[state];
  entries.push_back(
      CountedInfo{std::min(need, bound), std::min(room, bound), bound, std::move(computed)});
  return entries.back();
}

}  // namespace llms::structured
