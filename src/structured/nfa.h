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
#include <vector>

#include "grammar_ast.h"
#include "structured/compile_budget.h"

namespace llms::structured {

struct NfaEdge {
  int32_t to = -1;
  int32_t call = -1;  // >= 0: a call of that rule (by rule index)
  uint8_t lo = 0;     // byte range, when call < 0 and !epsilon
  uint8_t hi = 0;
  bool epsilon = false;
};

struct Nfa {
  std::vector<std::vector<NfaEdge>> out;  // edges leaving each state
  int32_t start = 0;
  int32_t accept = 0;
};

// Which rules are callable: root, one rule on every reference cycle (the targets of DFS back
// edges), and rules whose inlined size is large and that are referenced more than once.
// Unreachable rules are neither callable nor inlined anywhere.
std::vector<uint8_t> plan_callable_rules(const Grammar& grammar, CompileBudget& budget);

// The NFA of callable rule `rule`, references to non-callable rules inlined.
Nfa build_rule_nfa(const Grammar& grammar, int32_t rule, const std::vector<uint8_t>& callable,
                   CompileBudget& budget);

}  // namespace llms::structured
