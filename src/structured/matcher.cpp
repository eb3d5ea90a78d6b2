// structured/matcher: see matcher.h.
#include "structured/matcher.h"

#include <algorithm>
#include <deque>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>

#include "compiled_grammar.h"
#include "earley.h"
#include "mask_walker.h"
#include "token_trie.h"
#include "util/error.h"

namespace llms::structured {

struct Matcher::State {
  struct Step {
    std::shared_ptr<const EarleySet> set;
    bool stopped = false;
  };

  explicit State(const CompiledGrammar& grammar) : builder(grammar) {}
  State(const State& other)
      : history(other.history), n_steps(other.n_steps), builder(other.builder) {}

  const Step& current() const { return history.back(); }

  void push(Step step) {
    history.push_back(std::move(step));
    if (history.size() > static_cast<size_t>(kMaxRollback) + 1) history.pop_front();
    ++n_steps;
  }

  std::deque<Step> history;  // back() is now; up to kMaxRollback earlier steps before it
  int32_t n_steps = 0;
  EarleyBuilder builder;
  std::unique_ptr<MaskWalker> walker;  // scratch, made on first use, never copied

  // The last mask and the set it was computed for (held, so the origin addresses in its
  // signature stay unique). Never copied: a fork recomputes.
  std::shared_ptr<const EarleySet> cached_set;
  std::vector<std::tuple<int32_t, uint64_t, uint64_t, const EarleySet*>> cached_signature;
  std::vector<uint32_t> cached_words;
};

namespace {

// What a set's mask depends on: its items' states, what their counts change in it, and their
// origins (this set itself written as nullptr), in a canonical order. A counted item's mask
// comes from its state's cached walk (an entry serves many counts) and from continuations that
// read the count only if relative: when none does, the entry itself stands for the count (a
// bounded string keeps one signature along its length).
void set_signature(const CompiledGrammar& g, const EarleySet& set, CompileBudget& budget,
                   std::vector<std::tuple<int32_t, uint64_t, uint64_t, const EarleySet*>>& out) {
  out.clear();
  for (const EarleyItem& item : set.items) {
    uint64_t count = g.count_key(item.state, item.count) << 1;
    uint64_t long_walk = 0;
    if (g.region_of(item.state) >= 0 && (g.flags_of(item.state) & kHasBytes)) {
      const StateMaskInfo& info = g.mask_info(item.state, item.count, budget);
      const StateMaskInfo* long_info = g.long_mask_info(item.state, item.count, budget);
      if (!info.continuations_read_count &&
          (long_info == nullptr || !long_info->continuations_read_count)) {
        count = reinterpret_cast<uintptr_t>(&info) << 1 | 1;
        long_walk = reinterpret_cast<uintptr_t>(long_info);
      }
    }
    out.emplace_back(item.state, count, long_walk, item.origin == &set ? nullptr : item.origin);
  }
  std::sort(out.begin(), out.end());
}

}  // namespace

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar) : grammar_(std::move(grammar)) {
  if (!grammar_) throw Error(Error::Kind::kInvalidArgument, "Matcher: no grammar");
  state_ = std::make_unique<State>(*grammar_);
  state_->history.push_back(State::Step{grammar_->initial_set, false});
}

Matcher::~Matcher() = default;

Matcher::Matcher(const Matcher& other)
    : grammar_(other.grammar_), state_(std::make_unique<State>(*other.state_)) {}

Matcher& Matcher::operator=(const Matcher& other) {
  if (this != &other) {
    grammar_ = other.grammar_;
    state_ = std::make_unique<State>(*other.state_);
  }
  return *this;
}

Matcher::Matcher(Matcher&& other) noexcept = default;
Matcher& Matcher::operator=(Matcher&& other) noexcept = default;

void Matcher::fill_mask(std::span<uint32_t> words) {
  const TokenIndex& index = *grammar_->index;
  if (words.size() != static_cast<size_t>(index.n_mask_words())) {
    throw Error(Error::Kind::kInvalidArgument,
                "fill_mask: " + std::to_string(words.size()) + " words for " +
                    std::to_string(index.n_tokens()) + " tokens (need " +
                    std::to_string(index.n_mask_words()) + ")");
  }
  std::fill(words.begin(), words.end(), 0u);
  State& s = *state_;
  const State::Step& now = s.current();
  if (now.stopped) return;
  // Inside a long string consecutive positions usually have the same signature: reuse the mask.
  CompileBudget budget(grammar_->mask_limits);
  thread_local std::vector<std::tuple<int32_t, uint64_t, uint64_t, const EarleySet*>> signature;
  set_signature(*grammar_, *now.set, budget, signature);
  if (s.cached_set && signature == s.cached_signature) {
    std::copy(s.cached_words.begin(), s.cached_words.end(), words.begin());
    return;
  }
  if (!s.walker) s.walker = std::make_unique<MaskWalker>(*grammar_);
  s.walker->fill(*now.set, words, budget);
  if (is_accepting_set(*grammar_, *now.set)) {
    for (int32_t id : index.stop_token_ids())
      words[static_cast<size_t>(id) / 32] |= 1u << (id % 32);
  }
  s.cached_set = now.set;
  s.cached_signature = signature;
  s.cached_words.assign(words.begin(), words.end());
}

bool Matcher::accept_token(int32_t id) {
  const TokenIndex& index = *grammar_->index;
  if (id < 0 || id >= index.n_tokens()) return false;
  if (state_->current().stopped) return false;
  if (index.is_stop_token(id)) {
    if (!is_accepting()) return false;
    state_->push(State::Step{state_->current().set, true});
    return true;
  }
  if (!index.is_text_token(id)) return false;
  return accept_bytes(index.token_bytes(id));
}

bool Matcher::accept_bytes(std::string_view bytes) {
  if (state_->current().stopped) return false;
  std::shared_ptr<const EarleySet> set = state_->current().set;
  for (char c : bytes) {
    auto next = std::make_shared<EarleySet>();
    if (!state_->builder.step(*set, static_cast<uint8_t>(c), *next)) return false;
    EarleyBuilder::keep_origins_alive(*next);
    set = std::move(next);
  }
  state_->push(State::Step{std::move(set), false});
  return true;
}

void Matcher::rollback(int32_t n_steps) {
  const auto kept = static_cast<int32_t>(state_->history.size()) - 1;
  if (n_steps < 0 || n_steps > kept) {
    throw Error(Error::Kind::kInvalidArgument,
                "rollback: cannot undo " + std::to_string(n_steps) + " steps (" +
                    std::to_string(kept) + " kept, at most " + std::to_string(kMaxRollback) + ")");
  }
  for (int32_t i = 0; i < n_steps; ++i) state_->history.pop_back();
  state_->n_steps -= n_steps;
}

bool Matcher::is_accepting() const {
  const State::Step& now = state_->current();
  return !now.stopped && is_accepting_set(*grammar_, *now.set);
}

bool Matcher::can_continue() const {
  const State::Step& now = state_->current();
  return !now.stopped && can_read_byte(*grammar_, *now.set);
}

bool Matcher::is_stopped() const { return state_->current().stopped; }

int32_t Matcher::n_tokens_accepted() const { return state_->n_steps; }

}  // namespace llms::structured

namespace llms::structured {

std::string Matcher::debug_state() const {
  // Canonical ids for the sets reachable through origins, origins first (iterative post-order),
  // so equal structures get equal ids whatever their addresses.
  const State::Step& now = state_->current();
  std::unordered_map<const EarleySet*, int> id_of;
  std::map<std::string, int> ids;
  auto describe = [&](const EarleySet* set) {
    std::vector<std::tuple<int32_t, int32_t, int>> items;
    for (const EarleyItem& item : set->items) {
      items.emplace_back(item.state, item.count, item.origin == set ? -1 : id_of.at(item.origin));
    }
    std::sort(items.begin(), items.end());
    std::string text;
    for (const auto& [state, count, origin] : items) {
      text +=
          std::to_string(state) + "#" + std::to_string(count) + "@" + std::to_string(origin) + " ";
    }
    return text;
  };
  std::vector<std::pair<const EarleySet*, bool>> stack{{now.set.get(), false}};
  while (!stack.empty()) {
    auto [set, expanded] = stack.back();
    stack.pop_back();
    if (id_of.count(set)) continue;
    if (expanded) {
      const std::string text = describe(set);
      auto it = ids.emplace(text, static_cast<int>(ids.size())).first;
      id_of[set] = it->second;
      continue;
    }
    stack.push_back({set, true});
    for (const EarleyItem& item : set->items) {
      if (item.origin != set && !id_of.count(item.origin)) stack.push_back({item.origin, false});
    }
  }
  std::string out = now.stopped ? "stopped " : "";
  out += describe(now.set.get());
  return out;
}

}  // namespace llms::structured
