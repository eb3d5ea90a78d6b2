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
        const int64_t copies = e.max == kUnbounded ? int64_t{e.min} + 1 : int64_t{e.max};
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

namespace {

class NfaBuilder {
 public:
  NfaBuilder(const Grammar& grammar, const std::vector<uint8_t>& callable, CompileBudget& budget)
      : g_(grammar), callable_(callable), budget_(budget) {}

  Nfa build(int32_t rule) {
    nfa_.start = new_state();
    nfa_.accept = build_fragment(g_.rules[static_cast<size_t>(rule)].expr, nfa_.start);
    return std::move(nfa_);
  }

 private:
  int32_t new_state() {
    budget_.charge(1, "automaton states");
    nfa_.out.emplace_back();
    return static_cast<int32_t>(nfa_.out.size() - 1);
  }
  void epsilon(int32_t from, int32_t to) {
    NfaEdge e;
    e.to = to;
    e.epsilon = true;
    nfa_.out[static_cast<size_t>(from)].push_back(e);
  }
  void byte_edge(int32_t from, int32_t to, uint8_t lo, uint8_t hi) {
    NfaEdge e;
    e.to = to;
    e.lo = lo;
    e.hi = hi;
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

  // Builds the expression at `root` starting from state `in`; returns its end state. A fragment
  // only adds edges leaving `in`, never entering it, so siblings may share their start state.
  int32_t build_fragment(int32_t root, int32_t in) {
    struct Frame {
      int32_t node;
      int32_t in;
      int32_t step = 0;
      int32_t cur = -1;  // end of what is built so far
      int32_t out = -1;  // join / loop state
    };
    std::vector<Frame> stack;
    stack.push_back({resolve(root), in});
    int32_t result = in;
    while (!stack.empty()) {
      Frame& f = stack.back();
      const Expr& e = g_.arena.nodes[static_cast<size_t>(f.node)];
      int32_t child_to_build = -1;
      int32_t child_in = -1;
      bool done = false;
      switch (e.kind) {
        case ExprKind::kEmpty:
          result = f.in;
          done = true;
          break;
        case ExprKind::kLiteral: {
          int32_t cur = f.in;
          for (char c : g_.arena.literals[static_cast<size_t>(e.payload)]) {
            const int32_t next = new_state();
            const auto b = static_cast<uint8_t>(c);
            byte_edge(cur, next, b, b);
            cur = next;
          }
          result = cur;
          done = true;
          break;
        }
        case ExprKind::kCharSet: {
          const int32_t out = new_state();
          for (const ByteSequence& seq :
               utf8_sequences(g_.arena.sets[static_cast<size_t>(e.payload)])) {
            int32_t cur = f.in;
            for (int i = 0; i < seq.length; ++i) {
              const int32_t next = i + 1 == seq.length ? out : new_state();
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
          const int32_t out = new_state();
          NfaEdge call;
          call.to = out;
          call.call = e.payload;
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
            f.out = new_state();
          } else {
            epsilon(result, f.out);
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
          // Steps 0..min-1: mandatory copies. Then, unbounded: one copy looping on a fresh state;
          // bounded: max-min optional copies, each of which may be skipped to the join state.
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
              f.out = new_state();
              epsilon(f.cur, f.out);
              ++f.step;
              child_to_build = child;
              child_in = f.out;
            } else {
              epsilon(result, f.out);
              result = f.out;
              done = true;
            }
          } else {
            if (f.step == e.min) {
              f.out = new_state();
            } else {
              f.cur = result;
            }
            epsilon(f.cur, f.out);
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
        stack.push_back({resolve(child_to_build), child_in});
      }
    }
    return result;
  }

  const Grammar& g_;
  const std::vector<uint8_t>& callable_;
  CompileBudget& budget_;
  Nfa nfa_;
};

}  // namespace

Nfa build_rule_nfa(const Grammar& grammar, int32_t rule, const std::vector<uint8_t>& callable,
                   CompileBudget& budget) {
  NfaBuilder builder(grammar, callable, budget);
  return builder.build(rule);
}

}  // namespace llms::structured
