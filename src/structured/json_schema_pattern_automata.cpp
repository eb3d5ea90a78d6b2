// structured/json_schema_pattern_automata: pattern languages as automata (see
// json_schema_pattern.h): matching a string, intersecting two languages, and taking finitely many
// strings out of one (Brzozowski derivatives).
#include <algorithm>
#include <memory>
#include <unordered_set>

#include "structured/json_schema_pattern.h"
#include "util/error.h"
#include "util/utf8.h"

namespace llms::structured::jsonschema {

namespace {

// A Thompson NFA over code points, for checking enum values and property names.
struct Nfa {
  struct State {
    CodePointSet set;  // consuming transition to `next` (when has_set)
    bool has_set = false;
    int next = -1;
    std::vector<int> epsilon;  // non-consuming transitions
  };
  std::vector<State> states;

  int add(CompileBudget& budget) {
    budget.charge(1, "pattern matcher states");
    states.emplace_back();
    return static_cast<int>(states.size()) - 1;
  }

  // Builds `node` between fresh states; returns {start, end}.
  std::pair<int, int> build(const PatternNode& node, CompileBudget& budget) {
    using Kind = PatternNode::Kind;
    const int start = add(budget);
    switch (node.kind) {
      case Kind::kStartAnchor:
      case Kind::kEndAnchor:  // only while parsing
        return {start, start};
      case Kind::kSet: {
        const int end = add(budget);
        states[start].has_set = true;
        states[start].set = node.set;
        states[start].next = end;
        return {start, end};
      }
      case Kind::kConcat: {
        int current = start;
        for (const PatternNode& child : node.children) {
          auto [s, e] = build(child, budget);
          states[current].epsilon.push_back(s);
          current = e;
        }
        return {start, current};
      }
      case Kind::kAlternation: {
        const int end = add(budget);
        for (const PatternNode& child : node.children) {
          auto [s, e] = build(child, budget);
          states[start].epsilon.push_back(s);
          states[e].epsilon.push_back(end);
        }
        return {start, end};
      }
      case Kind::kRepeat: {
        int current = start;
        const PatternNode& child = node.children[0];
        for (int64_t i = 0; i < node.min; ++i) {
          auto [s, e] = build(child, budget);
          states[current].epsilon.push_back(s);
          current = e;
        }
        const int end = add(budget);
        if (node.max == kUnbounded) {
          auto [s, e] = build(child, budget);
          states[current].epsilon.push_back(s);
          states[current].epsilon.push_back(end);
          states[e].epsilon.push_back(s);
          states[e].epsilon.push_back(end);
        } else {
          for (int64_t i = node.min; i < node.max; ++i) {
            auto [s, e] = build(child, budget);
            states[current].epsilon.push_back(s);
            states[current].epsilon.push_back(end);
            current = e;
          }
          states[current].epsilon.push_back(end);
        }
        return {start, end};
      }
    }
    return {start, start};
  }

  void closure(std::vector<int>& current, std::vector<char>& in_set) const {
    for (size_t i = 0; i < current.size(); ++i) {
      for (int next : states[current[i]].epsilon) {
        if (!in_set[next]) in_set[next] = 1, current.push_back(next);
      }
    }
  }
};

}  // namespace

bool pattern_matches(const PatternNode& node, std::string_view text, CompileBudget& budget) {
  Nfa nfa;
  auto [start, end] = nfa.build(node, budget);
  std::vector<char> in_set(nfa.states.size(), 0);
  std::vector<int> current{start};
  in_set[start] = 1;
  nfa.closure(current, in_set);
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Step step = utf8_step(text, pos);
    if (step.kind != Utf8Step::Kind::kValid) return false;
    pos += step.length;
    budget.charge(static_cast<int64_t>(current.size() / 64 + 1), "pattern matching");
    std::vector<int> next;
    std::vector<char> next_in(nfa.states.size(), 0);
    for (int s : current) {
      const Nfa::State& state = nfa.states[s];
      if (state.has_set && state.set.contains(step.code_point) && !next_in[state.next]) {
        next_in[state.next] = 1;
        next.push_back(state.next);
      }
    }
    nfa.closure(next, next_in);
    current = std::move(next);
    in_set = std::move(next_in);
    if (current.empty()) return false;
  }
  return in_set[end] != 0;
}

namespace {

bool nullable_language(const PatternNode& node) { return pattern_length(node).min == 0; }

PatternNode empty_string() { return PatternNode::concat({}); }

// Repeat(X, m, n) after one iteration is taken: Repeat(X, max(m - 1, 0), n - 1).
PatternNode one_fewer(const PatternNode& repeat) {
  return PatternNode::repeat(repeat.children[0], std::max<int64_t>(repeat.min - 1, 0),
                             repeat.max == kUnbounded ? kUnbounded : repeat.max - 1);
}

// What a language holds after a first character in `allowed` (on simplified nodes; the result
// is not simplified): its strings that start so, kept whole (kKeep), or with that first character
// taken off (kDrop; with allowed = {c}, the derivative by c).
enum class FirstChar { kKeep, kDrop };

PatternNode first_char_in(const PatternNode& node, const CodePointSet& allowed, FirstChar mode,
                          CompileBudget& budget) {
  using Kind = PatternNode::Kind;
  budget.charge(1, "pattern derivatives");
  switch (node.kind) {
    case Kind::kSet: {
      CodePointSet first = node.set.intersect(allowed);
      if (mode == FirstChar::kKeep) return PatternNode::of_set(std::move(first));
      return first.empty() ? PatternNode::nothing() : empty_string();
    }
    case Kind::kConcat: {
      std::vector<PatternNode> options;
      for (size_t i = 0; i < node.children.size(); ++i) {
        std::vector<PatternNode> parts{first_char_in(node.children[i], allowed, mode, budget)};
        parts.insert(parts.end(), node.children.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                     node.children.end());
        options.push_back(PatternNode::concat(std::move(parts)));
        if (!nullable_language(node.children[i])) break;
      }
      return PatternNode::alternation(std::move(options));
    }
    case Kind::kAlternation: {
      std::vector<PatternNode> options;
      for (const PatternNode& child : node.children)
        options.push_back(first_char_in(child, allowed, mode, budget));
      return PatternNode::alternation(std::move(options));
    }
    case Kind::kRepeat:
      if (node.max == 0) return PatternNode::nothing();
      return PatternNode::concat(
          {first_char_in(node.children[0], allowed, mode, budget), one_fewer(node)});
    default:
      return PatternNode::nothing();
  }
}

struct NameTrie {
  std::vector<std::pair<char32_t, std::unique_ptr<NameTrie>>> children;  // sorted by code point
  bool terminal = false;
};

constexpr int kMaxExcludedNameLength = 1000;

PatternNode minus_trie(const PatternNode& language, const NameTrie& trie, CompileBudget& budget) {
  std::vector<PatternNode> options;
  if (!trie.terminal && nullable_language(language)) options.push_back(empty_string());
  CodePointSet used;
  for (const auto& [cp, child] : trie.children) {
    used.add(cp, cp);
    PatternNode rest = simplify_pattern(
        first_char_in(language, CodePointSet::of(cp), FirstChar::kDrop, budget));
    if (is_empty_language(rest)) continue;
    options.push_back(PatternNode::concat(
        {PatternNode::of_set(CodePointSet::of(cp)), minus_trie(rest, *child, budget)}));
  }
  options.push_back(first_char_in(language, used.complement(), FirstChar::kKeep, budget));
  return simplify_pattern(PatternNode::alternation(std::move(options)));
}

}  // namespace

PatternNode pattern_minus_strings(const PatternNode& simplified,
                                  const std::vector<std::string>& excluded, CompileBudget& budget) {
  NameTrie root;
  for (const std::string& text : excluded) {
    NameTrie* node = &root;
    int length = 0;
    for (size_t pos = 0; pos < text.size();) {
      const Utf8Step step = utf8_step(text, pos);
      if (step.kind != Utf8Step::Kind::kValid) {
        throw Error(Error::Kind::kInvalidArgument, "JSON Schema: a name is not valid UTF-8");
      }
      pos += step.length;
      if (++length > kMaxExcludedNameLength) {
        throw Error(Error::Kind::kInvalidArgument,
                    "JSON Schema: a property name is longer than 1000 characters");
      }
      auto it = std::lower_bound(node->children.begin(), node->children.end(), step.code_point,
                                 [](const auto& entry, char32_t cp) { return entry.first < cp; });
      if (it == node->children.end() || it->first != step.code_point) {
        budget.charge(1, "pattern derivatives");
        it = node->children.insert(it, {step.code_point, std::make_unique<NameTrie>()});
      }
      node = it->second.get();
    }
    node->terminal = true;
  }
  return minus_trie(simplified, root, budget);
}

bool languages_disjoint(const PatternNode& a, const PatternNode& b, CompileBudget& budget) {
  Nfa x, y;
  const auto [x_start, x_end] = x.build(a, budget);
  const auto [y_start, y_end] = y.build(b, budget);
  // Pairs of states, each side's epsilon moves taken alone, characters taken together.
  std::unordered_set<uint64_t> seen;  // only the pairs reached, charged one by one
  std::vector<std::pair<int, int>> stack;
  auto visit = [&](int p, int q) {
    if (seen.insert((static_cast<uint64_t>(p) << 32) | static_cast<uint32_t>(q)).second) {
      stack.emplace_back(p, q);
    }
  };
  visit(x_start, y_start);
  while (!stack.empty()) {
    const auto [p, q] = stack.back();
    stack.pop_back();
    budget.charge(1, "pattern intersection states");
    if (p == x_end && q == y_end) return false;
    const Nfa::State& sp = x.states[static_cast<size_t>(p)];
    const Nfa::State& sq = y.states[static_cast<size_t>(q)];
    for (int next : sp.epsilon) visit(next, q);
    for (int next : sq.epsilon) visit(p, next);
    if (sp.has_set && sq.has_set && !sp.set.intersect(sq.set).empty()) visit(sp.next, sq.next);
  }
  return true;
}

}  // namespace llms::structured::jsonschema
