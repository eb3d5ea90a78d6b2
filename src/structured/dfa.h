// structured/dfa: subset construction of a rule's NFA into a DFA over byte classes and calls.
//
// Bytes are grouped into classes (intervals no NFA edge splits), shared by every rule of a
// grammar, so a transition row has n_classes entries instead of 256. Call edges are determinized
// like symbols of their own: from a DFA state, calling rule R leads to one DFA state. The result
// is deterministic on bytes and on calls; the Earley parser adds the nondeterminism of "call
// here or read a byte here" on top.
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

struct Dfa {
  int32_t n_states = 0;
  std::vector<int32_t> next;  // n_states * n_classes, -1 = no edge
  std::vector<std::vector<std::pair<int32_t, int32_t>>> calls;  // per state: (rule, target)
  std::vector<uint8_t> is_final;
};

Dfa determinize(const Nfa& nfa, const ByteClasses& classes, CompileBudget& budget);

}  // namespace llms::structured
