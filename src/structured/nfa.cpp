// structured/nfa: see nfa.h.
#include "nfa.h"

#include <algorithm>
#include <optional>
#include <span>
#include <utility>

#include "util/error.h"

namespace llms::structured {
namespace {

// A rule inlined at more than one place is kept callable when its inlined automaton would be
// larger than this: the copies would cost more than the parser work a call adds.
constexpr int64_t kMaxSharedInlineStates = 2048;
// So is one whose copies together would pass this many states, unless it is tiny (a number, a
// keyword): the free JSON string (~40 states) behind every string-valued property of a large
// schema was a fifth of its automaton, and calling it made the corpus's masks no slower.
constexpr int64_t kMaxSharedInlineTotal = 8192;
constexpr int64_t kMinCalledStates = 24;
constexpr int64_t kSaturated = int64_t{1} << 40;

int64_t saturating_add(int64_t a, int64_t b) { return std::min(kSaturated, a + b); }
int64_t saturating_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  if (a > kSaturated / b) return kSaturated;
  return std::min(kSaturated, a * b);
}

// Calls fn(rule) for every rule referenced in the expression tree at `root` (with repeats).
// `stack` is scratch space, kept by the caller across rules.
template <typename Fn>
void for_each_reference(const ExprArena& arena, int32_t root, std::vector<int32_t>& stack,
                        Fn&& fn) {
  stack.assign(1, root);
  while (!stack.empty()) {
    const Expr& e = arena.nodes[static_cast<size_t>(stack.back())];
    stack.pop_back();
    if (e.kind == ExprKind::kRuleRef) fn(e.payload);
    for (int32_t c : arena.children(e)) stack.push_back(c);
  }
}

// A repetition outside counted regions whose body cannot be empty is counted when it has more
// copies than max_expanded_copies() (NfaBuilder::is_counted); these two say how many.
int64_t counted_copies(const Expr& e) {
  return e.max == kUnbounded ? int64_t{e.min} : int64_t{e.max};
}
int64_t max_expanded_copies(const ExprArena& arena, const Expr& e) {
  const bool one_set =
      arena.nodes[static_cast<size_t>(arena.child(e, 0))].kind == ExprKind::kCharSet;
  return one_set ? kMaxExpandedSetCopies : kMaxExpandedCopies;
}

struct SizeFrame {
  int32_t node;
  size_t next_child;
  int64_t total;
  bool in_region;  // inside a counted repetition of this tree: nested ones are expanded
};

// Estimated NFA states of an expression whose references cost ref_size(rule). Iterative
// post-order over the tree; `stack` is scratch space, kept by the caller across rules.
template <typename RefSize>
int64_t estimate_size(const ExprArena& arena, int32_t root, RefSize&& ref_size,
                      std::vector<SizeFrame>& stack) {
  auto counts = [&](const Expr& e, bool in_region) {
    return !in_region && e.kind == ExprKind::kRepeat &&
           counted_copies(e) > max_expanded_copies(arena, e);
  };
  stack.assign(1, SizeFrame{root, 0, 0, false});
  int64_t result = 0;
  while (!stack.empty()) {
    SizeFrame& f = stack.back();
    const Expr& e = arena.nodes[static_cast<size_t>(f.node)];
    if (f.next_child > 0) f.total = saturating_add(f.total, result);
    if (f.next_child < e.n_children) {
      const int32_t child = arena.child(e, f.next_child++);
      const bool in_region = f.in_region || counts(e, f.in_region);
      stack.push_back({child, 0, 0, in_region});
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
        // Counted: one copy; expanded: the mandatory copies and the optional ones, or one
        // looping copy when unbounded.
        const int64_t copies = counts(e, f.in_region) ? 1
                               : e.max == kUnbounded  ? int64_t{e.min} + 1
                                                      : int64_t{e.max};
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

std::vector<uint8_t> plan_callable_rules(const Grammar& grammar, CompileBudget& budget,
                                         SharedRules shared) {
  const size_t n = grammar.rules.size();
  // Each rule's references, sorted, in one flat array: refs_of(r).
  std::vector<int32_t> all_refs;
  std::vector<size_t> refs_begin(n + 1, 0);
  std::vector<int32_t> scratch;
  for (size_t r = 0; r < n; ++r) {
    for_each_reference(grammar.arena, grammar.rules[r].expr, scratch,
                       [&](int32_t target) { all_refs.push_back(target); });
    refs_begin[r + 1] = all_refs.size();
    budget.charge(static_cast<int64_t>(refs_begin[r + 1] - refs_begin[r]) + 1, "grammar rules");
    std::sort(all_refs.begin() + static_cast<std::ptrdiff_t>(refs_begin[r]), all_refs.end());
  }
  auto refs_of = [&](size_t r) {
    return std::span<const int32_t>(all_refs).subspan(refs_begin[r],
                                                      refs_begin[r + 1] - refs_begin[r]);
  };

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
    const auto out = refs_of(static_cast<size_t>(f.rule));
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
    for (int32_t target : refs_of(static_cast<size_t>(r))) ++n_refs[static_cast<size_t>(target)];
  }
  std::vector<int64_t> size(n, 1);
  std::vector<SizeFrame> size_stack;
  for (int32_t r : post_order) {
    const int64_t s = estimate_size(
        grammar.arena, grammar.rules[static_cast<size_t>(r)].expr,
        [&](int32_t target) -> int64_t {
          return callable[static_cast<size_t>(target)] ? 2 : size[static_cast<size_t>(target)];
        },
        size_stack);
    size[static_cast<size_t>(r)] = s;
    const int64_t copies = n_refs[static_cast<size_t>(r)];
    const bool large = s > kMaxSharedInlineStates ||
                       (s >= kMinCalledStates && saturating_mul(s, copies) > kMaxSharedInlineTotal);
    if (callable[static_cast<size_t>(r)] || !large || copies <= 1) continue;
    // A rule that inlines others may only look large: its tree counts a rule reached twice
    // twice, where the automaton builder shares the copy (optional properties in a row).
    const auto targets = refs_of(static_cast<size_t>(r));
    const bool leaf = std::all_of(targets.begin(), targets.end(),
                                  [&](int32_t t) { return callable[static_cast<size_t>(t)] != 0; });
    if (shared == SharedRules::kLargeCalled || leaf) {
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
  const size_t n = arena.nodes.size();
  budget.charge(2 * static_cast<int64_t>(n + arena.child_ids.size()) + 1, "grammar analysis steps");
  // One pass, children first, with no rule nullable yet; then what a rule's becoming nullable
  // changes, along parent links (a work list: every node turns nullable once, where a pass per
  // round took as many rounds as the rules were deep, 10 to 70 on large schemas).
  std::vector<uint8_t> nullable(n, 0);
  std::vector<int32_t> missing(n, 0);  // a sequence's children not (yet) nullable
  for (size_t i = 0; i < n; ++i) {
    const Expr& e = arena.nodes[i];
    bool value = false;
    switch (e.kind) {
      case ExprKind::kEmpty:
        value = true;
        break;
      case ExprKind::kLiteral:
      case ExprKind::kCharSet:
      case ExprKind::kRuleRef:
        break;
      case ExprKind::kConcat:
        for (int32_t c : arena.children(e)) missing[i] += nullable[static_cast<size_t>(c)] ? 0 : 1;
        value = missing[i] == 0;
        break;
      case ExprKind::kAlt:
        for (int32_t c : arena.children(e)) value = value || nullable[static_cast<size_t>(c)];
        break;
      case ExprKind::kRepeat:
        value = e.min == 0 || nullable[static_cast<size_t>(arena.child(e, 0))];
        break;
    }
    nullable[i] = value ? 1 : 0;
  }
  // Parents of each node, the references of each rule and the rules rooted at each node, in
  // flat arrays (CSR): key k's values are values[begin[k], begin[k + 1]).
  struct Flat {
    std::vector<uint32_t> begin;
    std::vector<int32_t> values;
  };
  auto flat = [](size_t n_keys, auto&& for_each_pair) {
    Flat f;
    f.begin.assign(n_keys + 1, 0);
    for_each_pair([&](size_t key, int32_t) { ++f.begin[key + 1]; });
    for (size_t k = 0; k < n_keys; ++k) f.begin[k + 1] += f.begin[k];
    f.values.resize(f.begin[n_keys]);
    std::vector<uint32_t> fill(f.begin.begin(), f.begin.end() - 1);
    for_each_pair([&](size_t key, int32_t value) { f.values[fill[key]++] = value; });
    return f;
  };
  const Flat parents = flat(n, [&](auto&& add) {
    for (size_t i = 0; i < n; ++i) {
      for (int32_t c : arena.children(arena.nodes[i]))
        add(static_cast<size_t>(c), static_cast<int32_t>(i));
    }
  });
  const size_t n_rules = grammar.rules.size();
  const Flat refs = flat(n_rules, [&](auto&& add) {
    for (size_t i = 0; i < n; ++i) {
      const Expr& e = arena.nodes[i];
      if (e.kind == ExprKind::kRuleRef && e.payload >= 0)
        add(static_cast<size_t>(e.payload), static_cast<int32_t>(i));
    }
  });
  const Flat rooted = flat(n, [&](auto&& add) {
    for (size_t r = 0; r < n_rules; ++r) {
      if (grammar.rules[r].expr >= 0)
        add(static_cast<size_t>(grammar.rules[r].expr), static_cast<int32_t>(r));
    }
  });

  std::vector<uint8_t> rule_nullable(n_rules, 0);
  std::vector<int32_t> work;  // nodes turned nullable after the first pass
  auto turn_nullable = [&](int32_t node) {
    if (nullable[static_cast<size_t>(node)]) return;
    nullable[static_cast<size_t>(node)] = 1;
    work.push_back(node);
  };
  // The rules rooted at a nullable node are nullable, and so are their references.
  auto rules_rooted_at = [&](size_t node) {
    for (uint32_t k = rooted.begin[node]; k < rooted.begin[node + 1]; ++k) {
      const auto r = static_cast<size_t>(rooted.values[k]);
      if (rule_nullable[r]) continue;
      rule_nullable[r] = 1;
      for (uint32_t j = refs.begin[r]; j < refs.begin[r + 1]; ++j) turn_nullable(refs.values[j]);
    }
  };
  for (size_t i = 0; i < n; ++i) {
    if (nullable[i]) rules_rooted_at(i);
  }
  while (!work.empty()) {
    const auto w = static_cast<size_t>(work.back());
    work.pop_back();
    rules_rooted_at(w);
    // The parents counted w as not nullable in the first pass; each meets it once per
    // occurrence among its children.
    for (uint32_t k = parents.begin[w]; k < parents.begin[w + 1]; ++k) {
      const int32_t p = parents.values[k];
      if (arena.nodes[static_cast<size_t>(p)].kind == ExprKind::kConcat) {
        if (--missing[static_cast<size_t>(p)] == 0) turn_nullable(p);
      } else {
        turn_nullable(p);  // a choice or a repetition of a nullable expression
      }
    }
  }
  return nullable;
}

namespace {

class NfaBuilder {
 public:
  NfaBuilder(const Grammar& grammar, const std::vector<uint8_t>& callable,
             const std::vector<uint8_t>& nullable, CharSetSequences& set_sequences,
             CompileBudget& budget, int64_t max_states)
      : g_(grammar),
        callable_(callable),
        nullable_(nullable),
        set_sequences_(set_sequences),
        budget_(budget),
        max_states_(max_states) {}

  // The automaton is built backwards, from the accept state: a fragment is built given the
  // state it must lead to. Fragments only add edges leaving states they create (never leaving
  // the state they lead to), so a fragment built for a rule and a given target can be reused by
  // every other reference to that rule with the same target. Properties written one after
  // another with optional ones skipped (`p1 ::= "a" p2-2 | p2`, `p1-2 ::= "," "a" p2-2 | p2-2`)
  // reach each rule with one target, so the automaton grows linearly, where copying every
  // reference would double it per property.
  std::optional<Nfa> build(int32_t rule) {
    const std::optional<int32_t> accept = new_state(-1);
    if (!accept) return std::nullopt;
    const int32_t start = build_fragment(g_.rules[static_cast<size_t>(rule)].expr, *accept);
    if (start < 0) return std::nullopt;
    nfa_.start = start;
    nfa_.accept = *accept;
    // The edges grouped by source state, each state's in the order added (a counting sort:
    // reads in order, scattered writes).
    const size_t n_states = nfa_.region_of.size();
    nfa_.begin.assign(n_states + 1, 0);
    for (const PooledEdge& p : pool_) ++nfa_.begin[static_cast<size_t>(p.from) + 1];
    for (size_t s = 0; s < n_states; ++s) nfa_.begin[s + 1] += nfa_.begin[s];
    std::vector<uint32_t> fill(nfa_.begin.begin(), nfa_.begin.end() - 1);
    nfa_.edges.resize(pool_.size());
    for (const PooledEdge& p : pool_) nfa_.edges[fill[static_cast<size_t>(p.from)]++] = p.edge;
    return std::move(nfa_);
  }

 private:
  // A new state, or nullopt past max_states_ (the caller gives up).
  std::optional<int32_t> new_state(int32_t region) {
    if (static_cast<int64_t>(nfa_.region_of.size()) >= max_states_) return std::nullopt;
    budget_.charge(1, "automaton states");
    continuations_of_.push_back(-1);
    nfa_.region_of.push_back(region);
    return static_cast<int32_t>(nfa_.region_of.size() - 1);
  }
  // Edges are added to states made earlier (an alternation's entry gets one per branch as
  // each is built), so they are pooled with their source until build() groups them.
  void add_edge(int32_t from, const NfaEdge& e) { pool_.push_back(PooledEdge{e, from}); }
  void edge(int32_t from, int32_t to, NfaEdgeKind kind, int32_t region = -1) {
    NfaEdge e;
    e.to = to;
    e.kind = kind;
    e.region = region;
    add_edge(from, e);
  }
  void byte_edge(int32_t from, int32_t to, uint8_t lo, uint8_t hi) {
    NfaEdge e;
    e.to = to;
    e.lo = lo;
    e.hi = hi;
    e.kind = NfaEdgeKind::kByte;
    add_edge(from, e);
  }

  bool is_counted(const Expr& e, int32_t region) const {
    if (region >= 0) return false;  // one count per item: nested repetitions are expanded
    return counted_copies(e) > max_expanded_copies(g_.arena, e) &&
           !nullable_[static_cast<size_t>(g_.arena.child(e, 0))];
  }

  // The state that reads one byte of `range` and goes to `to`, made once per (to, region,
  // range): the multi-byte sequences of a character set, and of every set leading to the same
  // state, share their continuation states. A name pattern that excludes an object's declared
  // names has a complement class (most of Unicode: a dozen sequences) at every character of
  // every name, all leading on to the same place; apart, their continuation states were most
  // of such a pattern's automaton.
  // These are the only states that fragments other than the one that made them lead into;
  // that is exact because a state gets all its edges when it is made, and these only ever have
  // their one byte edge. Their target lies in the same counted region (a fragment's states and
  // its target share one), which the key repeats for safety.
  int32_t continuation_state(int32_t to, int32_t region, ByteRange range) {
    // Per `to`, a short list (a few ranges: 80-BF, and the narrower second bytes).
    for (int32_t i = continuations_of_[static_cast<size_t>(to)]; i >= 0;) {
      const Continuation& c = continuations_[static_cast<size_t>(i)];
      if (c.region == region && c.lo == range.lo && c.hi == range.hi) return c.state;
      i = c.next;
    }
    const std::optional<int32_t> s = new_state(region);
    if (!s) return -1;
    byte_edge(*s, to, range.lo, range.hi);
    int32_t& head = continuations_of_[static_cast<size_t>(to)];
    continuations_.push_back(Continuation{*s, head, region, range.lo, range.hi});
    head = static_cast<int32_t>(continuations_.size() - 1);
    return *s;
  }

  static constexpr uint64_t kNoMemoKey = ~uint64_t{0};  // rule and target are never negative
  size_t memo_slot(uint64_t key) const {
    size_t i = static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & (memo_.size() - 1);
    while (memo_[i].first != kNoMemoKey && memo_[i].first != key) i = (i + 1) & (memo_.size() - 1);
    return i;
  }
  const int32_t* memo_find(uint64_t key) const {
    if (memo_.empty()) return nullptr;
    const auto& slot = memo_[memo_slot(key)];
    return slot.first == key ? &slot.second : nullptr;
  }
  void memo_insert(uint64_t key, int32_t entry) {
    if (2 * (memo_used_ + 1) > memo_.size()) {  // at most half full
      std::vector<std::pair<uint64_t, int32_t>> old(std::max<size_t>(64, 2 * memo_.size()),
                                                    {kNoMemoKey, -1});
      old.swap(memo_);
      for (const auto& slot : old) {
        if (slot.first != kNoMemoKey) memo_[memo_slot(slot.first)] = slot;
      }
    }
    auto& slot = memo_[memo_slot(key)];
    if (slot.first == kNoMemoKey) ++memo_used_;
    slot = {key, entry};
  }

  static uint64_t memo_key(int32_t rule, int32_t target) {
    return static_cast<uint64_t>(static_cast<uint32_t>(rule)) << 32 | static_cast<uint32_t>(target);
  }

  // Builds the expression at `root` so that it leads to state `target`; returns its entry
  // state, or -1 past max_states_.
  int32_t build_fragment(int32_t root, int32_t target) {
    struct Frame {
      int32_t node;
      int32_t target;
      int32_t region;  // the counted region the fragment's states belong to, or -1
      int32_t step = 0;
      int32_t cur = -1;    // entry of what is built so far (concatenations, repeats)
      int32_t entry = -1;  // alternation / optional copy entry state
      int32_t aux = -1;    // counted region: its id; counted body end state in `cur`
      int32_t mark = -1;   // expanded repeat: states made before the last copy
    };
    std::vector<Frame> stack;
    stack.push_back({root, target, -1});
    int32_t result = target;
    while (!stack.empty()) {
      Frame& f = stack.back();
      const Expr& e = g_.arena.nodes[static_cast<size_t>(f.node)];
      const int32_t region = f.region;
      int32_t child_to_build = -1;
      int32_t child_target = -1;
      int32_t child_region = region;
      bool done = false;
      switch (e.kind) {
        case ExprKind::kEmpty:
          result = f.target;
          done = true;
          break;
        case ExprKind::kLiteral: {
          int32_t cur = f.target;
          const std::string& bytes = g_.arena.literals[static_cast<size_t>(e.payload)];
          for (size_t i = bytes.size(); i-- > 0;) {
            const std::optional<int32_t> prev = new_state(region);
            if (!prev) return -1;
            const auto b = static_cast<uint8_t>(bytes[i]);
            byte_edge(*prev, cur, b, b);
            cur = *prev;
          }
          result = cur;
          done = true;
          break;
        }
        case ExprKind::kCharSet: {
          const std::optional<int32_t> entry = new_state(region);
          if (!entry) return -1;
          const std::vector<ByteSequence>& sequences = set_sequences_.of(e.payload);
          if (sequences.empty()) nfa_.dead_leaf = true;
          for (const ByteSequence& seq : sequences) {
            // Continuation bytes last to first, through states shared by every sequence with
            // the same rest and target (continuation_state); then the lead byte from the entry.
            int32_t next = f.target;
            for (int i = seq.length - 1; i > 0; --i) {
              next = continuation_state(next, region, seq.ranges[static_cast<size_t>(i)]);
              if (next < 0) return -1;
            }
            byte_edge(*entry, next, seq.ranges[0].lo, seq.ranges[0].hi);
          }
          result = *entry;
          done = true;
          break;
        }
        case ExprKind::kRuleRef: {
          if (callable_[static_cast<size_t>(e.payload)]) {
            const std::optional<int32_t> entry = new_state(region);
            if (!entry) return -1;
            NfaEdge call;
            call.to = f.target;
            call.call = e.payload;
            call.kind = NfaEdgeKind::kCall;
            add_edge(*entry, call);
            result = *entry;
            done = true;
            break;
          }
          // Inlined: reuse the copy already built for this target, else build one.
          const uint64_t key = memo_key(e.payload, f.target);
          if (f.step == 0) {
            if (const int32_t* entry = memo_find(key)) {
              result = *entry;
              done = true;
              break;
            }
            f.step = 1;
            child_to_build = g_.rules[static_cast<size_t>(e.payload)].expr;
            child_target = f.target;
          } else {
            memo_insert(key, result);
            done = true;
          }
          break;
        }
        case ExprKind::kConcat: {  // children last to first
          const auto n = static_cast<int32_t>(e.n_children);
          f.cur = f.step == 0 ? f.target : result;
          if (f.step == n) {
            result = f.cur;
            done = true;
          } else {
            child_to_build = g_.arena.child(e, static_cast<size_t>(n - 1 - f.step++));
            child_target = f.cur;
          }
          break;
        }
        case ExprKind::kAlt: {
          if (f.step == 0) {
            const std::optional<int32_t> entry = new_state(region);
            if (!entry) return -1;
            f.entry = *entry;
            if (e.n_children == 0) nfa_.dead_leaf = true;
          } else {
            edge(f.entry, result, NfaEdgeKind::kEpsilon);
          }
          if (static_cast<uint32_t>(f.step) == e.n_children) {
            result = f.entry;
            done = true;
          } else {
            child_to_build = g_.arena.child(e, static_cast<size_t>(f.step++));
            child_target = f.target;
          }
          break;
        }
        case ExprKind::kRepeat: {
          if (f.step == 0 && is_counted(e, region)) {
            // One copy of the body in a fresh region: entry -enter-> body ... end -loop-> body,
            // end -exit-> target, and entry -> target when zero iterations are allowed.
            f.aux = static_cast<int32_t>(nfa_.regions.size());
            NfaRegion r;
            r.min = e.min;
            r.max = e.max;
            r.node = f.node;
            nfa_.regions.push_back(r);
            const std::optional<int32_t> end = new_state(f.aux);
            if (!end) return -1;
            f.cur = *end;
            f.step = -1;
            child_to_build = g_.arena.child(e, 0);
            child_target = f.cur;
            child_region = f.aux;
            break;
          }
          if (f.step == -1) {  // the counted body is built; `result` is its entry
            const std::optional<int32_t> entry = new_state(region);
            if (!entry) return -1;
            edge(f.cur, result, NfaEdgeKind::kLoop, f.aux);
            edge(f.cur, f.target, NfaEdgeKind::kExit, f.aux);
            edge(*entry, result, NfaEdgeKind::kEnter, f.aux);
            if (e.min == 0) edge(*entry, f.target, NfaEdgeKind::kEpsilon);
            result = *entry;
            done = true;
            break;
          }
          // Expanded, built from the end: unbounded, one copy looping on a fresh state;
          // bounded, max - min optional copies, each of whose entries may skip to the target;
          // then the min mandatory copies in front.
          const int32_t child = g_.arena.child(e, 0);
          const int32_t optional = e.max == kUnbounded ? 1 : e.max - e.min;
          // A copy that made no state is charged: a body like that (`""{10000}{10000}{10000}`)
          // would otherwise repeat without limit and without reading the clock.
          const auto states = static_cast<int32_t>(nfa_.region_of.size());
          if (f.step > 0 && states == f.mark) budget_.charge(1, "expanded repetitions");
          f.mark = states;
          if (f.step == 0) f.cur = f.target;
          if (f.step > 0 && f.step <= optional) {  // an optional copy is built
            edge(f.entry, result, NfaEdgeKind::kEpsilon);
            f.cur = f.entry;
          } else if (f.step > optional) {  // a mandatory copy is built
            f.cur = result;
          }
          if (f.step < optional) {
            const std::optional<int32_t> entry = new_state(region);
            if (!entry) return -1;
            f.entry = *entry;
            edge(f.entry, f.target, NfaEdgeKind::kEpsilon);  // skip the optional copies
            // The unbounded copy loops back to its entry; bounded ones lead to the next.
            child_target = e.max == kUnbounded ? f.entry : f.cur;
            ++f.step;
            child_to_build = child;
          } else if (f.step < optional + e.min) {
            ++f.step;
            child_to_build = child;
            child_target = f.cur;
          } else {
            result = f.cur;
            done = true;
          }
          break;
        }
      }
      if (done) {
        stack.pop_back();
      } else {
        stack.push_back({child_to_build, child_target, child_region});
      }
    }
    return result;
  }

  const Grammar& g_;
  const std::vector<uint8_t>& callable_;
  const std::vector<uint8_t>& nullable_;
  CharSetSequences& set_sequences_;
  CompileBudget& budget_;
  int64_t max_states_;
  Nfa nfa_;  // start, accept, regions and region_of while building; edges at the end
  struct PooledEdge {
    NfaEdge edge;
    int32_t from;
  };
  std::vector<PooledEdge> pool_;  // every edge, in the order added
  // (inlined rule, target) -> entry state, by open addressing: a node per entry was most of
  // the builder's allocations on large schemas.
  std::vector<std::pair<uint64_t, int32_t>> memo_;  // empty slots hold kNoMemoKey
  size_t memo_used_ = 0;
  struct Continuation {
    int32_t state;  // reads [lo, hi], then goes to the state whose list holds it
    int32_t next;   // the next entry of that list, or -1
    int32_t region;
    uint8_t lo;
    uint8_t hi;
  };
  std::vector<Continuation> continuations_;
  std::vector<int32_t> continuations_of_;  // per state: its first entry, or -1
};

}  // namespace

const std::vector<ByteSequence>& CharSetSequences::of(int32_t set) {
  const auto i = static_cast<size_t>(set);
  if (!done_[i]) {
    sequences_[i] = utf8_sequences(arena_.sets[i]);
    done_[i] = 1;
  }
  return sequences_[i];
}

std::optional<Nfa> build_rule_nfa(const Grammar& grammar, int32_t rule,
                                  const std::vector<uint8_t>& callable,
                                  const std::vector<uint8_t>& nullable,
                                  CharSetSequences& set_sequences, CompileBudget& budget,
                                  int64_t max_states) {
  NfaBuilder builder(grammar, callable, nullable, set_sequences, budget, max_states);
  return builder.build(rule);
}

}  // namespace llms::structured
