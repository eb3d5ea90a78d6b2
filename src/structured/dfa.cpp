// structured/dfa: see dfa.h.
#include "dfa.h"

#include <algorithm>
#include <map>
#include <tuple>
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
        if (e.kind != NfaEdgeKind::kByte) continue;
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

namespace {

// Closure of a move's targets over epsilon, enter, loop and exit edges, tracking what happens
// to the item's count, for one outcome of the guards of the source's region. The states kept
// come out in groups of one region and one count action each (usually one group).
class TaggedClosure {
 public:
  explicit TaggedClosure(const Nfa& nfa) : nfa_(nfa), stamp_(nfa.out.size() * 3, 0) {}

  struct Group {
    std::vector<int32_t> states;  // canonical: sorted, pure epsilon relays dropped
    int32_t region = -1;
    CountAction action = CountAction::kReset;
  };
  struct Result {
    std::vector<Group> groups;
    bool guard_seen = false;
  };

  // `region`: the source's region (-1: none); loop_ok / exit_ok: the guard outcome assumed.
  Result close(const std::vector<int32_t>& targets, int32_t region, bool loop_ok, bool exit_ok) {
    ++round_;
    Result result;
    kept_.clear();
    stack_.clear();
    for (int32_t t : targets) push(t, CountAction::kKeep);
    while (!stack_.empty()) {
      const auto [s, tag] = stack_.back();
      stack_.pop_back();
      for (const NfaEdge& e : nfa_.out[static_cast<size_t>(s)]) {
        switch (e.kind) {
          case NfaEdgeKind::kEpsilon:
            push(e.to, tag);
            break;
          case NfaEdgeKind::kEnter:
            push(e.to, CountAction::kReset);
            break;
          case NfaEdgeKind::kLoop:
            // A body end is only reached by reading from inside the body (bodies are not
            // nullable), so the count it completes is the source item's (tag kKeep).
            if (e.region == region && tag == CountAction::kKeep) {
              result.guard_seen = true;
              if (loop_ok) push(e.to, CountAction::kIncrement);
            }
            break;
          case NfaEdgeKind::kExit:
            if (e.region == region && tag == CountAction::kKeep) {
              result.guard_seen = true;
              if (exit_ok) push(e.to, CountAction::kKeep);
            }
            break;
          case NfaEdgeKind::kByte:
          case NfaEdgeKind::kCall:
            break;
        }
      }
    }
    // Group the kept states by (region, count action); states outside regions join the first
    // group (their items carry no count).
    auto key = [&](const std::pair<int32_t, CountAction>& x) {  // region states first
      return std::make_tuple(-nfa_.region_of[static_cast<size_t>(x.first)],
                             static_cast<int>(x.second), x.first);
    };
    std::sort(kept_.begin(), kept_.end(),
              [&](const auto& a, const auto& b) { return key(a) < key(b); });
    for (const auto& [s, tag] : kept_) {
      const int32_t r = nfa_.region_of[static_cast<size_t>(s)];
      if (r < 0 && !result.groups.empty()) {
        result.groups.front().states.push_back(s);
        continue;
      }
      const CountAction action = r < 0 ? CountAction::kReset : tag;
      if (result.groups.empty() || result.groups.back().region != r ||
          result.groups.back().action != action) {
        result.groups.push_back(Group{{}, r, action});
      }
      result.groups.back().states.push_back(s);
    }
    for (Group& g : result.groups) {
      std::sort(g.states.begin(), g.states.end());
      g.states.erase(std::unique(g.states.begin(), g.states.end()), g.states.end());
    }
    return result;
  }

 private:
  static size_t tag_index(CountAction tag) { return static_cast<size_t>(tag); }

  // Outside regions the tag means nothing: such a state is visited once, as kKeep.
  void push(int32_t s, CountAction tag) {
    if (nfa_.region_of[static_cast<size_t>(s)] < 0) tag = CountAction::kKeep;
    const size_t i = static_cast<size_t>(s) * 3 + tag_index(tag);
    if (stamp_[i] == round_) return;
    stamp_[i] = round_;
    stack_.emplace_back(s, tag);
    // Only states with a byte or call edge, and the accept state, tell subsets apart: dropping
    // the pure relays makes equivalent subsets equal, so fewer DFA states are made.
    bool keep = s == nfa_.accept;
    for (const NfaEdge& e : nfa_.out[static_cast<size_t>(s)]) {
      if (e.kind == NfaEdgeKind::kByte || e.kind == NfaEdgeKind::kCall) keep = true;
    }
    if (keep) kept_.emplace_back(s, tag);
  }

  const Nfa& nfa_;
  std::vector<uint32_t> stamp_;  // per (state, tag)
  std::vector<std::pair<int32_t, CountAction>> stack_;
  std::vector<std::pair<int32_t, CountAction>> kept_;
  uint32_t round_ = 0;
};

}  // namespace

Dfa determinize(const Nfa& nfa, const ByteClasses& classes, CompileBudget& budget) {
  const int32_t n_classes = classes.n_classes;
  TaggedClosure closure(nfa);

  Dfa dfa;
  dfa.regions = nfa.regions;
  std::unordered_map<std::vector<int32_t>, int32_t, VectorHash> ids;
  std::vector<std::vector<int32_t>> subsets;
  auto intern = [&](TaggedClosure::Group& g) -> int32_t {
    auto it = ids.find(g.states);
    if (it != ids.end()) return it->second;
    budget.charge(1 + static_cast<int64_t>(g.states.size()) / 16 + n_classes / 8,
                  "automaton states");
    const auto id = static_cast<int32_t>(subsets.size());
    ids.emplace(g.states, id);
    subsets.push_back(std::move(g.states));
    dfa.region.push_back(g.region);
    return id;
  };
  // Appends a variant's targets; returns (begin, size) in move_targets.
  auto add_targets = [&](TaggedClosure::Result& r) -> std::pair<uint32_t, uint32_t> {
    const auto begin = static_cast<uint32_t>(dfa.move_targets.size());
    for (TaggedClosure::Group& g : r.groups) {
      const CountAction action = g.action;
      dfa.move_targets.push_back(MoveTarget{intern(g), action});
    }
    return {begin, static_cast<uint32_t>(dfa.move_targets.size()) - begin};
  };
  // The code of a move to `targets` from a state in `region`: plain when the guards do not
  // matter, there is one target and the count follows the plain rule; else a GuardedMove.
  auto move_code = [&](const std::vector<int32_t>& targets, int32_t region) -> int32_t {
    TaggedClosure::Result first = closure.close(targets, region, true, true);
    if (first.groups.empty() && !first.guard_seen) return kNoMove;
    if (!first.guard_seen && first.groups.size() == 1) {
      const CountAction action = first.groups[0].action;
      const int32_t target_region = first.groups[0].region;
      const bool keeps = target_region >= 0 && target_region == region;
      if ((keeps && action == CountAction::kKeep) || (!keeps && action == CountAction::kReset)) {
        return intern(first.groups[0]);
      }
    }
    GuardedMove g;
    const auto [b0, n0] = add_targets(first);
    g.begin.fill(b0);
    g.size.fill(n0);
    if (first.guard_seen) {
      TaggedClosure::Result loop_only = closure.close(targets, region, true, false);
      std::tie(g.begin[kLoopOnly], g.size[kLoopOnly]) = add_targets(loop_only);
      TaggedClosure::Result exit_only = closure.close(targets, region, false, true);
      std::tie(g.begin[kExitOnly], g.size[kExitOnly]) = add_targets(exit_only);
    }
    if (g.size[0] == 0 && g.size[1] == 0 && g.size[2] == 0) return kNoMove;
    dfa.guarded.push_back(g);
    return guarded_code(dfa.guarded.size() - 1);
  };

  dfa.start = move_code({nfa.start}, -1);
  if (dfa.start == kNoMove) {  // a rule matching nothing: one dead state to start from
    TaggedClosure::Group dead{{nfa.start}, -1, CountAction::kReset};
    dfa.start = intern(dead);
  }

  std::vector<std::vector<int32_t>> by_class(static_cast<size_t>(n_classes));
  std::vector<int32_t> touched;
  std::vector<std::pair<std::vector<int32_t>, int32_t>> seen_targets;
  std::vector<int32_t> row(static_cast<size_t>(n_classes));
  for (size_t d = 0; d < subsets.size(); ++d) {
    const std::vector<int32_t> subset = subsets[d];  // a copy: intern() may grow `subsets`
    const int32_t region = dfa.region[d];
    touched.clear();
    std::map<int32_t, std::vector<int32_t>> by_call;
    bool is_final = false;
    for (int32_t s : subset) {
      if (s == nfa.accept) is_final = true;
      for (const NfaEdge& e : nfa.out[static_cast<size_t>(s)]) {
        if (e.kind == NfaEdgeKind::kCall) {
          by_call[e.call].push_back(e.to);
        } else if (e.kind == NfaEdgeKind::kByte) {
          for (int32_t c = classes.of[e.lo]; c <= classes.of[e.hi]; ++c) {
            auto& targets = by_class[static_cast<size_t>(c)];
            if (targets.empty()) touched.push_back(c);
            targets.push_back(e.to);
          }
        }
      }
    }
    std::fill(row.begin(), row.end(), kNoMove);
    // Classes with the same targets share one closure (a row has few distinct targets).
    seen_targets.clear();
    for (int32_t c : touched) {
      std::vector<int32_t>& targets = by_class[static_cast<size_t>(c)];
      std::sort(targets.begin(), targets.end());
      targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
      auto it = std::find_if(seen_targets.begin(), seen_targets.end(),
                             [&](const auto& entry) { return entry.first == targets; });
      if (it == seen_targets.end()) {
        const int32_t code = move_code(targets, region);
        seen_targets.emplace_back(targets, code);
        it = seen_targets.end() - 1;
      }
      row[static_cast<size_t>(c)] = it->second;
      targets.clear();
    }
    std::vector<std::pair<int32_t, int32_t>> calls;
    for (auto& [rule, targets] : by_call) {
      std::sort(targets.begin(), targets.end());
      targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
      const int32_t code = move_code(targets, region);
      if (code != kNoMove) calls.emplace_back(rule, code);
    }
    dfa.next.insert(dfa.next.end(), row.begin(), row.end());
    for (const auto& entry : seen_targets) {
      if (entry.second != kNoMove) dfa.byte_codes.push_back(entry.second);
    }
    dfa.byte_code_begin.push_back(static_cast<int32_t>(dfa.byte_codes.size()));
    dfa.calls.push_back(std::move(calls));
    dfa.is_final.push_back(is_final ? 1 : 0);
  }
  dfa.n_states = static_cast<int32_t>(subsets.size());
  return dfa;
}

}  // namespace llms::structured
