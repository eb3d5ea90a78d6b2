// structured/compile_pipeline: a parsed Grammar linked into a CompiledGrammar.
//
// Steps: choose the callable rules (nfa.h), build and determinize one automaton per callable
// rule over byte classes shared by all, then make the automaton exact for masking:
// - productive rules (derive some string) by fixpoint; calls of unproductive rules are dropped,
//   so a rule that can derive nothing never makes a dead prefix look viable;
// - nullable rules by fixpoint (the Earley closure advances callers of nullable rules at once);
// - states kept only if reachable from their rule's start and able to reach a final state;
// - rules kept only if root reaches them.
// Then the Earley set before any text, shared by every matcher.
#include <algorithm>
#include <string>

#include "compiled_grammar.h"
#include "dfa.h"
#include "earley.h"
#include "nfa.h"
#include "util/error.h"

namespace llms::structured {
namespace {

// Forward search in one rule's DFA over byte edges and calls accepted by `call_ok`; returns the
// states reached (as a mask). Charges the states visited.
template <typename CallOk>
std::vector<uint8_t> reach_forward(const Dfa& dfa, int32_t n_classes, bool use_bytes,
                                   CallOk&& call_ok, CompileBudget& budget) {
  std::vector<uint8_t> seen(static_cast<size_t>(dfa.n_states), 0);
  std::vector<int32_t> stack{0};
  seen[0] = 1;
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    budget.charge(1, "grammar analysis steps");
    auto visit = [&](int32_t t) {
      if (t >= 0 && !seen[static_cast<size_t>(t)]) {
        seen[static_cast<size_t>(t)] = 1;
        stack.push_back(t);
      }
    };
    if (use_bytes) {
      for (int32_t c = 0; c < n_classes; ++c) {
        visit(dfa.next[static_cast<size_t>(s) * static_cast<size_t>(n_classes) +
                       static_cast<size_t>(c)]);
      }
    }
    for (const auto& [rule, target] : dfa.calls[static_cast<size_t>(s)]) {
      if (call_ok(rule)) visit(target);
    }
  }
  return seen;
}

bool reaches_final(const std::vector<uint8_t>& seen, const Dfa& dfa) {
  for (int32_t s = 0; s < dfa.n_states; ++s) {
    if (seen[static_cast<size_t>(s)] && dfa.is_final[static_cast<size_t>(s)]) return true;
  }
  return false;
}

}  // namespace

std::shared_ptr<const CompiledGrammar> link_grammar(const Grammar& grammar,
                                                    std::shared_ptr<const TokenIndex> index,
                                                    CompileBudget& budget, const char* what) {
  if (!index) throw Error(Error::Kind::kInvalidArgument, std::string(what) + ": no token index");
  const std::vector<uint8_t> callable = plan_callable_rules(grammar, budget);

  // Local numbering of callable rules; call edges are renumbered below.
  std::vector<int32_t> local(grammar.rules.size(), -1);
  std::vector<int32_t> members;
  for (size_t r = 0; r < grammar.rules.size(); ++r) {
    if (callable[r]) {
      local[r] = static_cast<int32_t>(members.size());
      members.push_back(static_cast<int32_t>(r));
    }
  }
  std::vector<Nfa> nfas;
  nfas.reserve(members.size());
  for (int32_t r : members) nfas.push_back(build_rule_nfa(grammar, r, callable, budget));
  const ByteClasses classes = compute_byte_classes(nfas);
  std::vector<Dfa> dfas;
  dfas.reserve(members.size());
  for (size_t i = 0; i < nfas.size(); ++i) {
    dfas.push_back(determinize(nfas[i], classes, budget));
    nfas[i] = Nfa{};  // free as we go
    for (auto& calls : dfas.back().calls) {
      for (auto& call : calls) call.first = local[static_cast<size_t>(call.first)];
    }
  }
  const size_t n_rules = dfas.size();
  const int32_t n_classes = classes.n_classes;
  const auto root = static_cast<size_t>(local[static_cast<size_t>(grammar.root)]);

  // Productive and nullable rules: least fixpoints, one rule search per round and rule.
  std::vector<uint8_t> productive(n_rules, 0);
  std::vector<uint8_t> nullable(n_rules, 0);
  for (auto* property : {&productive, &nullable}) {
    const bool use_bytes = property == &productive;
    bool changed = true;
    while (changed) {
      changed = false;
      for (size_t r = 0; r < n_rules; ++r) {
        if ((*property)[r]) continue;
        const auto seen = reach_forward(
            dfas[r], n_classes, use_bytes,
            [&](int32_t callee) { return (*property)[static_cast<size_t>(callee)] != 0; }, budget);
        if (reaches_final(seen, dfas[r])) {
          (*property)[r] = 1;
          changed = true;
        }
      }
    }
  }
  if (!productive[root]) {
    throw Error(Error::Kind::kInvalidArgument,
                std::string(what) + ": matches no text at all (rule '" +
                    grammar.rules[static_cast<size_t>(grammar.root)].name +
                    "' cannot derive any string)");
  }
  auto call_ok = [&](int32_t callee) { return productive[static_cast<size_t>(callee)] != 0; };

  // Live states: reachable from the start and co-reachable to a final state.
  std::vector<std::vector<uint8_t>> live(n_rules);
  for (size_t r = 0; r < n_rules; ++r) {
    if (!productive[r]) continue;
    const Dfa& dfa = dfas[r];
    const auto forward = reach_forward(dfa, n_classes, true, call_ok, budget);
    std::vector<std::vector<int32_t>> reverse(static_cast<size_t>(dfa.n_states));
    for (int32_t s = 0; s < dfa.n_states; ++s) {
      for (int32_t c = 0; c < n_classes; ++c) {
        const int32_t t = dfa.next[static_cast<size_t>(s) * static_cast<size_t>(n_classes) +
                                   static_cast<size_t>(c)];
        if (t >= 0) reverse[static_cast<size_t>(t)].push_back(s);
      }
      for (const auto& [callee, t] : dfa.calls[static_cast<size_t>(s)]) {
        if (call_ok(callee)) reverse[static_cast<size_t>(t)].push_back(s);
      }
    }
    budget.charge(dfa.n_states, "grammar analysis steps");
    std::vector<uint8_t> backward(static_cast<size_t>(dfa.n_states), 0);
    std::vector<int32_t> stack;
    for (int32_t s = 0; s < dfa.n_states; ++s) {
      if (dfa.is_final[static_cast<size_t>(s)]) {
        backward[static_cast<size_t>(s)] = 1;
        stack.push_back(s);
      }
    }
    while (!stack.empty()) {
      const int32_t s = stack.back();
      stack.pop_back();
      for (int32_t p : reverse[static_cast<size_t>(s)]) {
        if (!backward[static_cast<size_t>(p)]) {
          backward[static_cast<size_t>(p)] = 1;
          stack.push_back(p);
        }
      }
    }
    live[r].resize(static_cast<size_t>(dfa.n_states));
    for (size_t s = 0; s < live[r].size(); ++s) live[r][s] = forward[s] && backward[s];
  }

  // Rules root reaches through live states.
  std::vector<uint8_t> used(n_rules, 0);
  std::vector<size_t> order{root};
  used[root] = 1;
  for (size_t i = 0; i < order.size(); ++i) {
    const size_t r = order[i];
    for (int32_t s = 0; s < dfas[r].n_states; ++s) {
      if (!live[r][static_cast<size_t>(s)]) continue;
      for (const auto& [callee, t] : dfas[r].calls[static_cast<size_t>(s)]) {
        const auto c = static_cast<size_t>(callee);
        if (call_ok(callee) && live[r][static_cast<size_t>(t)] && !used[c]) {
          used[c] = 1;
          order.push_back(c);
        }
      }
    }
  }

  auto g = std::make_shared<CompiledGrammar>();
  g->index = std::move(index);
  g->byte_class = classes.of;
  g->n_classes = n_classes;
  std::vector<int32_t> rule_id(n_rules, -1);
  std::vector<std::vector<int32_t>> global(n_rules);
  int32_t n_states = 0;
  for (size_t r : order) {
    rule_id[r] = static_cast<int32_t>(g->rules.size());
    RuleInfo info;
    info.name = grammar.rules[static_cast<size_t>(members[r])].name;
    info.nullable = nullable[r] != 0;
    global[r].assign(static_cast<size_t>(dfas[r].n_states), -1);
    for (int32_t s = 0; s < dfas[r].n_states; ++s) {
      if (live[r][static_cast<size_t>(s)]) global[r][static_cast<size_t>(s)] = n_states++;
    }
    info.start = global[r][0];
    g->rules.push_back(std::move(info));
  }
  g->root_rule = rule_id[root];
  g->n_states = n_states;
  g->next.assign(static_cast<size_t>(n_states) * static_cast<size_t>(n_classes), -1);
  g->flags.assign(static_cast<size_t>(n_states), 0);
  g->state_rule.assign(static_cast<size_t>(n_states), 0);
  g->call_begin.assign(static_cast<size_t>(n_states) + 1, 0);
  for (size_t r : order) {
    const Dfa& dfa = dfas[r];
    for (int32_t s = 0; s < dfa.n_states; ++s) {
      const int32_t id = global[r][static_cast<size_t>(s)];
      if (id < 0) continue;
      uint8_t flags = dfa.is_final[static_cast<size_t>(s)] ? kFinal : 0;
      for (int32_t c = 0; c < n_classes; ++c) {
        const int32_t t = dfa.next[static_cast<size_t>(s) * static_cast<size_t>(n_classes) +
                                   static_cast<size_t>(c)];
        if (t >= 0 && global[r][static_cast<size_t>(t)] >= 0) {
          g->next[static_cast<size_t>(id) * static_cast<size_t>(n_classes) +
                  static_cast<size_t>(c)] = global[r][static_cast<size_t>(t)];
          flags |= kHasBytes;
        }
      }
      g->state_rule[static_cast<size_t>(id)] = rule_id[r];
      g->flags[static_cast<size_t>(id)] = flags;
    }
  }
  // Call edges, in global state order (call_begin offsets).
  std::vector<std::vector<CallEdge>> calls(static_cast<size_t>(n_states));
  for (size_t r : order) {
    const Dfa& dfa = dfas[r];
    for (int32_t s = 0; s < dfa.n_states; ++s) {
      const int32_t id = global[r][static_cast<size_t>(s)];
      if (id < 0) continue;
      for (const auto& [callee, t] : dfa.calls[static_cast<size_t>(s)]) {
        if (!call_ok(callee) || global[r][static_cast<size_t>(t)] < 0) continue;
        calls[static_cast<size_t>(id)].push_back(
            CallEdge{rule_id[static_cast<size_t>(callee)], global[r][static_cast<size_t>(t)]});
      }
    }
  }
  for (int32_t s = 0; s < n_states; ++s) {
    g->call_begin[static_cast<size_t>(s)] = static_cast<int32_t>(g->calls.size());
    for (const CallEdge& c : calls[static_cast<size_t>(s)]) g->calls.push_back(c);
    if (!calls[static_cast<size_t>(s)].empty()) g->flags[static_cast<size_t>(s)] |= kHasCalls;
  }
  g->call_begin[static_cast<size_t>(n_states)] = static_cast<int32_t>(g->calls.size());
  g->init_mask_cache();

  auto initial = std::make_shared<EarleySet>();
  EarleyBuilder builder(*g);
  const EarleyItem seed{g->rules[static_cast<size_t>(g->root_rule)].start, initial.get()};
  builder.start(*initial, std::span<const EarleyItem>(&seed, 1));
  g->initial_set = std::move(initial);
  return g;
}

}  // namespace llms::structured
