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
// to the item's count, for one outcome of the guards of the source's region.
class TaggedClosure {
 public:
  explicit TaggedClosure(const Nfa& nfa)
      : nfa_(nfa), stamp_(nfa.out.size(), 0), tag_(nfa.out.size(), CountAction::kKeep) {}

  struct Result {
    std::vector<int32_t> states;  // canonical: sorted, pure epsilon relays dropped
    int32_t region = -1;
    CountAction action = CountAction::kReset;
    bool guard_seen = false;
  };

  // `region`: the source's region (-1: none); loop_ok / exit_ok: the guard outcome assumed.
  Result close(const std::vector<int32_t>& targets, int32_t region, bool loop_ok, bool exit_ok) {
    ++round_;
    Result result;
    std::vector<int32_t> all;
    stack_.clear();
    mixed_.clear();
    for (int32_t t : targets) push(t, CountAction::kKeep, all);
    while (!stack_.empty()) {
      const int32_t s = stack_.back();
      stack_.pop_back();
      const CountAction tag = tag_[static_cast<size_t>(s)];
      for (const NfaEdge& e : nfa_.out[static_cast<size_t>(s)]) {
        switch (e.kind) {
          case NfaEdgeKind::kEpsilon:
            push(e.to, tag, all);
            break;
          case NfaEdgeKind::kEnter:
            push(e.to, CountAction::kReset, all);
            break;
          case NfaEdgeKind::kLoop:
            // A body end is only reached by reading from inside the body (bodies are not
            // nullable), so the count it completes is the source item's (tag kKeep).
            if (e.region == region && tag == CountAction::kKeep) {
              result.guard_seen = true;
              if (loop_ok) push(e.to, CountAction::kIncrement, all);
            }
            break;
          case NfaEdgeKind::kExit:
            if (e.region == region && tag == CountAction::kKeep) {
              result.guard_seen = true;
              if (exit_ok) push(e.to, CountAction::kKeep, all);
            }
            break;
          case NfaEdgeKind::kByte:
          case NfaEdgeKind::kCall:
            break;
        }
      }
    }
    // Only states with a byte or call edge, and the accept state, tell subsets apart: dropping
    // the pure relays makes equivalent subsets equal, so fewer DFA states are made.
    for (int32_t s : all) {
      bool keep = s == nfa_.accept;
      for (const NfaEdge& e : nfa_.out[static_cast<size_t>(s)]) {
        if (e.kind == NfaEdgeKind::kByte || e.kind == NfaEdgeKind::kCall) keep = true;
      }
      if (keep) result.states.push_back(s);
    }
    std::sort(result.states.begin(), result.states.end());
    // One region and one count among the states kept, or the caller must expand a repetition.
    bool has_tag = false;
    for (int32_t s : result.states) {
      const int32_t r = nfa_.region_of[static_cast<size_t>(s)];
      if (r < 0) continue;
      const CountAction tag = tag_[static_cast<size_t>(s)];
      if (result.region < 0) {
        result.region = r;
      } else if (result.region != r) {
        const NfaRegion& a = nfa_.regions[static_cast<size_t>(result.region)];
        const NfaRegion& b = nfa_.regions[static_cast<size_t>(r)];
        throw RegionConflict(a.copies <= b.copies ? a.node : b.node);
      }
      if (has_tag && tag != result.action) {
        throw RegionConflict(nfa_.regions[static_cast<size_t>(r)].node);
      }
      has_tag = true;
      result.action = tag;
    }
    if (result.region < 0) result.action = CountAction::kReset;
    for (int32_t s : mixed_) {
      if (std::binary_search(result.states.begin(), result.states.end(), s)) {
        throw RegionConflict(
            nfa_.regions[static_cast<size_t>(nfa_.region_of[static_cast<size_t>(s)])].node);
      }
    }
    return result;
  }

 private:
  void push(int32_t s, CountAction tag, std::vector<int32_t>& all) {
    const auto i = static_cast<size_t>(s);
    if (stamp_[i] == round_) {
      // Reached again with another count: only a kept region state makes that a conflict,
      // which the check after the closure sees through this mark.
      if (tag_[i] != tag && nfa_.region_of[i] >= 0) mixed_.push_back(s);
      return;
    }
    stamp_[i] = round_;
    tag_[i] = tag;
    stack_.push_back(s);
    all.push_back(s);
  }

  const Nfa& nfa_;
  std::vector<uint32_t> stamp_;
  std::vector<CountAction> tag_;
  std::vector<int32_t> stack_;
  std::vector<int32_t> mixed_;  // region states reached with two different counts this round
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
  auto intern = [&](TaggedClosure::Result& r) -> int32_t {
    if (r.states.empty()) return kNoMove;
    auto it = ids.find(r.states);
    if (it != ids.end()) return it->second;
    budget.charge(1 + static_cast<int64_t>(r.states.size()) / 16 + n_classes / 8,
                  "automaton states");
    const auto id = static_cast<int32_t>(subsets.size());
    ids.emplace(r.states, id);
    subsets.push_back(std::move(r.states));
    dfa.region.push_back(r.region);
    return id;
  };
  // The code of a move to `targets` from a state in `region`: plain when the guards do not
  // matter and the count follows the plain rule, else a GuardedMove.
  auto move_code = [&](const std::vector<int32_t>& targets, int32_t region) -> int32_t {
    TaggedClosure::Result first = closure.close(targets, region, true, true);
    if (!first.guard_seen) {
      const CountAction action = first.action;
      const int32_t target = intern(first);
      if (target < 0) return kNoMove;
      const int32_t target_region = dfa.region[static_cast<size_t>(target)];
      const bool keeps = target_region >= 0 && target_region == region;
      if ((keeps && action == CountAction::kKeep) || (!keeps && action == CountAction::kReset)) {
        return target;
      }
      GuardedMove g;
      g.target.fill(target);
      g.action.fill(action);
      dfa.guarded.push_back(g);
      return guarded_code(dfa.guarded.size() - 1);
    }
    GuardedMove g;
    g.action[kLoopAndExit] = first.action;
    g.target[kLoopAndExit] = intern(first);
    TaggedClosure::Result loop_only = closure.close(targets, region, true, false);
    g.action[kLoopOnly] = loop_only.action;
    g.target[kLoopOnly] = intern(loop_only);
    TaggedClosure::Result exit_only = closure.close(targets, region, false, true);
    g.action[kExitOnly] = exit_only.action;
    g.target[kExitOnly] = intern(exit_only);
    if (g.target[0] < 0 && g.target[1] < 0 && g.target[2] < 0) return kNoMove;
    dfa.guarded.push_back(g);
    return guarded_code(dfa.guarded.size() - 1);
  };

  {
    TaggedClosure::Result start = closure.close({nfa.start}, -1, false, false);
    if (start.states.empty()) start.states.push_back(nfa.start);  // a rule matching nothing
    intern(start);
  }

  std::vector<std::vector<int32_t>> by_class(static_cast<size_t>(n_classes));
  std::vector<int32_t> touched;
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
    std::vector<int32_t> row(static_cast<size_t>(n_classes), kNoMove);
    // Classes with the same targets share one closure.
    std::map<std::vector<int32_t>, int32_t> seen_targets;
    for (int32_t c : touched) {
      std::vector<int32_t> targets = std::move(by_class[static_cast<size_t>(c)]);
      by_class[static_cast<size_t>(c)].clear();
      std::sort(targets.begin(), targets.end());
      targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
      auto it = seen_targets.find(targets);
      if (it == seen_targets.end()) {
        const int32_t code = move_code(targets, region);
        it = seen_targets.emplace(std::move(targets), code).first;
      }
      row[static_cast<size_t>(c)] = it->second;
    }
    std::vector<std::pair<int32_t, int32_t>> calls;
    for (auto& [rule, targets] : by_call) {
      const int32_t code = move_code(targets, region);
      if (code != kNoMove) calls.emplace_back(rule, code);
    }
    dfa.next.insert(dfa.next.end(), row.begin(), row.end());
    dfa.calls.push_back(std::move(calls));
    dfa.is_final.push_back(is_final ? 1 : 0);
  }
  dfa.n_states = static_cast<int32_t>(subsets.size());
  return dfa;
}

}  // namespace llms::structured
