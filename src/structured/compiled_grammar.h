// structured/compiled_grammar: the linked automaton that every matcher of one constraint shares.
//
// Every callable rule is a DFA over byte classes (dfa.h, built on demand) whose states are
// numbered globally; a state has byte edges (its row), call edges (calls) and may be final (its
// rule can end there). Invariants the masks rely on for exactness: every state can reach a
// final state of its rule (dead NFA states never enter a state), every called rule is
// productive (derives some string), so every Earley item is a witness that the text so far can
// be completed.
//
// Immutable after compile except the automaton's rows (dfa.h) and the per-state mask cache,
// which is filled lazily and published through atomics (thread-safe, no lock on reads: a race
// computes an entry twice and one copy is dropped).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "dfa.h"
#include "grammar_ast.h"
#include "structured/grammar.h"
#include "token_set.h"
#include "token_trie.h"

namespace llms::structured {

class EarleySet;

struct RegionInfo {
  int32_t min = 0;
  int32_t max = 0;  // kUnbounded allowed
};

struct RuleInfo {
  std::string name;
  int32_t start = kNoMove;  // the transition code entering the rule (from state -1, count 0)
  bool nullable = false;
};

// Where a token walk by a state's own byte edges passes a state that may end its rule or call
// another: the tokens below that trie node (longer than it) need the parser to decide.
struct Continuation {
  int32_t node = 0;   // trie node index
  int32_t state = 0;  // the state after the node's bytes
  int32_t count = 0;  // the count there: absolute, or iterations added to the item's count
  bool relative = false;
};

// What a state's own byte edges decide about every token, independent of the parse around it.
struct StateMaskInfo {
  TokenSet accepted;  // tokens read entirely by byte edges from the state (always allowed)
  std::vector<Continuation> continuations;
  // Some continuation's count is relative to the item's: its walk depends on the item's count,
  // not only on this info.
  bool continuations_read_count = false;
  // Per character class (detail::TokenTrie): how many characters the state absorbs (a lower
  // bound: a search may stop early, and a subclass may take its parent's count).
  std::array<int16_t, detail::kNumTokenClasses> absorbed{};
};

class CompiledGrammar {
 public:
  CompiledGrammar();
  ~CompiledGrammar();
  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  // Per-state facts (dfa.h: a state's row is built on first read, which may throw
  // llms::Error "constraint too complex"). Parsers and walks read the automaton through these.
  uint8_t flags_of(int32_t state) const { return automaton->flags_of(state); }
  bool is_final(int32_t state) const { return automaton->is_final(state); }
  int32_t region_of(int32_t state) const { return automaton->region_of(state); }
  int32_t rule_of(int32_t state) const { return automaton->rule_of(state); }
  // The n_classes transition codes of a state.
  const int32_t* row(int32_t state) const { return automaton->row(state); }
  const GuardedMove& guarded_move(int32_t code) const { return automaton->guarded_move(code); }
  const MoveTarget& move_target(uint32_t i) const { return automaton->move_target(i); }
  std::span<const CallEdge> calls_of(int32_t state) const { return automaton->calls_of(state); }

  // A read ran past the automaton's budget (dfa.h): later requests should compile afresh.
  bool exhausted() const { return automaton->exhausted(); }

  // The transition code of a byte; follow it with for_each_move().
  int32_t code(int32_t state, uint8_t byte) const { return row(state)[byte_class[byte]]; }
  // Calls fn(target, count) for each state a transition code leads to from `state` (-1 for a
  // rule's start) for an item whose count is `count`.
  template <typename Fn>
  void for_each_move(int32_t code, int32_t state, int32_t count, Fn&& fn) const {
    const int32_t from_region = state < 0 ? -1 : region_of(state);
    if (code >= 0) {
      const int32_t r = region_of(code);
      fn(code, r >= 0 && r == from_region ? count : 0);
      return;
    }
    if (code == kNoMove) return;
    const GuardedMove& g = guarded_move(code);
    size_t variant = kLoopAndExit;
    int32_t saturation = 0;
    bool unbounded = false;
    if (from_region >= 0) {
      const RegionInfo& region = regions[static_cast<size_t>(from_region)];
      unbounded = region.max == kUnbounded;
      saturation = region.min > 0 ? region.min - 1 : 0;
      const bool loop_ok = unbounded || count + 1 < region.max;
      const bool exit_ok = count + 1 >= region.min;
      variant = loop_ok ? (exit_ok ? kLoopAndExit : kLoopOnly) : kExitOnly;
    }
    for (uint32_t i = 0; i < g.size[variant]; ++i) {
      const MoveTarget& m = move_target(g.begin[variant] + i);
      int32_t next_count = 0;
      if (region_of(m.target) >= 0) {
        if (m.action == CountAction::kKeep) {
          next_count = count;
        } else if (m.action == CountAction::kIncrement) {
          // Without a maximum, counts past min - 1 all allow the same futures: saturate.
          next_count = unbounded ? std::min(count + 1, saturation) : count + 1;
        }
      }
      fn(m.target, next_count);
    }
  }

  // The count after `added` more iterations of the region of `state`, from `count`.
  int32_t add_iterations(int32_t state, int32_t count, int32_t added) const {
    const int32_t r = region_of(state);
    if (r < 0) return 0;
    const RegionInfo& region = regions[static_cast<size_t>(r)];
    if (region.max != kUnbounded) return count + added;
    return std::min(count + added, region.min > 0 ? region.min - 1 : 0);
  }

  // The part of an item's count that its masks depend on: 0 outside counted regions, else the
  // iterations still needed before an exit and still allowed, each capped past the longest
  // token (within one token a count grows by at most the token's byte length).
  // Packed as need << 32 | room (a token may be 65,535 bytes, so each part needs 17 bits).
  uint64_t count_key(int32_t state, int32_t count) const {
    const int32_t r = region_of(state);
    if (r < 0) return 0;
    const int32_t cap = max_token_bytes + 1;
    const RegionInfo& region = regions[static_cast<size_t>(r)];
    const int32_t need = std::min(std::max(0, region.min - 1 - count), cap);
    const int32_t room = region.max == kUnbounded ? cap : std::min(region.max - 1 - count, cap);
    return static_cast<uint64_t>(need) << 32 | static_cast<uint32_t>(room);
  }

  // What `state` decides alone for an item of count `count`. Lazily computed and cached (per
  // state, and for states in a counted region per abstracted count: within one token the count
  // grows by at most the token's length, so counts far from both bounds behave alike; and an
  // entry serves every count whose key agrees with its own up to the largest count its walk
  // tested, so a region counted to 99 words is walked a few times, not 99); safe to call from
  // several threads. The computation is charged to `budget` (one mask's budget).
  // In a counted region this covers the tokens of at most detail::kShortTokenBytes bytes (a walk
  // over those tests small counts only, so its entry serves many counts); long_mask_info() the
  // longer ones, whose entries serve fewer counts but whose walks visit a few hundred tokens.
  const StateMaskInfo& mask_info(int32_t state, int32_t count, CompileBudget& budget) const;
  // nullptr outside counted regions and when no token is long.
  const StateMaskInfo* long_mask_info(int32_t state, int32_t count, CompileBudget& budget) const;
  void init_mask_cache();             // once the automaton is made
  int64_t cached_mask_infos() const;  // entries cached so far

  // What computing one mask may cost (MaskWalker::fill). Nested counted regions can make an
  // Earley set hold thousands of (state, count) items, each with its own token walk; a request
  // must not stall the engine for that, so the mask throws llms::Error(kInvalidArgument)
  // "constraint too complex" instead. Cached work is free, so a warm mask never trips it.
  CompileLimits mask_limits{std::chrono::milliseconds(1000), 50'000'000};

  std::shared_ptr<const TokenIndex> index;
  int32_t max_token_bytes = 0;  // the index's longest text token
  std::array<uint8_t, 256> byte_class{};
  std::optional<LazyDfa> automaton;  // made once at link time (in place: no indirection)
  std::vector<RegionInfo> regions;
  std::vector<RuleInfo> rules;
  int32_t root_rule = 0;
  // The Earley set before any text: shared by every matcher, so items that reach back to it are
  // equal across matchers.
  std::shared_ptr<const EarleySet> initial_set;

 private:
  // Per state outside counted regions (sized for the automaton's largest state count).
  std::unique_ptr<ReservedArray<const StateMaskInfo*>> mask_infos_;  // atomic_ref
  // Counted states: per state, entries keyed by (need, room) capped at `bound` (the walk tested
  // no count at or past it).
  struct CountedInfo {
    int32_t need = 0;
    int32_t room = 0;
    int32_t bound = 0;
    std::unique_ptr<const StateMaskInfo> info;
  };
  const CountedInfo& counted_info(int32_t state, int32_t count, bool long_part,
                                  CompileBudget& budget) const;
  mutable std::shared_mutex counted_mutex_;
  // [0]: short tokens, [1]: long tokens (mask_info, long_mask_info).
  // Deques: entries handed out stay where they are while others are added.
  mutable std::array<std::unordered_map<int32_t, std::deque<CountedInfo>>, 2> counted_infos_;
};

// Links a parsed grammar into a CompiledGrammar (compile_pipeline.cpp). `what` names the input
// in errors ("grammar", "regex", "choices").
std::shared_ptr<const CompiledGrammar> link_grammar(const Grammar& grammar,
                                                    std::shared_ptr<const TokenIndex> index,
                                                    CompileBudget& budget, const char* what);

}  // namespace llms::structured
