// structured/compile_pipeline: a parsed Grammar linked into a CompiledGrammar.
//
// Steps: choose the callable rules (nfa.h), build one automaton per callable rule, then make
// it exact for masking, on the NFAs:
// - productive rules (derive some string) by fixpoint; calls of unproductive rules are dropped,
//   so a rule that can derive nothing never makes a dead prefix look viable;
// - nullable rules by fixpoint (the Earley closure advances callers of nullable rules at once);
// - NFA states kept only if reachable from their rule's start and able to reach its end
//   (counts never make a state dead: a counted body is productive, so any count can finish);
// - rules kept only if root reaches them.
// The determinized automaton over byte classes shared by all rules is built on demand from
// those (dfa.h). Then the Earley set before any text, shared by every matcher, and its mask.
#include <algorithm>
#include <chrono>
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

// Calls fn(target) for each edge of NFA state s that a search follows: byte edges if
// `use_bytes`, calls accepted by call_ok(rule), and every other edge (epsilons, and the enter,
// loop and exit edges of counted regions: counts never make a state dead).
template <typename CallOk, typename Fn>
void for_each_followed(const Nfa& nfa, int32_t s, bool use_bytes, CallOk&& call_ok, Fn&& fn) {
  for (const NfaEdge& e : nfa.out(s)) {
    if (e.kind == NfaEdgeKind::kByte) {
      if (use_bytes) fn(e.to);
    } else if (e.kind == NfaEdgeKind::kCall) {
      if (call_ok(e.call)) fn(e.to);
    } else {
      fn(e.to);
    }
  }
}

// Live states of one rule's NFA: reachable from its start and able to reach its accept state,
// by bytes, the calls accepted by call_ok and the other edges.
template <typename CallOk>
std::vector<uint8_t> live_states(const Nfa& nfa, CallOk&& call_ok, CompileBudget& budget) {
  const size_t n = nfa.n_states();
  budget.charge(static_cast<int64_t>(n), "grammar analysis steps");
  std::vector<uint8_t> forward(n, 0);
  std::vector<int32_t> stack{nfa.start};
  forward[static_cast<size_t>(nfa.start)] = 1;
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    for_each_followed(nfa, s, true, call_ok, [&](int32_t t) {
      if (!forward[static_cast<size_t>(t)]) {
        forward[static_cast<size_t>(t)] = 1;
        stack.push_back(t);
      }
    });
  }
  // Reverse edges in one flat array (CSR): counts, offsets, then the predecessors.
  std::vector<int32_t> offset(n + 1, 0);
  for (size_t s = 0; s < n; ++s) {
    for_each_followed(nfa, static_cast<int32_t>(s), true, call_ok,
                      [&](int32_t t) { ++offset[static_cast<size_t>(t) + 1]; });
  }
  for (size_t i = 0; i < n; ++i) offset[i + 1] += offset[i];
  std::vector<int32_t> predecessors(static_cast<size_t>(offset[n]));
  std::vector<int32_t> fill(offset.begin(), offset.end() - 1);
  for (size_t s = 0; s < n; ++s) {
    for_each_followed(nfa, static_cast<int32_t>(s), true, call_ok, [&](int32_t t) {
      predecessors[static_cast<size_t>(fill[static_cast<size_t>(t)]++)] = static_cast<int32_t>(s);
    });
  }
  std::vector<uint8_t> live(n, 0);
  if (forward[static_cast<size_t>(nfa.accept)]) {
    live[static_cast<size_t>(nfa.accept)] = 1;
    stack.push_back(nfa.accept);
  }
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    for (int32_t i = offset[static_cast<size_t>(s)]; i < offset[static_cast<size_t>(s) + 1]; ++i) {
      const int32_t p = predecessors[static_cast<size_t>(i)];
      if (forward[static_cast<size_t>(p)] && !live[static_cast<size_t>(p)]) {
        live[static_cast<size_t>(p)] = 1;
        stack.push_back(p);
      }
    }
  }
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
  CharSetSequences set_sequences(grammar.arena);
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
      std::optional<Nfa> nfa = build_rule_nfa(grammar, r, callable, nullable_node, set_sequences,
                                              budget, limit - states);
      if (!nfa) return false;
      states += static_cast<int64_t>(nfa->n_states());
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
  const size_t n_rules = nfas.size();
  const auto root = static_cast<size_t>(local[static_cast<size_t>(grammar.root)]);
  auto local_of = [&](int32_t grammar_rule) {
    return static_cast<size_t>(local[static_cast<size_t>(grammar_rule)]);
  };

  // The rules each rule calls, each once, in the order of their first call edge.
  std::vector<std::vector<size_t>> callees(n_rules);
  {
    std::vector<size_t> last_caller(n_rules, n_rules);
    for (size_t r = 0; r < n_rules; ++r) {
      for (const NfaEdge& e : nfas[r].edges) {
        if (e.kind != NfaEdgeKind::kCall) continue;
        const size_t callee = local_of(e.call);
        if (last_caller[callee] == r) continue;
        last_caller[callee] = r;
        callees[r].push_back(callee);
      }
    }
  }

  // Productive and nullable rules: least fixpoints, computed incrementally. Each rule's search
  // keeps the NFA states it reached; a call of a rule not (yet) known to have the property
  // waits on that rule and resumes when it gets it. Every state is visited at most once per
  // property.
  // First, without searching: a rule with no dead leaf whose callees are all productive is
  // productive (its start leads on to accept, nfa.h), settled callees first by a work list;
  // only the rest (recursive rules, dead leaves) are searched.
  std::vector<uint8_t> productive(n_rules, 0);
  std::vector<uint8_t> nullable(n_rules, 0);
  {
    std::vector<std::vector<size_t>> callers(n_rules);
    std::vector<size_t> unsettled(n_rules, 0);  // callees not yet known productive
    std::vector<size_t> settled;
    for (size_t r = 0; r < n_rules; ++r) {
      for (size_t callee : callees[r]) callers[callee].push_back(r);
      unsettled[r] = callees[r].size();
      if (unsettled[r] == 0 && !nfas[r].dead_leaf) settled.push_back(r);
    }
    while (!settled.empty()) {
      const size_t r = settled.back();
      settled.pop_back();
      productive[r] = 1;
      for (size_t caller : callers[r]) {
        if (--unsettled[caller] == 0 && !nfas[caller].dead_leaf) settled.push_back(caller);
      }
    }
  }
  for (auto* property : {&productive, &nullable}) {
    const bool use_bytes = property == &productive;
    std::vector<std::vector<uint8_t>> seen(n_rules);
    std::vector<std::vector<std::pair<size_t, int32_t>>> waiting(n_rules);  // callee: (rule, to)
    std::vector<size_t> gained;  // rules that got the property, to resume their waiters
    std::vector<int32_t> stack;
    auto visit = [&](size_t r, int32_t t) {
      if (!seen[r][static_cast<size_t>(t)]) {
        seen[r][static_cast<size_t>(t)] = 1;
        stack.push_back(t);
      }
    };
    auto explore = [&](size_t r) {
      const Nfa& nfa = nfas[r];
      while (!stack.empty()) {
        const int32_t s = stack.back();
        stack.pop_back();
        budget.charge(1, "grammar analysis steps");
        if (s == nfa.accept && !(*property)[r]) {
          (*property)[r] = 1;
          gained.push_back(r);
        }
        for (const NfaEdge& e : nfa.out(s)) {
          if (e.kind == NfaEdgeKind::kByte) {
            if (use_bytes) visit(r, e.to);
          } else if (e.kind == NfaEdgeKind::kCall) {
            const size_t callee = local_of(e.call);
            if ((*property)[callee]) {
              visit(r, e.to);
            } else {
              waiting[callee].emplace_back(r, e.to);
            }
          } else {
            visit(r, e.to);
          }
        }
      }
    };
    for (size_t r = 0; r < n_rules; ++r) {
      if (use_bytes && productive[r]) continue;  // settled above, never searched
      seen[r].assign(nfas[r].n_states(), 0);
      stack.clear();
      visit(r, nfas[r].start);
      explore(r);
    }
    while (!gained.empty()) {
      const size_t callee = gained.back();
      gained.pop_back();
      std::vector<std::pair<size_t, int32_t>> resumed = std::move(waiting[callee]);
      waiting[callee].clear();
      for (const auto& [r, to] : resumed) {
        visit(r, to);
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
  auto call_ok = [&](int32_t grammar_rule) { return productive[local_of(grammar_rule)] != 0; };

  // Without a dead leaf or a call that cannot return, every state is live (nfa.h); the two
  // searches are then skipped (a sixth of the slowest compiles).
  std::vector<std::vector<uint8_t>> live(n_rules);
  std::vector<uint8_t> all_live(n_rules, 0);
  for (size_t r = 0; r < n_rules; ++r) {
    if (!productive[r]) continue;
    all_live[r] = !nfas[r].dead_leaf && std::all_of(callees[r].begin(), callees[r].end(),
                                                    [&](size_t c) { return productive[c] != 0; });
    if (all_live[r]) {
      budget.charge(static_cast<int64_t>(nfas[r].n_states()), "grammar analysis steps");
      live[r].assign(nfas[r].n_states(), 1);
    } else {
      live[r] = live_states(nfas[r], call_ok, budget);
    }
  }

  // Rules root reaches through live states, numbered in that order (a rule whose states are
  // all live reaches its callees in the order of their first call edge, as a walk would).
  std::vector<uint8_t> used(n_rules, 0);
  std::vector<size_t> order{root};
  used[root] = 1;
  for (size_t i = 0; i < order.size(); ++i) {
    const size_t r = order[i];
    if (all_live[r]) {
      for (size_t callee : callees[r]) {
        if (!used[callee]) {
          used[callee] = 1;
          order.push_back(callee);
        }
      }
      continue;
    }
    for (size_t s = 0; s < nfas[r].n_states(); ++s) {
      if (!live[r][s]) continue;
      for (const NfaEdge& e : nfas[r].out(static_cast<int32_t>(s))) {
        if (e.kind != NfaEdgeKind::kCall || !call_ok(e.call)) continue;
        const size_t callee = local_of(e.call);
        if (live[r][static_cast<size_t>(e.to)] && !used[callee]) {
          used[callee] = 1;
          order.push_back(callee);
        }
      }
    }
  }
  std::vector<int32_t> rule_id(n_rules, -1);
  for (size_t i = 0; i < order.size(); ++i) rule_id[order[i]] = static_cast<int32_t>(i);
  std::vector<int32_t> call_rule(grammar.rules.size(), -1);  // grammar rule -> rule id
  for (size_t r = 0; r < grammar.rules.size(); ++r) {
    if (local[r] >= 0) call_rule[r] = rule_id[static_cast<size_t>(local[r])];
  }

  auto g = std::make_shared<CompiledGrammar>();
  g->max_token_bytes = index->trie().max_depth();
  g->index = std::move(index);
  g->byte_class = classes.of;
  std::vector<RuleNfa> rule_nfas;
  rule_nfas.reserve(order.size());
  for (size_t r : order) {
    RuleInfo info;
    info.name = grammar.rules[static_cast<size_t>(members[r])].name;
    info.nullable = nullable[r] != 0;
    g->rules.push_back(std::move(info));
    const auto region_base = static_cast<int32_t>(g->regions.size());
    for (const NfaRegion& region : nfas[r].regions)
      g->regions.push_back(RegionInfo{region.min, region.max});
    rule_nfas.push_back(RuleNfa{std::move(nfas[r]), std::move(live[r]), region_base});
  }
  g->root_rule = 0;
  // The automaton's own bound: what the states built on demand may cost over its lifetime.
  constexpr int64_t kMaxAutomatonWork = int64_t{1} << 24;
  g->automaton.emplace(std::move(rule_nfas), std::move(call_rule), classes,
                       std::min(budget.limits().max_work, kMaxAutomatonWork));
  for (size_t r = 0; r < g->rules.size(); ++r)
    g->rules[r].start = g->automaton->start_of(static_cast<int32_t>(r));
  // Warm-up: rows are built breadth first from the starts for kWarmUp (never past the
  // compile's time limit), within a quarter of the automaton's budget. A small automaton is then
  // built whole here, off the engine thread, and its masks never build states; a large one
  // leaves the rest to the masks, which build only the states their walks reach. (A warm-up as
  // long as the compile so far, tried until session 28, made the slowest compiles twice as long
  // and left the corpus's mask times unchanged; 2 ms, until session 29, cost the slowest
  // compiles a sixth of their time; none at all made the corpus's mask p99 ~8 % slower. After
  // that session's faster compiles, 10 alternated rounds beside llguidance each: 0.5 ms, 1 ms
  // and 2 ms gave mask mean medians x0.93 / x0.87 / x0.85 of llguidance's, compile p99
  // x0.70 / x0.68 / x0.73.)
  constexpr auto kWarmUp = std::chrono::milliseconds(1);
  const auto left =
      std::chrono::steady_clock::duration(budget.limits().max_time) - budget.elapsed();
  const auto warm_up = std::min<std::chrono::steady_clock::duration>(kWarmUp, left);
  if (warm_up > std::chrono::steady_clock::duration::zero()) g->automaton->build_for(warm_up);
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
