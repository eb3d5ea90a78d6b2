// structured/dfa: subset construction of a rule's NFA into a DFA over byte classes and calls,
// with counted regions.
//
// Bytes are grouped into classes (intervals no NFA edge splits), shared by every rule of a
// grammar, so a transition row has n_classes entries instead of 256. Call edges are determinized
// like symbols of their own. The result is deterministic on bytes and calls; the Earley parser
// adds the nondeterminism of "call here or read a byte here" on top.
//
// Counted regions (nfa.h): a DFA state lies in at most one region and an Earley item in it
// carries that region's iteration count. A transition that completes an iteration depends on
// the count through two guards (loop allowed: count + 1 < max; exit allowed: count + 1 >= min),
// so it has up to three variants, each with a count action (keep, increment, reset to zero).
// Where one subset would need two counts at once (states of two regions, or of one region at
// two counts, as after a space in `(\S+\s+){0,99}`), it is split: the move leads to several
// DFA states, each with its own count action, and the parser keeps one item per part. So a
// counted repetition never has to be expanded.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "nfa.h"
#include "structured/compile_budget.h"

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
// states: per GuardVariant, the targets Dfa::move_targets[begin, begin + size).
struct GuardedMove {
  std::array<uint32_t, 3> begin{};
  std::array<uint32_t, 3> size{};
};

// Transition codes in Dfa::next, call targets and rule starts: -1 no edge; >= 0 a plain move to
// that state (the count is kept if the target lies in the same region as the source, else
// reset); <= -2 the GuardedMove at index -2 - code.
inline constexpr int32_t kNoMove = -1;
inline int32_t guarded_code(size_t index) { return -2 - static_cast<int32_t>(index); }
inline size_t guarded_index(int32_t code) { return static_cast<size_t>(-2 - code); }

struct Dfa {
  int32_t n_states = 0;
  int32_t start = kNoMove;    // the code entering the rule (several states if it splits)
  std::vector<int32_t> next;  // n_states * n_classes codes
  // The distinct byte transition codes of each state (rows repeat a few targets many times):
  // byte_codes[byte_code_begin[s], byte_code_begin[s + 1]). What graph analyses walk.
  std::vector<int32_t> byte_code_begin{0};
  std::vector<int32_t> byte_codes;
  std::vector<std::vector<std::pair<int32_t, int32_t>>> calls;  // per state: (rule, code)
  std::vector<uint8_t> is_final;
  std::vector<int32_t> region;  // per state: region index into `regions`, or -1
  std::vector<NfaRegion> regions;
  std::vector<GuardedMove> guarded;
  std::vector<MoveTarget> move_targets;
};

Dfa determinize(const Nfa& nfa, const ByteClasses& classes, CompileBudget& budget);

}  // namespace llms::structured
