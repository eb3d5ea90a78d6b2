// structured/compiled_grammar: the linked automaton that every matcher of one constraint shares.
//
// Every callable rule is a DFA over byte classes whose states are numbered globally; a state has
// byte edges (next), call edges (calls) and may be final (its rule can end there). Invariants
// the masks rely on for exactness: every state can reach a final state of its rule (dead states
// are pruned), every called rule is productive (derives some string), so every Earley item is a
// witness that the text so far can be completed.
//
// Immutable after compile except the per-state mask cache, which is filled lazily under a mutex
// and published through atomics (thread-safe, no lock: a race computes an entry twice and one
// copy is dropped).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "grammar_ast.h"
#include "structured/grammar.h"
#include "token_set.h"

namespace llms::structured {

class EarleySet;

struct CallEdge {
  int32_t rule = 0;
  int32_t target = 0;
};

struct RuleInfo {
  std::string name;
  int32_t start = 0;  // global state id
  bool nullable = false;
};

enum StateFlags : uint8_t {
  kFinal = 1,     // the state's rule may end here
  kHasBytes = 2,  // some byte edge leaves the state
  kHasCalls = 4,  // some call edge leaves the state
};

// Where a token walk by a state's own byte edges passes a state that may end its rule or call
// another: the tokens below that trie node (longer than it) need the parser to decide.
struct Continuation {
  int32_t node = 0;   // trie node index
  int32_t state = 0;  // the state after the node's bytes
};

// What a state's own byte edges decide about every token, independent of the parse around it.
struct StateMaskInfo {
  TokenSet accepted;  // tokens read entirely by byte edges from the state (always allowed)
  std::vector<Continuation> continuations;
};

class CompiledGrammar {
 public:
  CompiledGrammar();
  ~CompiledGrammar();
  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  int32_t step(int32_t state, uint8_t byte) const {
    return next[static_cast<size_t>(state) * static_cast<size_t>(n_classes) + byte_class[byte]];
  }
  bool is_final(int32_t state) const { return flags[static_cast<size_t>(state)] & kFinal; }
  std::span<const CallEdge> calls_of(int32_t state) const {
    return std::span<const CallEdge>(calls).subspan(
        static_cast<size_t>(call_begin[static_cast<size_t>(state)]),
        static_cast<size_t>(call_begin[static_cast<size_t>(state) + 1] -
                            call_begin[static_cast<size_t>(state)]));
  }

  // Lazily computed and cached; safe to call from several threads.
  const StateMaskInfo& mask_info(int32_t state) const;
  void init_mask_cache();  // once n_states is final

  std::shared_ptr<const TokenIndex> index;
  std::array<uint8_t, 256> byte_class{};
  int32_t n_classes = 1;
  int32_t n_states = 0;
  std::vector<int32_t> next;  // n_states * n_classes, -1 = no edge
  std::vector<uint8_t> flags;
  std::vector<int32_t> state_rule;
  std::vector<int32_t> call_begin;  // n_states + 1 offsets into calls
  std::vector<CallEdge> calls;
  std::vector<RuleInfo> rules;
  int32_t root_rule = 0;
  // The Earley set before any text: shared by every matcher, so items that reach back to it are
  // equal across matchers.
  std::shared_ptr<const EarleySet> initial_set;

 private:
  mutable std::unique_ptr<std::atomic<const StateMaskInfo*>[]> mask_infos_;
};

// Links a parsed grammar into a CompiledGrammar (compile_pipeline.cpp). `what` names the input
// in errors ("grammar", "regex", "choices").
std::shared_ptr<const CompiledGrammar> link_grammar(const Grammar& grammar,
                                                    std::shared_ptr<const TokenIndex> index,
                                                    CompileBudget& budget, const char* what);

}  // namespace llms::structured
