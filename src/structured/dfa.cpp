// structured/dfa: see dfa.h.
#include "dfa.h"

#include <algorithm>
#include <span>
#include <string>
#include <tuple>

#include "util/error.h"

namespace llms::structured {
ByteClasses compute_byte_classes(const std::vector<Nfa>& nfas) {
  std::array<bool, 257> starts{};  // starts[b]: a class begins at byte b
  starts[0] = true;
  for (const Nfa& nfa : nfas) {
    for (const NfaEdge& e : nfa.edges) {
      if (e.kind != NfaEdgeKind::kByte) continue;
      starts[e.lo] = true;
      starts[static_cast<size_t>(e.hi) + 1] = true;
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

uint64_t hash_states(int32_t rule, std::span<const int32_t> states) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(rule) << 32) ^ states.size();
  for (int32_t x : states) {
    h = (h ^ static_cast<uint32_t>(x)) * 0x100000001B3ull;
    h ^= h >> 29;
  }
  // Mix every bit into the low ones, which pick the slot.
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ull;
  h ^= h >> 33;
  return h;
}

// One rule's NFA as the determinizer reads it: the edges between live states only, all in one
// array, so reading a state's edges is one contiguous load rather than a pointer chase per state
// (the NFAs of large schemas have 100,000 states, far beyond the caches).
struct FlatNfa {
  std::vector<NfaEdge> edges;
  std::vector<uint32_t> begin;  // per state, and one past the last
  std::vector<int32_t> region_of;
  std::vector<uint8_t> live;
  int32_t start = 0;
  int32_t accept = 0;
  int32_t region_base = 0;

  explicit FlatNfa(RuleNfa&& rule)
      : region_of(std::move(rule.nfa.region_of)),
        live(std::move(rule.live)),
        start(rule.nfa.start),
        accept(rule.nfa.accept),
        region_base(rule.region_base) {
    begin.reserve(rule.nfa.n_states() + 1);
    edges.reserve(rule.nfa.edges.size());
    for (size_t s = 0; s < rule.nfa.n_states(); ++s) {
      begin.push_back(static_cast<uint32_t>(edges.size()));
      if (!live[s]) continue;
      for (const NfaEdge& e : rule.nfa.out(static_cast<int32_t>(s))) {
        if (live[static_cast<size_t>(e.to)]) edges.push_back(e);
      }
    }
    begin.push_back(static_cast<uint32_t>(edges.size()));
    rule.nfa = Nfa{};
  }
  size_t n_states() const { return begin.size() - 1; }
  std::span<const NfaEdge> out(int32_t s) const {
    return std::span<const NfaEdge>(edges).subspan(
        begin[static_cast<size_t>(s)],
        begin[static_cast<size_t>(s) + 1] - begin[static_cast<size_t>(s)]);
  }
};

// Closure of a move's targets over epsilon, enter, loop and exit edges, tracking what happens
// to the item's count, for one outcome of the guards of the source's region. The states kept
// come out in groups of one region and one count action each (usually one group). Buffers are
// reused: a result is valid until the next close().
class TaggedClosure {
 public:
  explicit TaggedClosure(const FlatNfa& nfa)
      : nfa_(nfa), stamp_(nfa.n_states() * 3, 0), keep_(nfa.n_states(), 0) {
    // Only states with a byte or call edge, and the accept state, tell sets apart: dropping the
    // pure relays makes equivalent sets equal, so fewer automaton states are made.
    for (size_t s = 0; s < nfa.n_states(); ++s) {
      bool keep = static_cast<int32_t>(s) == nfa.accept;
      for (const NfaEdge& e : nfa.out(static_cast<int32_t>(s))) {
        if (e.kind == NfaEdgeKind::kByte || e.kind == NfaEdgeKind::kCall) keep = true;
      }
      keep_[s] = keep ? 1 : 0;
    }
  }

  struct Group {
    std::vector<int32_t> states;  // canonical: sorted, pure epsilon relays dropped
    int32_t region = -1;
    CountAction action = CountAction::kReset;
  };
  struct Result {
    std::span<Group> groups;
    bool guard_seen = false;
  };

  // `region`: the source's region (-1: none); loop_ok / exit_ok: the guard outcome assumed.
  Result close(std::span<const int32_t> targets, int32_t region, bool loop_ok, bool exit_ok) {
    ++round_;
    Result result;
    kept_.clear();
    stack_.clear();
    for (int32_t t : targets) push(t, CountAction::kKeep);
    while (!stack_.empty()) {
      const auto [s, tag] = stack_.back();
      stack_.pop_back();
      for (const NfaEdge& e : nfa_.out(s)) {
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
    // group (their items carry no count). Usually every state is outside regions: one group.
    size_t n_groups = 0;
    auto group = [&](int32_t r, CountAction action) -> Group& {
      if (n_groups == groups_.size()) groups_.emplace_back();
      Group& g = groups_[n_groups++];
      g.states.clear();
      g.region = r;
      g.action = action;
      return g;
    };
    bool any_region = false;
    for (const auto& k : kept_) any_region |= nfa_.region_of[static_cast<size_t>(k.first)] >= 0;
    if (!any_region) {
      if (!kept_.empty()) {
        Group& g = group(-1, CountAction::kReset);
        for (const auto& k : kept_) g.states.push_back(k.first);
      }
    } else {
      auto key = [&](const std::pair<int32_t, CountAction>& x) {  // region states first
        return std::make_tuple(-nfa_.region_of[static_cast<size_t>(x.first)],
                               static_cast<int>(x.second), x.first);
      };
      std::sort(kept_.begin(), kept_.end(),
                [&](const auto& a, const auto& b) { return key(a) < key(b); });
      for (const auto& [s, tag] : kept_) {
        const int32_t r = nfa_.region_of[static_cast<size_t>(s)];
        if (r < 0 && n_groups > 0) {
          groups_[0].states.push_back(s);
          continue;
        }
        const CountAction action = r < 0 ? CountAction::kReset : tag;
        if (n_groups == 0 || groups_[n_groups - 1].region != r ||
            groups_[n_groups - 1].action != action) {
          group(r, action);
        }
        groups_[n_groups - 1].states.push_back(s);
      }
    }
    for (size_t i = 0; i < n_groups; ++i) {
      std::vector<int32_t>& states = groups_[i].states;
      std::sort(states.begin(), states.end());
      states.erase(std::unique(states.begin(), states.end()), states.end());
    }
    result.groups = std::span<Group>(groups_.data(), n_groups);
    return result;
  }

 private:
  static size_t tag_index(CountAction tag) { return static_cast<size_t>(tag); }

  // Outside regions the tag means nothing: such a state is visited once, as kKeep. Dead
  // states (no path to the rule's end) never enter a set.
  void push(int32_t s, CountAction tag) {
    if (!nfa_.live[static_cast<size_t>(s)]) return;
    if (nfa_.region_of[static_cast<size_t>(s)] < 0) tag = CountAction::kKeep;
    const size_t i = static_cast<size_t>(s) * 3 + tag_index(tag);
    if (stamp_[i] == round_) return;
    stamp_[i] = round_;
    stack_.emplace_back(s, tag);
    if (keep_[static_cast<size_t>(s)]) kept_.emplace_back(s, tag);
  }

  const FlatNfa& nfa_;
  std::vector<uint32_t> stamp_;  // per (state, tag)
  std::vector<uint8_t> keep_;    // per state: may tell sets apart
  std::vector<std::pair<int32_t, CountAction>> stack_;
  std::vector<std::pair<int32_t, CountAction>> kept_;
  std::vector<Group> groups_;  // the first n of the last result are live
  uint32_t round_ = 0;
};

// What making one state costs: its row and its NFA set.
int64_t state_work(size_t subset_size, int32_t n_classes) {
  return 1 + static_cast<int64_t>(subset_size) / 16 + n_classes / 8;
}

// A byte edge's class interval seen from a sweep over the classes: `target` enters the
// running set at class `at` (delta +1) or leaves it there (delta -1).
struct ClassEvent {
  int32_t at;
  int32_t delta;
  int32_t target;
  bool operator<(const ClassEvent& o) const { return at < o.at; }
};

}  // namespace

struct LazyDfa::Builder {
  const LazyDfa* dfa = nullptr;
  std::vector<FlatNfa> rules;
  std::vector<int32_t> call_rule;
  ByteClasses classes;
  std::vector<std::unique_ptr<TaggedClosure>> closures;  // per rule, made on first use
  // Every state's NFA set, flat: pool[offsets[s], offsets[s + 1]).
  std::vector<int32_t> pool;
  std::vector<size_t> offsets{0};
  std::vector<uint64_t> hashes;  // per state: hash_states() of its rule and set
  std::vector<int32_t> table;    // open addressing over state ids, -1 empty; load <= 1/2
  int64_t work = 0;
  int64_t max_work = 0;
  size_t n_guarded = 0;
  size_t n_move_targets = 0;
  size_t n_calls = 0;
  // Scratch of expand().
  std::vector<int32_t> subset;
  std::vector<ClassEvent> events;
  std::vector<std::pair<int32_t, int32_t>> active;  // (target, edges holding it), by target
  std::vector<int32_t> set_targets;                 // the running set, or one callee's targets
  std::vector<std::pair<size_t, int32_t>> seen;     // (begin in seen_pool, code), this row's sets
  std::vector<int32_t> seen_pool;
  std::vector<std::pair<int32_t, int32_t>> call_edges;  // (callee, target)
  std::vector<CallEdge> calls;

  // Charges the automaton's lifetime budget; past it the automaton is exhausted for good (its
  // owner stops sharing it, see LazyDfa::exhausted()).
  void charge(int64_t units, const char* what) {
    work += units;
    if (work > max_work) refuse(what);
  }
  [[noreturn]] void refuse(const char* what) {
    dfa->exhausted_.store(true, std::memory_order_relaxed);
    throw Error(Error::Kind::kInvalidArgument, "constraint too complex: " + std::string(what) +
                                                   " exceed the automaton's budget of " +
                                                   std::to_string(max_work) + " units");
  }

  TaggedClosure& closure(int32_t rule) {
    auto& c = closures[static_cast<size_t>(rule)];
    if (!c) {
      c = std::make_unique<TaggedClosure>(rules[static_cast<size_t>(rule)]);
    }
    return *c;
  }

  std::span<const int32_t> states_of(int32_t id) const {
    return std::span<const int32_t>(pool).subspan(
        offsets[static_cast<size_t>(id)],
        offsets[static_cast<size_t>(id) + 1] - offsets[static_cast<size_t>(id)]);
  }

  int32_t intern(int32_t rule, const TaggedClosure::Group& g) {
    const std::span<const int32_t> states(g.states);
    const uint64_t h = hash_states(rule, states);
    // Grown before the search (load <= 1/2 with one more state), so the free slot it ends on is
    // where a new state goes, and nothing below allocates after the first write.
    if (offsets.size() * 2 > table.size()) rehash(table.size() * 2);
    const size_t mask = table.size() - 1;
    size_t i = static_cast<size_t>(h) & mask;
    for (; table[i] >= 0; i = (i + 1) & mask) {
      const int32_t id = table[i];
      if (hashes[static_cast<size_t>(id)] != h || dfa->rule_[static_cast<size_t>(id)] != rule)
        continue;
      const std::span<const int32_t> other = states_of(id);
      if (std::equal(other.begin(), other.end(), states.begin(), states.end())) return id;
    }
    charge(state_work(states.size(), classes.n_classes), "automaton states");
    const size_t id = offsets.size() - 1;
    if (id >= dfa->max_states_) refuse("automaton states");
    // Allocations before the first write: a failed one leaves no state half made.
    grow_for(pool, states.size());
    grow_for(offsets, 1);
    grow_for(hashes, 1);
    const FlatNfa& r = rules[static_cast<size_t>(rule)];
    dfa->rule_[id] = rule;
    dfa->region_[id] = g.region < 0 ? -1 : r.region_base + g.region;
    const bool final = std::binary_search(states.begin(), states.end(), r.accept);
    dfa->bits(static_cast<int32_t>(id)).store(final ? kFinal : 0, std::memory_order_relaxed);
    pool.insert(pool.end(), states.begin(), states.end());
    offsets.push_back(pool.size());
    hashes.push_back(h);
    table[i] = static_cast<int32_t>(id);
    dfa->n_states_.store(static_cast<int32_t>(id + 1), std::memory_order_release);
    return static_cast<int32_t>(id);
  }

  // Room for `more` elements, growing geometrically (reserve() alone would grow by exactly that).
  template <typename T>
  static void grow_for(std::vector<T>& v, size_t more) {
    if (v.size() + more > v.capacity()) v.reserve(std::max(v.size() + more, 2 * v.capacity()));
  }

  void rehash(size_t size) {
    std::vector<int32_t> bigger(size, -1);  // allocated first: a failure leaves the table as is
    const size_t mask = size - 1;
    for (size_t id = 0; id < hashes.size(); ++id) {
      size_t i = static_cast<size_t>(hashes[id]) & mask;
      while (bigger[i] >= 0) i = (i + 1) & mask;
      bigger[i] = static_cast<int32_t>(id);
    }
    table.swap(bigger);
  }

  // Appends a variant's targets; returns (begin, size) in move_targets.
  std::pair<uint32_t, uint32_t> add_targets(int32_t rule, const TaggedClosure::Result& result) {
    const auto begin = static_cast<uint32_t>(n_move_targets);
    for (const TaggedClosure::Group& g : result.groups) {
      const MoveTarget target{intern(rule, g), g.action};
      if (n_move_targets >= dfa->move_targets_.capacity()) refuse("automaton moves");
      dfa->move_targets_[n_move_targets++] = target;
    }
    return {begin, static_cast<uint32_t>(n_move_targets) - begin};
  }

  // The code of a move to `targets` from a state in `region` (the NFA's numbering): plain when
  // the guards do not matter, there is one target and the count follows the plain rule; else a
  // GuardedMove.
  int32_t move_code(int32_t rule, std::span<const int32_t> targets, int32_t region) {
    TaggedClosure& c = closure(rule);
    const TaggedClosure::Result first = c.close(targets, region, true, true);
    if (first.groups.empty() && !first.guard_seen) return kNoMove;
    if (!first.guard_seen && first.groups.size() == 1) {
      const CountAction action = first.groups[0].action;
      const int32_t target_region = first.groups[0].region;
      const bool keeps = target_region >= 0 && target_region == region;
      if ((keeps && action == CountAction::kKeep) || (!keeps && action == CountAction::kReset)) {
        return intern(rule, first.groups[0]);
      }
    }
    GuardedMove g;
    const auto [b0, n0] = add_targets(rule, first);
    g.begin.fill(b0);
    g.size.fill(n0);
    if (first.guard_seen) {
      std::tie(g.begin[kLoopOnly], g.size[kLoopOnly]) =
          add_targets(rule, c.close(targets, region, true, false));
      std::tie(g.begin[kExitOnly], g.size[kExitOnly]) =
          add_targets(rule, c.close(targets, region, false, true));
    }
    if (g.size[0] == 0 && g.size[1] == 0 && g.size[2] == 0) return kNoMove;
    if (n_guarded >= dfa->guarded_.capacity()) refuse("automaton moves");
    dfa->guarded_[n_guarded] = g;
    return guarded_code(n_guarded++);
  }

  // The code for the running set of a byte sweep; rows repeat a few sets many times, so each
  // distinct set of this row is closed once.
  int32_t code_for_active(int32_t rule, int32_t region) {
    set_targets.clear();
    for (const auto& a : active) set_targets.push_back(a.first);
    for (const auto& [begin, code] : seen) {
      const size_t size = static_cast<size_t>(seen_pool[begin]);
      if (size == set_targets.size() &&
          std::equal(set_targets.begin(), set_targets.end(),
                     seen_pool.begin() + 1 + static_cast<std::ptrdiff_t>(begin))) {
        return code;
      }
    }
    const int32_t code = move_code(rule, set_targets, region);
    seen.emplace_back(seen_pool.size(), code);
    seen_pool.push_back(static_cast<int32_t>(set_targets.size()));
    seen_pool.insert(seen_pool.end(), set_targets.begin(), set_targets.end());
    return code;
  }
};

LazyDfa::LazyDfa(std::vector<RuleNfa> rules, std::vector<int32_t> call_rule,
                 const ByteClasses& classes, int64_t max_work)
    : n_classes_(classes.n_classes),
      max_states_(static_cast<size_t>(max_work / state_work(0, classes.n_classes)) + 1),
      bits_(max_states_),
      region_(max_states_),
      rule_(max_states_),
      calls_of_(max_states_),
      rows_(max_states_ * static_cast<size_t>(classes.n_classes),
            ReservedMemory::Pages::kHugePastFirst),
      guarded_(static_cast<size_t>(max_work)),
      move_targets_(static_cast<size_t>(max_work)),
      calls_(static_cast<size_t>(max_work)),
      builder_(std::make_unique<Builder>()) {
  Builder& b = *builder_;
  b.dfa = this;
  b.classes = classes;
  b.max_work = max_work;
  b.call_rule = std::move(call_rule);
  b.closures.resize(rules.size());
  b.table.assign(1024, -1);
  b.rules.reserve(rules.size());
  for (RuleNfa& rule : rules) b.rules.emplace_back(std::move(rule));
  for (size_t r = 0; r < b.rules.size(); ++r) {
    const int32_t start = b.rules[r].start;
    starts_.push_back(
        b.move_code(static_cast<int32_t>(r), std::span<const int32_t>(&start, 1), -1));
  }
}

LazyDfa::~LazyDfa() = default;

uint8_t LazyDfa::expand(int32_t s) const {
  std::lock_guard lock(mutex_);
  const uint8_t before = bits(s).load(std::memory_order_relaxed);
  if (before & kReady) return before;  // another thread was first
  Builder& b = *builder_;
  const int32_t rule = rule_[static_cast<size_t>(s)];
  const FlatNfa& nfa = b.rules[static_cast<size_t>(rule)];
  const int32_t region =
      region_[static_cast<size_t>(s)] < 0
          ? -1
          : region_[static_cast<size_t>(s)] - b.rules[static_cast<size_t>(rule)].region_base;
  const std::span<const int32_t> states = b.states_of(s);
  b.subset.assign(states.begin(), states.end());  // intern() may grow the pool
  b.events.clear();
  b.call_edges.clear();
  for (int32_t q : b.subset) {
    for (const NfaEdge& e : nfa.out(q)) {
      if (e.kind == NfaEdgeKind::kCall) {
        const int32_t callee = b.call_rule[static_cast<size_t>(e.call)];
        if (callee >= 0) b.call_edges.emplace_back(callee, e.to);
      } else if (e.kind == NfaEdgeKind::kByte) {
        b.events.push_back(ClassEvent{b.classes.of[e.lo], 1, e.to});
        b.events.push_back(ClassEvent{b.classes.of[e.hi] + 1, -1, e.to});
      }
    }
  }
  // Sweep the classes: the running set of targets changes only where some edge's interval
  // begins or ends, so each run of classes between two such points shares one code.
  int32_t* row = &rows_[static_cast<size_t>(s) * static_cast<size_t>(n_classes_)];
  std::sort(b.events.begin(), b.events.end());
  b.active.clear();
  b.seen.clear();
  b.seen_pool.clear();
  uint8_t flags = 0;
  int32_t at = 0;  // row[0, at) is written
  for (size_t i = 0; i < b.events.size();) {
    const int32_t next = b.events[i].at;
    if (next > at) {
      const int32_t code = b.active.empty() ? kNoMove : b.code_for_active(rule, region);
      std::fill(row + at, row + next, code);
      if (code != kNoMove) flags |= kHasBytes;
      at = next;
    }
    for (; i < b.events.size() && b.events[i].at == next; ++i) {
      const ClassEvent& e = b.events[i];
      auto it = std::lower_bound(b.active.begin(), b.active.end(), e.target,
                                 [](const auto& a, int32_t t) { return a.first < t; });
      if (it == b.active.end() || it->first != e.target) it = b.active.insert(it, {e.target, 0});
      it->second += e.delta;
      if (it->second == 0) b.active.erase(it);
    }
  }
  std::fill(row + at, row + n_classes_, kNoMove);
  // Calls: one move per callee, to all its targets.
  std::sort(b.call_edges.begin(), b.call_edges.end());
  b.call_edges.erase(std::unique(b.call_edges.begin(), b.call_edges.end()), b.call_edges.end());
  b.calls.clear();
  for (size_t i = 0; i < b.call_edges.size();) {
    const int32_t callee = b.call_edges[i].first;
    b.set_targets.clear();
    for (; i < b.call_edges.size() && b.call_edges[i].first == callee; ++i)
      b.set_targets.push_back(b.call_edges[i].second);
    const int32_t code = b.move_code(rule, b.set_targets, region);
    if (code != kNoMove) b.calls.push_back(CallEdge{callee, code});
  }
  if (!b.calls.empty()) {
    flags |= kHasCalls;
    if (b.n_calls + b.calls.size() > calls_.capacity()) b.refuse("automaton calls");
    std::copy(b.calls.begin(), b.calls.end(), &calls_[b.n_calls]);
    calls_of_[static_cast<size_t>(s)] =
        CallRange{static_cast<uint32_t>(b.n_calls), static_cast<uint32_t>(b.calls.size())};
    b.n_calls += b.calls.size();
  }
  flags |= before & kFinal;
  const auto done = static_cast<uint8_t>(flags | kReady);
  bits(s).store(done, std::memory_order_release);
  return done;
}

void LazyDfa::build_all() const {
  for (int32_t s = 0; s < n_states(); ++s) (void)flags_of(s);
}

void LazyDfa::build_for(std::chrono::steady_clock::duration time) const {
  const auto deadline = std::chrono::steady_clock::now() + time;
  for (int32_t s = 0; s < n_states(); ++s) {
    {
      std::lock_guard lock(mutex_);
      if (builder_->work > builder_->max_work / 4) return;
    }
    (void)flags_of(s);
    if (s % 32 == 31 && std::chrono::steady_clock::now() > deadline) return;
  }
}

}  // namespace llms::structured
