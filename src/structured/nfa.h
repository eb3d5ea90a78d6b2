// structured/nfa: Thompson automata over bytes, with call edges to other rules.
//
// Each rule that stays a rule of the parser (a "callable" rule: root, recursive rules cut so
// that no cycle remains, and large rules shared by many callers) becomes one NFA whose edges are
// byte ranges, epsilons, or calls. References to every other rule are inlined, so most grammars
// (every non-recursive one) become a single automaton and the parser has little to do.
//
// Construction is iterative (an explicit stack) so expression depth never touches the C++ stack.
// Every state created is charged to the CompileBudget, which is what refuses `a{10000}{10000}`.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "grammar_ast.h"
#include "structured/compile_budget.h"

namespace llms::structured {

// A bounded repetition X{m,n} with many copies is not expanded: X is built once, inside a
// "counted region", and the parser counts iterations. Entering the region starts the count at
// 0; the loop edge (X again) is allowed while count + 1 < max; the exit edge while
// count + 1 >= min. Only a body that cannot be empty qualifies (every iteration reads a byte).
inline constexpr int64_t kMaxExpandedCopies = 24;  // more copies than this: a counted region
// A body of one character set (JSON Schema's whitespace `[ \t\n\r]{0,20}`, referenced before
// and after every token of a large schema) is counted past this many copies: each expanded
// reference cost two states a copy, most of a large schema's automaton, where a counted one
// costs three states in all; its masks cost the same either way.
inline constexpr int64_t kMaxExpandedSetCopies = 4;

enum class NfaEdgeKind : uint8_t { kByte, kEpsilon, kCall, kEnter, kLoop, kExit };

struct NfaEdge {
  int32_t to = -1;
  int32_t call = -1;    // kCall: the rule called (by rule index)
  int32_t region = -1;  // kEnter, kLoop, kExit: the region
  uint8_t lo = 0;       // kByte: the byte range
  uint8_t hi = 0;
  NfaEdgeKind kind = NfaEdgeKind::kEpsilon;
};

struct NfaRegion {
  int32_t min = 0;
  int32_t max = 0;    // kUnbounded allowed
  int32_t node = -1;  // the repetition's expression
};

// A rule's automaton. Edges leaving each state lie in one array (CSR): state s's edges are
// edges[begin[s], begin[s + 1]), so a search over 100,000 states reads memory in order and
// building them costs no allocation per state.
struct Nfa {
  std::vector<NfaEdge> edges;
  std::vector<uint32_t> begin{0};  // per state, and one past the last
  std::vector<int32_t> region_of;  // per state: its counted region or -1
  std::vector<NfaRegion> regions;
  int32_t start = 0;
  int32_t accept = 0;
  // Some state was built with no way on (an empty character set or choice). Without one, and
  // with every call's rule productive, every state leads on to accept: each one the builder
  // makes leads on to its fragment's target, and reaches it from the start.
  bool dead_leaf = false;

  size_t n_states() const { return begin.size() - 1; }
  std::span<const NfaEdge> out(int32_t s) const {
    const auto i = static_cast<size_t>(s);
    return std::span<const NfaEdge>(edges).subspan(begin[i], begin[i + 1] - begin[i]);
  }
};

// Per arena node: can the expression match the empty string (rule references resolved by a
// fixpoint). Children precede their parents in the arena, which the first pass relies on.
std::vector<uint8_t> nullable_nodes(const Grammar& grammar, CompileBudget& budget);

// Which rules referenced more than once and large when inlined stay callable.
enum class SharedRules : uint8_t {
  kLargeLeavesCalled,  // those that inline no other rule (a long key pattern, say)
  kLargeCalled,        // all of them
};

// Which rules are callable: root, one rule on every reference cycle (the targets of DFS back
// edges), and large shared rules per `shared`. Unreachable rules are neither callable nor
// inlined anywhere.
std::vector<uint8_t> plan_callable_rules(const Grammar& grammar, CompileBudget& budget,
                                         SharedRules shared);

// The UTF-8 byte sequences of the grammar's character sets, each computed on first use: a set
// inside an inlined rule is built once per copy and per rule NFA, and splitting a large set
// (a JSON string character) into sequences costs more than building its states.
class CharSetSequences {
 public:
  explicit CharSetSequences(const ExprArena& arena)
      : arena_(arena), sequences_(arena.sets.size()), done_(arena.sets.size(), 0) {}
  const std::vector<ByteSequence>& of(int32_t set);

 private:
  const ExprArena& arena_;
  std::vector<std::vector<ByteSequence>> sequences_;
  std::vector<uint8_t> done_;
};

// The NFA of callable rule `rule`, references to non-callable rules inlined (one copy per
// rule and continuation: references followed by the same state share it). nullopt when it
// would need more than max_states states.
std::optional<Nfa> build_rule_nfa(const Grammar& grammar, int32_t rule,
                                  const std::vector<uint8_t>& callable,
                                  const std::vector<uint8_t>& nullable,
                                  CharSetSequences& set_sequences, CompileBudget& budget,
                                  int64_t max_states);

}  // namespace llms::structured
