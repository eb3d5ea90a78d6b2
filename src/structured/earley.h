// structured/earley: Earley parsing over the grammar's rule automata, one byte at a time.
//
// An item is (state, count, origin): a rule's DFA is in `state` after reading the text since the
// position whose set is `origin`; `count` is the iteration count of the state's counted region. A
// set is closed under prediction (a call edge adds the callee's start item, origin = this set; a
// nullable callee also advances the caller at once) and completion (a final state advances the
// items of its origin set that call its rule). Left recursion needs nothing special: a rule
// predicted twice in one set is one item.
//
// Sets are immutable once built and refer to their origin sets by pointer. A set built for a
// matcher's history owns its origin sets (keepalive), so a whole parse is a DAG of shared sets:
// copying a matcher copies one pointer, and sets no item refers to any more are freed (without
// recursion, however deep the chain). Sets built during a mask walk are scratch: they live in
// the walker's stack and are never kept.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "compiled_grammar.h"

namespace llms::structured {

class EarleySet;

struct EarleyItem {
  int32_t state = 0;
  int32_t count = 0;  // iterations done in the state's counted region (0 outside regions)
  const EarleySet* origin = nullptr;

  bool operator==(const EarleyItem&) const = default;
};

class EarleySet : public std::enable_shared_from_this<EarleySet> {
 public:
  EarleySet() = default;
  ~EarleySet();
  EarleySet(const EarleySet&) = delete;
  EarleySet& operator=(const EarleySet&) = delete;

  std::vector<EarleyItem> items;
  // The origin sets items refer to (other than this one), for persistent sets only.
  std::vector<std::shared_ptr<const EarleySet>> keepalive;
};

// Builds sets; holds the scratch it needs (a dedupe table), so keep one per thread.
class EarleyBuilder {
 public:
  explicit EarleyBuilder(const CompiledGrammar& grammar) : g_(grammar) {}

  // Fills `to` (cleared first) with the closed set after reading `byte` from `from`; returns
  // false when no item survives (to is then empty).
  bool step(const EarleySet& from, uint8_t byte, EarleySet& to);

  // Starts `set` with the given items (origins may be &set) and closes it.
  void start(EarleySet& set, std::span<const EarleyItem> items);

  // Fills keepalive of a set that is owned by a shared_ptr (all its origins must be too).
  static void keep_origins_alive(EarleySet& set);

 private:
  void reset_dedupe(size_t expected);
  void add(EarleySet& set, EarleyItem item);
  void close(EarleySet& set);

  const CompiledGrammar& g_;
  std::vector<EarleyItem> table_;  // open addressing; state -1 = empty slot
  size_t table_used_ = 0;
};

// True when the set holds a final root item that started at the grammar's initial set.
bool is_accepting_set(const CompiledGrammar& grammar, const EarleySet& set);
// True when some item of the set can read a byte.
bool can_read_byte(const CompiledGrammar& grammar, const EarleySet& set);

}  // namespace llms::structured
