// structured/dfa: the rules' NFAs determinized on demand into one automaton over byte classes
// and calls, with counted regions.
//
// Bytes are grouped into classes (intervals no NFA edge splits), shared by every rule of a
// grammar, so a transition row has n_classes entries instead of 256. Call edges are determinized
// like symbols of their own. The result is deterministic on bytes and calls; the Earley parser
// adds the nondeterminism of "call here or read a byte here" on top.
//
// Lazy: a state is a set of NFA states of one rule; it is made when some transition first leads
// to it, and its row (transitions, calls, flags) is computed when first read. A schema whose
// eager automaton would have 100,000 states needs no more than its NFA and a bounded warm-up at
// compile time, and a request builds only the states its text and its token walks pass. Rows are
// computed under a mutex
// and published with a release store; readers never lock (util/reserved_array: the tables are
// reserved whole up front, so they never move while the automaton grows). A hostile pattern cannot
// grow it without bound: every state, guarded move and call is charged to the automaton's own work
// limit, and past it the read that needed a new state throws llms::Error(kInvalidArgument)
// "constraint too complex".
//
// Only live NFA states enter a set (on a path from the rule's start to its end, calls of
// unproductive rules dropped), so every state of the automaton can reach a final state.
//
// Counted regions (nfa.h): a state lies in at most one region and an Earley item in it carries
// that region's iteration count. A transition that completes an iteration depends on the count
// through two guards (loop allowed: count + 1 < max; exit allowed: count + 1 >= min), so it has
// up to three variants, each with a count action (keep, increment, reset to zero). Where one
// set would need two counts at once (states of two regions, or of one region at two counts, as
// after a space in `(\S+\s+){0,99}`), it is split: the move leads to several states, each with
// its own count action, and the parser keeps one item per part. So a counted repetition never
// has to be expanded.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "nfa.h"
#include "util/reserved_array.h"

namespace llms::structured {

struct ByteClasses {
  std::array<uint8_t, 256> of{};  // byte -> class
  int32_t n_classes = 1;
};

// The coarsest partition of bytes into intervals that every byte range of the NFAs respects.
ByteClasses compute_byte_classes(const std::vector<Nfa>& nfas);

enum class CountAction : uint8_t { kKeep, kIncrement, kReset };

// The guard outcomes of a completed iteration, as an index into GuardedMove.
enum GuardVariant : uint8_t { kLoopAndExit = 0, kLoopOnly = 1, kExitOnly = 2 };

struct MoveTarget {
  int32_t target = -1;
  CountAction action = CountAction::kKeep;
};

// A transition whose targets or counts depend on the item's count, or that leads to several
// states: per GuardVariant, the targets move_target(begin + i) for i < size.
struct GuardedMove {
  std::array<uint32_t, 3> begin{};
  std::array<uint32_t, 3> size{};
};

// Transition codes in rows, call targets and rule starts: -1 no edge; >= 0 a plain move to that
// state (the count is kept if the target lies in the same region as the source, else reset);
// <= -2 the GuardedMove at index -2 - code.
inline constexpr int32_t kNoMove = -1;
inline int32_t guarded_code(size_t index) { return -2 - static_cast<int32_t>(index); }
inline size_t guarded_index(int32_t code) { return static_cast<size_t>(-2 - code); }

struct CallEdge {
  int32_t rule = 0;
  int32_t target = 0;  // a transition code
};

enum StateFlags : uint8_t {
  kFinal = 1,     // the state's rule may end here
  kHasBytes = 2,  // some byte edge leaves the state
  kHasCalls = 4,  // some call edge leaves the state
};

// One rule as the automaton reads it.
struct RuleNfa {
  Nfa nfa;                    // call edges name grammar rules (LazyDfa's call_rule maps them)
  std::vector<uint8_t> live;  // per NFA state: on a path from start to accept
  int32_t region_base = 0;    // the automaton's region number of the NFA's region 0
};

class LazyDfa {
 public:
  // `rules` are numbered as given; call_rule maps a call edge's grammar rule to one of them
  // (-1: the call is dropped). Builds every rule's start move. Throws like a read (below) if
  // that alone passes max_work.
  LazyDfa(std::vector<RuleNfa> rules, std::vector<int32_t> call_rule, const ByteClasses& classes,
          int64_t max_work);
  ~LazyDfa();
  LazyDfa(const LazyDfa&) = delete;
  LazyDfa& operator=(const LazyDfa&) = delete;

  int32_t start_of(int32_t rule) const { return starts_[static_cast<size_t>(rule)]; }
  int32_t n_states() const { return n_states_.load(std::memory_order_acquire); }  // made so far

  // Facts fixed when a state is made.
  bool is_final(int32_t s) const { return bits(s).load(std::memory_order_relaxed) & kFinal; }
  int32_t region_of(int32_t s) const { return region_[static_cast<size_t>(s)]; }
  int32_t rule_of(int32_t s) const { return rule_[static_cast<size_t>(s)]; }

  // Facts of the state's row, computed on first read (these may throw, see above).
  uint8_t flags_of(int32_t s) const { return ready(s) & ~kReady; }
  const int32_t* row(int32_t s) const {
    ready(s);
    return &rows_[static_cast<size_t>(s) * static_cast<size_t>(n_classes_)];
  }
  std::span<const CallEdge> calls_of(int32_t s) const {
    ready(s);
    const CallRange& r = calls_of_[static_cast<size_t>(s)];
    return {&calls_[r.begin], static_cast<size_t>(r.size)};
  }
  const GuardedMove& guarded_move(int32_t code) const { return guarded_[guarded_index(code)]; }
  const MoveTarget& move_target(uint32_t i) const { return move_targets_[i]; }

  // Computes the row of every state reachable from the rules' starts (tests, diagnostics).
  void build_all() const;
  // Computes rows in the order states were made (breadth first from the starts) until every
  // state has one, `time` has passed or a quarter of the work limit is spent (what is left
  // serves the states texts and walks need).
  void build_for(std::chrono::steady_clock::duration time) const;

  // The largest number of states max_work allows (what per-state caches are sized for).
  size_t max_states() const { return max_states_; }
  // Some read ran past the budget: later reads that need new states will fail too.
  bool exhausted() const { return exhausted_.load(std::memory_order_relaxed); }

 private:
  static constexpr uint8_t kReady = 0x80;  // the row, calls and flags are written
  struct CallRange {
    uint32_t begin;
    uint32_t size;
  };
  struct Builder;  // the determinizer's own state, touched under mutex_ only

  // A state's StateFlags and kReady: kFinal set when it is made, the rest with kReady (release).
  std::atomic_ref<uint8_t> bits(int32_t s) const {
    return std::atomic_ref<uint8_t>(bits_[static_cast<size_t>(s)]);
  }
  // The state's flags | kReady, its row computed first if need be.
  uint8_t ready(int32_t s) const {
    const uint8_t b = bits(s).load(std::memory_order_acquire);
    return (b & kReady) ? b : expand(s);
  }
  uint8_t expand(int32_t s) const;

  int32_t n_classes_ = 1;
  size_t max_states_ = 0;
  std::vector<int32_t> starts_;
  mutable std::atomic<int32_t> n_states_{0};
  mutable std::atomic<bool> exhausted_{false};
  // Reserved for the most the work limit allows; written under mutex_ only.
  // Per state, in separate arrays so the walks' hot reads stay compact.
  ReservedArray<uint8_t> bits_;
  ReservedArray<int32_t> region_;  // -1: none
  ReservedArray<int32_t> rule_;
  ReservedArray<CallRange> calls_of_;
  ReservedArray<int32_t> rows_;  // n_classes codes per state
  ReservedArray<GuardedMove> guarded_;
  ReservedArray<MoveTarget> move_targets_;
  ReservedArray<CallEdge> calls_;
  mutable std::mutex mutex_;
  std::unique_ptr<Builder> builder_;
};

}  // namespace llms::structured
