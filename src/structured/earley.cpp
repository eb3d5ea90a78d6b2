// structured/earley: see earley.h.
#include "earley.h"

#include <algorithm>

namespace llms::structured {
namespace {

// Sets up to this size are deduplicated by a linear scan (most are tiny); larger ones by hash.
constexpr size_t kLinearDedupe = 16;

size_t item_hash(const EarleyItem& item) {
  uint64_t h = (static_cast<uint64_t>(static_cast<uint32_t>(item.state)) << 20 ^
                static_cast<uint64_t>(static_cast<uint32_t>(item.count))) *
               0x9E3779B97F4A7C15ull;
  h ^= reinterpret_cast<uintptr_t>(item.origin) * 0xC2B2AE3D27D4EB4Full;
  return static_cast<size_t>(h ^ (h >> 29));
}

}  // namespace

EarleySet::~EarleySet() {
  // Release the chain of origin sets iteratively: a set whose last owner is us gives its own
  // keepalive list to this loop before it dies, so no destructor recurses into the next.
  std::vector<std::shared_ptr<const EarleySet>> pending = std::move(keepalive);
  while (!pending.empty()) {
    std::shared_ptr<const EarleySet> set = std::move(pending.back());
    pending.pop_back();
    if (set.use_count() == 1) {
      auto& inherited = const_cast<EarleySet&>(*set).keepalive;
      for (auto& s : inherited) pending.push_back(std::move(s));
      inherited.clear();
    }
  }
}

void EarleyBuilder::reset_dedupe(size_t expected) {
  size_t capacity = 64;
  while (capacity < expected * 2) capacity <<= 1;
  table_.assign(capacity, EarleyItem{-1, 0, nullptr});
  table_used_ = 0;
}

void EarleyBuilder::add(EarleySet& set, EarleyItem item) {
  auto& items = set.items;
  if (items.size() < kLinearDedupe) {
    for (const EarleyItem& x : items) {
      if (x == item) return;
    }
    items.push_back(item);
    if (items.size() == kLinearDedupe) {
      reset_dedupe(items.size() * 2);
      for (const EarleyItem& x : items) {
        size_t i = item_hash(x) & (table_.size() - 1);
        while (table_[i].state >= 0) i = (i + 1) & (table_.size() - 1);
        table_[i] = x;
        ++table_used_;
      }
    }
    return;
  }
  if ((table_used_ + 1) * 2 > table_.size()) {
    reset_dedupe(table_.size());
    for (const EarleyItem& x : items) {
      size_t i = item_hash(x) & (table_.size() - 1);
      while (table_[i].state >= 0) i = (i + 1) & (table_.size() - 1);
      table_[i] = x;
      ++table_used_;
    }
  }
  size_t i = item_hash(item) & (table_.size() - 1);
  while (table_[i].state >= 0) {
    if (table_[i] == item) return;
    i = (i + 1) & (table_.size() - 1);
  }
  table_[i] = item;
  ++table_used_;
  items.push_back(item);
}

void EarleyBuilder::close(EarleySet& set) {
  for (size_t i = 0; i < set.items.size(); ++i) {
    const EarleyItem item = set.items[i];  // a copy: add() may grow the vector
    const uint8_t flags = g_.flags_of(item.state);
    // Completion. An empty completion (origin == this set) needs nothing here: every caller of
    // a nullable rule was advanced when it predicted it.
    if ((flags & kFinal) && item.origin != &set) {
      const int32_t rule = g_.rule_of(item.state);
      for (const EarleyItem& waiting : item.origin->items) {
        if (!(g_.flags_of(waiting.state) & kHasCalls)) continue;
        for (const CallEdge& c : g_.calls_of(waiting.state)) {
          if (c.rule != rule) continue;
          g_.for_each_move(c.target, waiting.state, waiting.count, [&](int32_t t, int32_t count) {
            add(set, EarleyItem{t, count, waiting.origin});
          });
        }
      }
    }
    if (flags & kHasCalls) {
      for (const CallEdge& c : g_.calls_of(item.state)) {
        const RuleInfo& callee = g_.rules[static_cast<size_t>(c.rule)];
        g_.for_each_move(callee.start, -1, 0, [&](int32_t t, int32_t count) {
          add(set, EarleyItem{t, count, &set});
        });
        if (callee.nullable) {
          g_.for_each_move(c.target, item.state, item.count, [&](int32_t t, int32_t count) {
            add(set, EarleyItem{t, count, item.origin});
          });
        }
      }
    }
  }
}

bool EarleyBuilder::step(const EarleySet& from, uint8_t byte, EarleySet& to) {
  to.items.clear();
  const size_t cls = g_.byte_class[byte];
  for (const EarleyItem& item : from.items) {
    const int32_t code = g_.row(item.state)[cls];
    if (code == kNoMove) continue;
    g_.for_each_move(code, item.state, item.count, [&](int32_t t, int32_t count) {
      add(to, EarleyItem{t, count, item.origin});
    });
  }
  if (to.items.empty()) return false;
  close(to);
  return true;
}

void EarleyBuilder::start(EarleySet& set, std::span<const EarleyItem> items) {
  set.items.clear();
  for (const EarleyItem& item : items) add(set, item);
  close(set);
}

void EarleyBuilder::keep_origins_alive(EarleySet& set) {
  std::vector<const EarleySet*> origins;
  for (const EarleyItem& item : set.items) {
    if (item.origin != &set) origins.push_back(item.origin);
  }
  std::sort(origins.begin(), origins.end());
  origins.erase(std::unique(origins.begin(), origins.end()), origins.end());
  set.keepalive.clear();
  for (const EarleySet* origin : origins) set.keepalive.push_back(origin->shared_from_this());
}

bool is_accepting_set(const CompiledGrammar& grammar, const EarleySet& set) {
  const EarleySet* initial = grammar.initial_set.get();
  for (const EarleyItem& item : set.items) {
    if (item.origin == initial && grammar.is_final(item.state) &&
        grammar.rule_of(item.state) == grammar.root_rule) {
      return true;
    }
  }
  return false;
}

bool can_read_byte(const CompiledGrammar& grammar, const EarleySet& set) {
  for (const EarleyItem& item : set.items) {
    if (grammar.flags_of(item.state) & kHasBytes) return true;
  }
  return false;
}

}  // namespace llms::structured
