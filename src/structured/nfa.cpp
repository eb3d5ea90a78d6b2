// structured/nfa: see nfa.h.
#include "nfa.h"

#include <algorithm>

#include "util/error.h"

namespace llms::structured {
namespace {

// A rule inlined at more than one place is kept callable when its inlined automaton would be
// larger than this: the copies would cost more than the parser work a call adds.
constexpr int64_t kMaxSharedInlineStates = 2048;
constexpr int64_t kSaturated = int64_t{1} << 40;

int64_t saturating_add(int64_t a, int64_t b) { return std::min(kSaturated, a + b); }
int64_t saturating_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  if (a > kSaturated / b) return kSaturated;
  return std::min(kSaturated, a * b);
}

// Calls fn(rule) for every rule referenced in the expression tree at `root` (with repeats).
template <typename Fn>
void for_each_reference(const ExprArena& arena, int32_t root, Fn&& fn) {
  std::vector<int32_t> stack{root};
  while (!stack.empty()) {
    const Expr& e = arena.nodes[static_cast<size_t>(stack.back())];
    stack.pop_back();
    if (e.kind == ExprKind::kRuleRef) fn(e.payload);
    for (int32_t c : e.children) stack.push_back(c);
  }
}

// Estimated NFA states of an expression whose references cost ref_size(rule). Iterative
// post-order over the tree.
template <typename RefSize>
int64_t estimate_size(const ExprArena& arena, int32_t root, RefSize&& ref_size) {
  struct Frame {
    int32_t node;
    size_t next_child;
    int64_t total;
  };
  std::vector<Frame> stack{{root, 0, 0}};
  int64_t result = 0;
  while (!stack.empty()) {
    Frame& f = stack.back();
    const Expr& e = arena.nodes[static_cast<size_t>(f.node)];
    if (f.next_child > 0) f.total = saturating_add(f.total, result);
    if (f.next_child < e.children.size()) {
      const int32_t child = e.children[f.next_child++];
      stack.push_back({child, 0, 0});
      continue;
    }
    int64_t size = f.total;
    switch (e.kind) {
      case ExprKind::kEmpty:
        size = 1;
        break;
      case ExprKind::kLiteral:
        size = static_cast<int64_t>(arena.literals[static_cast<size_t>(e.payload)].size()) + 1;
        break;
      case ExprKind::kCharSet:
        size = 8;
        break;
      case ExprKind::kRuleRef:
        size = ref_size(e.payload);
        break;
      case ExprKind::kRepeat: {
        // Many copies usually become one counted copy (see kMaxExpandedCopies).
        int64_t copies = e.max == kUnbounded ? int64_t{e.min} + 1 : int64_t{e.max};
        if (copies > kMaxExpandedCopies) copies = 1;
        size = saturating_add(saturating_mul(f.total, std::max<int64_t>(copies, 1)), 2);
        break;
      }
      case ExprKind::kConcat:
      case ExprKind::kAlt:
        size = saturating_add(f.total, 1);
        break;
    }
    stack.pop_back();
    result = size;
  }
  return result;
}

}  // namespace

std::vector<uint8_t> plan_callable_rules(const Grammar& grammar, CompileBudget& budget) {
  const size_t n = grammar.rules.size();
  std::vector<std::vector<int32_t>> refs(n);
  for (size_t r = 0; r < n; ++r) {
    for_each_reference(grammar.arena, grammar.rules[r].expr,
                       [&](int32_t target) { refs[r].push_back(target); });
    budget.charge(static_cast<int64_t>(refs[r].size()) + 1, "grammar rules");
    std::sort(refs[r].begin(), refs[r].end());
  }

  std::vector<uint8_t> callable(n, 0);
  callable[static_cast<size_t>(grammar.root)] = 1;

  // Iterative DFS from root: the target of every back edge becomes callable, which leaves the
  // references to non-callable rules acyclic (every cycle has a back edge). Post-order of the
  // DFS gives callees before callers for the size pass below.
  enum : uint8_t { kWhite, kGray, kBlack };
  std::vector<uint8_t> color(n, kWhite);
  std::vector<int32_t> post_order;
  struct Frame {
    int32_t rule;
    size_t next;
  };
  std::vector<Frame> stack{{grammar.root, 0}};
  color[static_cast<size_t>(grammar.root)] = kGray;
  while (!stack.empty()) {
    Frame& f = stack.back();
    const auto& out = refs[static_cast<size_t>(f.rule)];
    if (f.next < out.size()) {
      const int32_t target = out[f.next++];
      if (color[static_cast<size_t>(target)] == kGray) {
        callable[static_cast<size_t>(target)] = 1;
      } else if (color[static_cast<size_t>(target)] == kWhite) {
        color[static_cast<size_t>(target)] = kGray;
        stack.push_back({target, 0});
      }
      continue;
    }
    color[static_cast<size_t>(f.rule)] = kBlack;
    post_order.push_back(f.rule);
    stack.pop_back();
  }

  // Reference counts among reachable rules, then sizes callees-first.
  std::vector<int32_t> n_refs(n, 0);
  for (int32_t r : post_order) {
    for (int32_t target : refs[static_cast<size_t>(r)]) ++n_refs[static_cast<size_t>(target)];
  }
  std::vector<int64_t> size(n, 1);
  for (int32_t r : post_order) {
    const int64_t s = estimate_size(
        grammar.arena, grammar.rules[static_cast<size_t>(r)].expr, [&](int32_t target) -> int64_t {
          return callable[static_cast<size_t>(target)] ? 2 : size[static_cast<size_t>(target)];
        });
    size[static_cast<size_t>(r)] = s;
    if (!callable[static_cast<size_t>(r)] && s > kMaxSharedInlineStates &&
        n_refs[static_cast<size_t>(r)] > 1) {
      callable[static_cast<size_t>(r)] = 1;
    }
  }
  // Only reachable rules matter: clear the marks of the others (they stay unvisited).
  for (size_t r = 0; r < n; ++r) {
    if (color[r] == kWhite) callable[r] = 0;
  }
  return callable;
}

std::vector<uint8_t> nullable_nodes(const Grammar& grammar, CompileBudget& budget) {
  const ExprArena& arena = grammar.arena;
  std::vector<uint8_t> nullable(arena.nodes.size(), 0);
  std::vector<uint8_t> rule_nullable(grammar.rules.size(), 0);
  // Each round evaluates every node once (children first); a round that makes no rule newly
  // nullable is the fixpoint. Rules become nullable monotonically, so rounds are bounded.
  bool changed = true;
  while (changed) {
    changed = false;
    budget.charge(static_cast<int64_t>(arena.nodes.size()) + 1, "grammar analysis steps");
    for (size_t i = 0; i < arena.nodes.size(); ++i) {
      const Expr& e = arena.nodes[i];
      bool value = false;
      switch (e.kind) {
        case ExprKind::kEmpty:
          value = true;
          break;
        case ExprKind::kLiteral:
        case ExprKind::kCharSet:
          value = false;
          break;
        case ExprKind::kRuleRef:
          value = e.payload >= 0 && rule_nullable[static_cast<size_t>(e.payload)];
          break;
        case ExprKind::kConcat:
          value = true;
          for (int32_t c : e.children) value = value && nullable[static_cast<size_t>(c)];
          break;
        case ExprKind::kAlt:
          for (int32_t c : e.children) value = value || nullable[static_cast<size_t>(c)];
          break;
        case ExprKind::kRepeat:
          value = e.min == 0 || nullable[static_cast<size_t>(e.children[0])];
          break;
      }
      nullable[i] = value ? 1 : 0;
    }
    for (size_t r = 0; r < grammar.rules.size(); ++r) {
      if (!rule_nullable[r] && nullable[static_cast<size_t>(grammar.rules[r].expr)]) {
        rule_nullable[r] = 1;
        changed = true;
      }
    }
  }
  return nullable;
}

namespace {

class NfaBuilder {
 public:
  NfaBuilder(const Grammar& grammar, const std::vector<uint8_t>& callable,
             const std::vector<uint8_t>& nullable, CompileBudget& budget)
      : g_(grammar), callable_(callable), nullable_(nullable), budget_(budget) {}

  Nfa build(int32_t rule) {
    nfa_.start = new_state(-1);
    nfa_.accept = build_fragment(g_.rules[static_cast<size_t>(rule)].expr, nfa_.start);
    return std::move(nfa_);
  }

 private:
  int32_t new_state(int32_t region) {
    budget_.charge(1, "automaton states");
    nfa_.out.emplace_back();
    nfa_.region_of.push_back(region);
    return static_cast<int32_t>(nfa_.out.size() - 1);
  }
  void edge(int32_t from, int32_t to, NfaEdgeKind kind, int32_t region = -1) {
    NfaEdge e;
    e.to = to;
    e.kind = kind;
    e.region = region;
    nfa_.out[static_cast<size_t>(from)].push_back(e);
  }
  void byte_edge(int32_t from, int32_t to, uint8_t lo, uint8_t hi) {
    NfaEdge e;
    e.to = to;
    e.lo = lo;
    e.hi = hi;
    e.kind = NfaEdgeKind::kByte;
    nfa_.out[static_cast<size_t>(from)].push_back(e);
  }

  // Follows references to inlined rules down to the expression that will be built.
  int32_t resolve(int32_t node) const {
    while (true) {
      const Expr& e = g_.arena.nodes[static_cast<size_t>(node)];
      if (e.kind != ExprKind::kRuleRef || callable_[static_cast<size_t>(e.payload)]) return node;
      node = g_.rules[static_cast<size_t>(e.payload)].expr;
    }
  }

  bool is_counted(const Expr& e, int32_t region) const {
    if (region >= 0) return false;  // one count per item: nested repetitions are expanded
    const int64_t copies = e.max == kUnbounded ? int64_t{e.min} : int64_t{e.max};
    return copies > kMaxExpandedCopies && !nullable_[static_cast<size_t>(e.children[0])];
  }

  // Builds the expression at `root` starting from state `in`; returns its end state. A fragment
  // only adds edges leaving `in`, never entering it, so siblings may share their start state.
  int32_t build_fragment(int32_t root, int32_t in) {
    struct Frame {
      int32_t node;
      int32_t in;
      int32_t region;  // the counted region the fragment's states belong to, or -1
      int32_t step = 0;
      int32_t cur = -1;  // end of what is built so far
      int32_t out = -1;  // join / loop state
      int32_t aux = -1;  // counted region: its id
    };
    std::vector<Frame> stack;
    stack.push_back({resolve(root), in, -1});
    int32_t result = in;
    while (!stack.empty()) {
      Frame& f = stack.back();
      const Expr& e = g_.arena.nodes[static_cast<size_t>(f.node)];
      const int32_t region = f.region;
      int32_t child_to_build = -1;
      int32_t child_in = -1;
      int32_t child_region = region;
      bool done = false;
      switch (e.kind) {
        case ExprKind::kEmpty:
          result = f.in;
          done = true;
          break;
        case ExprKind::kLiteral: {
          int32_t cur = f.in;
          for (char c : g_.arena.literals[static_cast<size_t>(e.payload)]) {
            const int32_t next = new_state(region);
            const auto b = static_cast<uint8_t>(c);
            byte_edge(cur, next, b, b);
            cur = next;
          }
          result = cur;
          done = true;
          break;
        }
        case ExprKind::kCharSet: {
          const int32_t out = new_state(region);
          for (const ByteSequence& seq :
               utf8_sequences(g_.arena.sets[static_cast<size_t>(e.payload)])) {
            int32_t cur = f.in;
            for (int i = 0; i < seq.length; ++i) {
              const int32_t next = i + 1 == seq.length ? out : new_state(region);
              byte_edge(cur, next, seq.ranges[static_cast<size_t>(i)].lo,
                        seq.ranges[static_cast<size_t>(i)].hi);
              cur = next;
            }
          }
          result = out;
          done = true;
          break;
        }
        case ExprKind::kRuleRef: {  // a callable rule (resolve() expanded the others)
          const int32_t out = new_state(region);
          NfaEdge call;
          call.to = out;
          call.call = e.payload;
          call.kind = NfaEdgeKind::kCall;
          nfa_.out[static_cast<size_t>(f.in)].push_back(call);
          result = out;
          done = true;
          break;
        }
        case ExprKind::kConcat: {
          f.cur = f.step == 0 ? f.in : result;
          if (static_cast<size_t>(f.step) == e.children.size()) {
            result = f.cur;
            done = true;
          } else {
            child_to_build = e.children[static_cast<size_t>(f.step++)];
            child_in = f.cur;
          }
          break;
        }
        case ExprKind::kAlt: {
          if (f.step == 0) {
            f.out = new_state(region);
          } else {
            edge(result, f.out, NfaEdgeKind::kEpsilon);
          }
          if (static_cast<size_t>(f.step) == e.children.size()) {
            result = f.out;
            done = true;
          } else {
            child_to_build = e.children[static_cast<size_t>(f.step++)];
            child_in = f.in;
          }
          break;
        }
        case ExprKind::kRepeat: {
          if (f.step == 0 && is_counted(e, region)) {
            // One copy of the body in a fresh region: in -enter-> body ... end -loop-> body,
            // end -exit-> out, and in -> out when zero iterations are allowed.
            f.aux = static_cast<int32_t>(nfa_.regions.size());
            NfaRegion r;
            r.min = e.min;
            r.max = e.max;
            r.node = f.node;
            nfa_.regions.push_back(r);
            f.cur = new_state(f.aux);
            edge(f.in, f.cur, NfaEdgeKind::kEnter, f.aux);
            f.step = -1;
            child_to_build = e.children[0];
            child_in = f.cur;
            child_region = f.aux;
            break;
          }
          if (f.step == -1) {  // the counted body is built
            const int32_t out = new_state(region);
            edge(result, f.cur, NfaEdgeKind::kLoop, f.aux);
            edge(result, out, NfaEdgeKind::kExit, f.aux);
            if (e.min == 0) edge(f.in, out, NfaEdgeKind::kEpsilon);
            result = out;
            done = true;
            break;
          }
          // Expanded. Steps 0..min-1: mandatory copies. Then, unbounded: one copy looping on a
          // fresh state; bounded: max-min optional copies, each of which may be skipped.
          const int32_t child = e.children[0];
          if (f.step == 0) {
            f.cur = f.in;
          } else if (f.step <= e.min) {
            f.cur = result;
          }
          if (f.step < e.min) {
            ++f.step;
            child_to_build = child;
            child_in = f.cur;
          } else if (e.max == kUnbounded) {
            if (f.step == e.min) {
              f.out = new_state(region);
              edge(f.cur, f.out, NfaEdgeKind::kEpsilon);
              ++f.step;
              child_to_build = child;
              child_in = f.out;
            } else {
              edge(result, f.out, NfaEdgeKind::kEpsilon);
              result = f.out;
              done = true;
            }
          } else {
            if (f.step == e.min) {
              f.out = new_state(region);
            } else {
              f.cur = result;
            }
            edge(f.cur, f.out, NfaEdgeKind::kEpsilon);
            if (f.step < e.max) {
              ++f.step;
              child_to_build = child;
              child_in = f.cur;
            } else {
              result = f.out;
              done = true;
            }
          }
          break;
        }
      }
      if (done) {
        stack.pop_back();
      } else {
        stack.push_back({resolve(child_to_build), child_in, child_region});
      }
    }
    return result;
  }

  const Grammar& g_;
  const std::vector<uint8_t>& callable_;
  const std::vector<uint8_t>& nullable_;
  CompileBudget& budget_;
  Nfa nfa_;
};

}  // namespace

Nfa build_rule_nfa(const Grammar& grammar, int32_t rule, const std::vector<uint8_t>& callable,
                   const std::vector<uint8_t>& nullable, CompileBudget& budget) {
  NfaBuilder builder(grammar, callable, nullable, budget);
  return builder.build(rule);
}

}  // namespace llms::structured
