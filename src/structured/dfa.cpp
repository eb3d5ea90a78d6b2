// structured/dfa: see dfa.h.
#include "dfa.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace llms::structured {
namespace {

struct VectorHash {
  size_t operator()(const std::vector<int32_t>& v) const {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ v.size();
    for (int32_t x : v) {
      h ^= static_cast<uint64_t>(static_cast<uint32_t>(x)) + 0x9E3779B97F4A7C15ull + (h << 6) +
           (h >> 2);
    }
    return static_cast<size_t>(h);
  }
};

}  // namespace

ByteClasses compute_byte_classes(const std::vector<Nfa>& nfas) {
  std::array<bool, 257> starts{};  // starts[b]: a class begins at byte b
  starts[0] = true;
  for (const Nfa& nfa : nfas) {
    for (const auto& edges : nfa.out) {
      for (const NfaEdge& e : edges) {
        if (e.epsilon || e.call >= 0) continue;
        starts[e.lo] = true;
        starts[static_cast<size_t>(e.hi) + 1] = true;
      }
    }
  }
  ByteClasses classes;
  int32_t current = -1;
  for (int b = 0; b < 256; ++b) {
    if (starts[static_cast<size_t>(b)]) ++current;
    classes.of[static_cast<size_t>(b)] = static_cast<uint8_t>(current);
  }
  classes.n_classes = current + 1;
  return classes;
}

Dfa determinize(const Nfa& nfa, const ByteClasses& classes, CompileBudget& budget) {
  const int32_t n_classes = classes.n_classes;
  std::vector<uint32_t> seen(nfa.out.size(), 0);
  uint32_t stamp = 0;

  // Sorts and closes a set of NFA states over epsilon edges.
  auto close = [&](std::vector<int32_t>& set) {
    ++stamp;
    std::vector<int32_t> stack;
    for (int32_t s : set) {
      if (seen[static_cast<size_t>(s)] != stamp) {
        seen[static_cast<size_t>(s)] = stamp;
        stack.push_back(s);
      }
    }
    set.clear();
    while (!stack.empty()) {
      const int32_t s = stack.back();
      stack.pop_back();
      set.push_back(s);
      for (const NfaEdge& e : nfa.out[static_cast<size_t>(s)]) {
        if (e.epsilon && seen[static_cast<size_t>(e.to)] != stamp) {
          seen[static_cast<size_t>(e.to)] = stamp;
          stack.push_back(e.to);
        }
      }
    }
    // Only states with a non-epsilon edge, and the accept state, tell subsets apart: dropping
    // the pure epsilon relays makes equivalent subsets equal, so fewer DFA states are made.
    set.erase(std::remove_if(set.begin(), set.end(),
                             [&](int32_t s) {
                               if (s == nfa.accept) return false;
                               for (const NfaEdge& e : nfa.out[static_cast<size_t>(s)]) {
                                 if (!e.epsilon) return false;
                               }
                               return true;
                             }),
              set.end());
    std::sort(set.begin(), set.end());
  };

  Dfa dfa;
  std::unordered_map<std::vector<int32_t>, int32_t, VectorHash> ids;
  std::vector<std::vector<int32_t>> subsets;
  auto intern = [&](std::vector<int32_t> set) -> int32_t {
    auto it = ids.find(set);
    if (it != ids.end()) return it->second;
    budget.charge(1 + static_cast<int64_t>(set.size()) / 16, "automaton states");
    const auto id = static_cast<int32_t>(subsets.size());
    ids.emplace(set, id);
    subsets.push_back(std::move(set));
    return id;
  };

  std::vector<int32_t> start{nfa.start};
  close(start);
  intern(std::move(start));

  std::vector<std::vector<int32_t>> by_class(static_cast<size_t>(n_classes));
  std::vector<int32_t> touched;
  for (size_t d = 0; d < subsets.size(); ++d) {
    const std::vector<int32_t> subset = subsets[d];  // copy: intern() may grow `subsets`
    touched.clear();
    std::map<int32_t, std::vector<int32_t>> by_call;
    bool is_final = false;
    for (int32_t s : subset) {
      if (s == nfa.accept) is_final = true;
      for (const NfaEdge& e : nfa.out[static_cast<size_t>(s)]) {
        if (e.epsilon) continue;
        if (e.call >= 0) {
          by_call[e.call].push_back(e.to);
          continue;
        }
        for (int32_t c = classes.of[e.lo]; c <= classes.of[e.hi]; ++c) {
          auto& targets = by_class[static_cast<size_t>(c)];
          if (targets.empty()) touched.push_back(c);
          targets.push_back(e.to);
        }
      }
    }
    std::vector<int32_t> row(static_cast<size_t>(n_classes), -1);
    for (int32_t c : touched) {
      std::vector<int32_t> targets = std::move(by_class[static_cast<size_t>(c)]);
      by_class[static_cast<size_t>(c)].clear();
      close(targets);
      row[static_cast<size_t>(c)] = intern(std::move(targets));
    }
    std::vector<std::pair<int32_t, int32_t>> calls;
    for (auto& [rule, targets] : by_call) {
      close(targets);
      calls.emplace_back(rule, intern(std::move(targets)));
    }
    dfa.next.insert(dfa.next.end(), row.begin(), row.end());
    dfa.calls.push_back(std::move(calls));
    dfa.is_final.push_back(is_final ? 1 : 0);
  }
  dfa.n_states = static_cast<int32_t>(subsets.size());
  return dfa;
}

}  // namespace llms::structured
