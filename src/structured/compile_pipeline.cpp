// structured/compile_pipeline: a parsed Grammar linked into a CompiledGrammar.
//
// Steps: choose the callable rules (nfa.h), build one automaton per callable rule over byte
// classes shared by all, then make the automaton exact for masking:
// - productive rules (derive some string) by fixpoint; calls of unproductive rules are dropped,
//   so a rule that can derive nothing never makes a dead prefix look viable;
// - nullable rules by fixpoint (the Earley closure advances callers of nullable rules at once);
// - states kept only if reachable from their rule's start and able to reach a final state
//   (counts never make a state dead: a counted body is productive, so any count can finish);
// - rules kept only if root reaches them.
// Then the Earley set before any text, shared by every matcher.
#include <algorithm>
#include <limits>
#include <optional>
#include <string>

#include "compiled_grammar.h"
#include "dfa.h"
#include "earley.h"
#include "mask_walker.h"
#include "nfa.h"
#include "token_trie.h"
#include "util/error.h"

namespace llms::structured {
namespace {

// NFA states of all rules together beyond which shared large rules stay callable.
constexpr int64_t kMaxInlinedStates = 65536;

// Calls fn(target) for every state a transition code may lead to.
template <typename Fn>
void for_each_target(const Dfa& dfa, int32_t code, Fn&& fn) {
  if (code >= 0) {
    fn(code);
  } else if (code != kNoMove) {
    const GuardedMove& g = dfa.guarded[guarded_index(code)];
    for (size_t v = 0; v < 3; ++v) {
      for (uint32_t i = 0; i < g.size[v]; ++i) fn(dfa.move_targets[g.begin[v] + i].target);
    }
  }
}

// Calls fn(code) for each distinct byte transition code of state s.
template <typename Fn>
void for_each_byte_code(const Dfa& dfa, int32_t s, Fn&& fn) {
  for (int32_t i = dfa.byte_code_begin[static_cast<size_t>(s)];
       i < dfa.byte_code_begin[static_cast<size_t>(s) + 1]; ++i) {
    fn(dfa.byte_codes[static_cast<size_t>(i)]);
  }
}

// Forward search in one rule's DFA over byte edges (if use_bytes) and the calls accepted by
// `call_ok`; returns the states reached.
template <typename CallOk>
std::vector<uint8_t> reach_forward(const Dfa& dfa, bool use_bytes, CallOk&& call_ok,
                                   CompileBudget& budget) {
  std::vector<uint8_t> seen(static_cast<size_t>(dfa.n_states), 0);
  std::vector<int32_t> stack;
  auto visit = [&](int32_t t) {
    if (!seen[static_cast<size_t>(t)]) {
      seen[static_cast<size_t>(t)] = 1;
      stack.push_back(t);
    }
  };
  for_each_target(dfa, dfa.start, visit);
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    budget.charge(1, "grammar analysis steps");
    if (use_bytes)
      for_each_byte_code(dfa, s, [&](int32_t code) { for_each_target(dfa, code, visit); });
    for (const auto& [rule, code] : dfa.calls[static_cast<size_t>(s)]) {
      if (call_ok(rule)) for_each_target(dfa, code, visit);
    }
  }
  return seen;
}

// Live states of one DFA: reachable from the start and co-reachable to a final state.
template <typename CallOk>
std::vector<uint8_t> live_states(const Dfa& dfa, CallOk&& call_ok, CompileBudget& budget) {
  const auto forward = reach_forward(dfa, true, call_ok, budget);
  // Reverse edges in one flat array (CSR): counts, offsets, then the predecessors.
  const auto n = static_cast<size_t>(dfa.n_states);
  std::vector<int32_t> offset(n + 1, 0);
  auto for_each_edge = [&](auto&& fn) {
    for (int32_t s = 0; s < dfa.n_states; ++s) {
      for_each_byte_code(
          dfa, s, [&](int32_t code) { for_each_target(dfa, code, [&](int32_t t) { fn(s, t); }); });
      for (const auto& [callee, code] : dfa.calls[static_cast<size_t>(s)]) {
        if (call_ok(callee)) for_each_target(dfa, code, [&](int32_t t) { fn(s, t); });
      }
    }
  };
  for_each_edge([&](int32_t, int32_t t) { ++offset[static_cast<size_t>(t) + 1]; });
  for (size_t i = 0; i < n; ++i) offset[i + 1] += offset[i];
  std::vector<int32_t> predecessors(static_cast<size_t>(offset[n]));
  std::vector<int32_t> fill(offset.begin(), offset.end() - 1);
  for_each_edge([&](int32_t s, int32_t t) {
    predecessors[static_cast<size_t>(fill[static_cast<size_t>(t)]++)] = s;
  });
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
    for (int32_t i = offset[static_cast<size_t>(s)]; i < offset[static_cast<size_t>(s) + 1]; ++i) {
      const int32_t p = predecessors[static_cast<size_t>(i)];
      if (!backward[static_cast<size_t>(p)]) {
        backward[static_cast<size_t>(p)] = 1;
        stack.push_back(p);
      }
    }
  }
  std::vector<uint8_t> live(static_cast<size_t>(dfa.n_states));
  for (size_t s = 0; s < live.size(); ++s) live[s] = forward[s] && backward[s];
  return live;
}

}  // namespace

std::shared_ptr<const CompiledGrammar> link_grammar(const Grammar& grammar,
                                                    std::shared_ptr<const TokenIndex> index,
                                                    CompileBudget& budget, const char* what) {
  if (!index) throw Error(Error::Kind::kInvalidArgument, std::string(what) + ": no token index");
  const std::vector<uint8_t> nullable_node = nullable_nodes(grammar, budget);

  // First every rule off a reference cycle is inlined but large leaves (a long key pattern used
  // by every object, say): most schemas become one automaton, whose masks come from cached
  // per-state walks alone (a call costs a parser walk in every mask that crosses it). Past
  // kMaxInlinedStates, every large rule referenced more than once is called instead.
  std::vector<uint8_t> callable =
      plan_callable_rules(grammar, budget, SharedRules::kLargeLeavesCalled);
  std::vector<int32_t> local(grammar.rules.size(), -1);
  std::vector<int32_t> members;
  std::vector<Nfa> nfas;
  auto build_all = [&](int64_t limit) {
    // Local numbering of callable rules; call edges are renumbered below.
    std::fill(local.begin(), local.end(), -1);
    members.clear();
    for (size_t r = 0; r < grammar.rules.size(); ++r) {
      if (callable[r]) {
        local[r] = static_cast<int32_t>(members.size());
        members.push_back(static_cast<int32_t>(r));
      }
    }
    nfas.clear();
    nfas.reserve(members.size());
    int64_t states = 0;
    for (int32_t r : members) {
      std::optional<Nfa> nfa =
          build_rule_nfa(grammar, r, callable, nullable_node, budget, limit - states);
      if (!nfa) return false;
      states += static_cast<int64_t>(nfa->out.size());
      nfas.push_back(std::move(*nfa));
    }
    return true;
  };
  const bool built = build_all(kMaxInlinedStates);
  if (!built) {
    callable = plan_callable_rules(grammar, budget, SharedRules::kLargeCalled);
    build_all(std::numeric_limits<int64_t>::max());
  }
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

  // Productive and nullable rules: least fixpoints, computed incrementally. Each rule's search
  // keeps the states it reached; a call of a rule not (yet) known to have the property waits on
  // that rule and resumes when it gets it. Every state is visited once per property.
  std::vector<uint8_t> productive(n_rules, 0);
  std::vector<uint8_t> nullable(n_rules, 0);
  for (auto* property : {&productive, &nullable}) {
    const bool use_bytes = property == &productive;
    std::vector<std::vector<uint8_t>> seen(n_rules);
    std::vector<std::vector<std::pair<size_t, int32_t>>> waiting(n_rules);  // callee: (rule, code)
    std::vector<size_t> gained;  // rules that got the property, to resume their waiters
    std::vector<int32_t> stack;
    auto explore = [&](size_t r) {
      const Dfa& dfa = dfas[r];
      while (!stack.empty()) {
        const int32_t s = stack.back();
        stack.pop_back();
        budget.charge(1, "grammar analysis steps");
        if (dfa.is_final[static_cast<size_t>(s)] && !(*property)[r]) {
          (*property)[r] = 1;
          gained.push_back(r);
        }
        auto visit = [&](int32_t t) {
          if (!seen[r][static_cast<size_t>(t)]) {
            seen[r][static_cast<size_t>(t)] = 1;
            stack.push_back(t);
          }
        };
        if (use_bytes) {
          for_each_byte_code(dfa, s, [&](int32_t code) { for_each_target(dfa, code, visit); });
        }
        for (const auto& [callee, code] : dfa.calls[static_cast<size_t>(s)]) {
          if ((*property)[static_cast<size_t>(callee)]) {
            for_each_target(dfa, code, visit);
          } else {
            waiting[static_cast<size_t>(callee)].emplace_back(r, code);
          }
        }
      }
    };
    for (size_t r = 0; r < n_rules; ++r) {
      seen[r].assign(static_cast<size_t>(dfas[r].n_states), 0);
      stack.clear();
      for_each_target(dfas[r], dfas[r].start, [&](int32_t t) {
        if (!seen[r][static_cast<size_t>(t)]) {
          seen[r][static_cast<size_t>(t)] = 1;
          stack.push_back(t);
        }
      });
      explore(r);
    }
    while (!gained.empty()) {
      const size_t callee = gained.back();
      gained.pop_back();
      std::vector<std::pair<size_t, int32_t>> resumed = std::move(waiting[callee]);
      waiting[callee].clear();
      for (const auto& waiter : resumed) {
        const size_t r = waiter.first;
        for_each_target(dfas[r], waiter.second, [&](int32_t t) {
          if (!seen[r][static_cast<size_t>(t)]) {
            seen[r][static_cast<size_t>(t)] = 1;
            stack.push_back(t);
          }
        });
        explore(r);
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

  std::vector<std::vector<uint8_t>> live(n_rules);
  for (size_t r = 0; r < n_rules; ++r) {
    if (productive[r]) live[r] = live_states(dfas[r], call_ok, budget);
  }

  // Rules root reaches through live states.
  std::vector<uint8_t> used(n_rules, 0);
  std::vector<size_t> order{root};
  used[root] = 1;
  for (size_t i = 0; i < order.size(); ++i) {
    const size_t r = order[i];
    for (int32_t s = 0; s < dfas[r].n_states; ++s) {
      if (!live[r][static_cast<size_t>(s)]) continue;
      for (const auto& [callee, code] : dfas[r].calls[static_cast<size_t>(s)]) {
        const auto c = static_cast<size_t>(callee);
        bool leads_somewhere = false;
        for_each_target(dfas[r], code, [&](int32_t t) {
          leads_somewhere |= live[r][static_cast<size_t>(t)] != 0;
        });
        if (call_ok(callee) && leads_somewhere && !used[c]) {
          used[c] = 1;
          order.push_back(c);
        }
      }
    }
  }

  // Global numbering of live states, regions and guarded moves.
  auto g = std::make_shared<CompiledGrammar>();
  g->max_token_bytes = index->trie().max_depth();
  g->index = std::move(index);
  g->byte_class = classes.of;
  g->n_classes = n_classes;
  std::vector<int32_t> rule_id(n_rules, -1);
  std::vector<std::vector<int32_t>> global(n_rules);
  std::vector<int32_t> region_base(n_rules, 0);
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
    g->rules.push_back(std::move(info));
    region_base[r] = static_cast<int32_t>(g->regions.size());
    for (const NfaRegion& region : dfas[r].regions)
      g->regions.push_back(RegionInfo{region.min, region.max});
  }
  g->root_rule = rule_id[root];
  g->n_states = n_states;
  g->next.assign(static_cast<size_t>(n_states) * static_cast<size_t>(n_classes), kNoMove);
  g->flags.assign(static_cast<size_t>(n_states), 0);
  g->state_rule.assign(static_cast<size_t>(n_states), 0);
  g->state_region.assign(static_cast<size_t>(n_states), -1);
  g->call_begin.assign(static_cast<size_t>(n_states) + 1, 0);

  // A rule's code in global terms: plain targets renumbered, guarded moves copied with their
  // targets renumbered (dead targets become no edge).
  std::vector<std::vector<int32_t>> remapped(n_rules);  // per rule: local guarded index -> code
  for (size_t r : order) remapped[r].assign(dfas[r].guarded.size(), 0);
  auto remap = [&](size_t r, int32_t code) -> int32_t {
    if (code >= 0) return global[r][static_cast<size_t>(code)];
    if (code == kNoMove) return kNoMove;
    int32_t& memo = remapped[r][guarded_index(code)];
    if (memo != 0) return memo;
    const GuardedMove& local_move = dfas[r].guarded[guarded_index(code)];
    GuardedMove m;
    bool any = false;
    for (size_t v = 0; v < 3; ++v) {
      m.begin[v] = static_cast<uint32_t>(g->move_targets.size());
      for (uint32_t i = 0; i < local_move.size[v]; ++i) {
        MoveTarget t = dfas[r].move_targets[local_move.begin[v] + i];
        t.target = global[r][static_cast<size_t>(t.target)];
        if (t.target < 0) continue;
        g->move_targets.push_back(t);
        any = true;
      }
      m.size[v] = static_cast<uint32_t>(g->move_targets.size()) - m.begin[v];
    }
    if (!any) {
      memo = kNoMove;
      return kNoMove;
    }
    g->guarded.push_back(m);
    memo = guarded_code(g->guarded.size() - 1);
    return memo;
  };
  for (size_t r : order) g->rules[static_cast<size_t>(rule_id[r])].start = remap(r, dfas[r].start);
  std::vector<std::vector<CallEdge>> calls(static_cast<size_t>(n_states));
  for (size_t r : order) {
    const Dfa& dfa = dfas[r];
    for (int32_t s = 0; s < dfa.n_states; ++s) {
      const int32_t id = global[r][static_cast<size_t>(s)];
      if (id < 0) continue;
      uint8_t flags = dfa.is_final[static_cast<size_t>(s)] ? kFinal : 0;
      const size_t row = static_cast<size_t>(s) * static_cast<size_t>(n_classes);
      for (int32_t c = 0; c < n_classes; ++c) {
        const int32_t code = remap(r, dfa.next[row + static_cast<size_t>(c)]);
        g->next[static_cast<size_t>(id) * static_cast<size_t>(n_classes) + static_cast<size_t>(c)] =
            code;
        if (code != kNoMove) flags |= kHasBytes;
      }
      for (const auto& [callee, code] : dfa.calls[static_cast<size_t>(s)]) {
        if (!call_ok(callee)) continue;
        const int32_t mapped = remap(r, code);
        if (mapped != kNoMove)
          calls[static_cast<size_t>(id)].push_back(
              CallEdge{rule_id[static_cast<size_t>(callee)], mapped});
      }
      const int32_t region = dfa.region[static_cast<size_t>(s)];
      g->state_region[static_cast<size_t>(id)] = region < 0 ? -1 : region_base[r] + region;
      g->state_rule[static_cast<size_t>(id)] = rule_id[r];
      g->flags[static_cast<size_t>(id)] = flags;
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
  std::vector<EarleyItem> seeds;
  g->for_each_move(g->rules[static_cast<size_t>(g->root_rule)].start, -1, 0,
                   [&](int32_t t, int32_t count) {
                     seeds.push_back(EarleyItem{t, count, initial.get()});
                   });
  builder.start(*initial, seeds);
  g->initial_set = std::move(initial);

  // The first mask is computed here, on the compiling thread: a constraint whose token walks
  // explode (nested counted regions) is refused as a compile error instead of stalling the
  // first decode step, and the first token of every request finds its mask cached.
  std::vector<uint32_t> first_mask(static_cast<size_t>(g->index->trie().n_words()), 0);
  CompileBudget first_mask_budget(g->mask_limits);
  MaskWalker(*g).fill(*g->initial_set, first_mask, first_mask_budget);
  return g;
}

}  // namespace llms::structured
