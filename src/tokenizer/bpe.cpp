// tokenizer/bpe: see bpe.h for the contract (HF-identical merge order in O(n log n)).
#include "bpe.h"

#include <algorithm>
#include <array>
#include <limits>

namespace llms::tokenizer {

namespace {

// std::push_heap builds a max-heap; "greater" puts the lowest (rank, pos) on top, which is the
// order of tokenizers' Merge (min rank first, then min position).
struct CandidateAfter {
  bool operator()(const BpeScratch::Candidate& a, const BpeScratch::Candidate& b) const {
    if (a.rank != b.rank) return a.rank > b.rank;
    return a.pos > b.pos;
  }
};

}  // namespace

void BpeMerges::set(int32_t left, int32_t right, MergeRule rule) {
  table_.insert_or_assign(
      FlatMap<MergeRule>::pair_key(static_cast<uint32_t>(left), static_cast<uint32_t>(right)),
      rule);
}

void BpeMerges::apply_small(std::span<const int32_t> symbols, std::vector<int32_t>& out) const {
  // Same merge order as the heap (lowest rank, then leftmost) by scanning a short array. The two
  // agree because every symbol spells a non-empty string: a changed pair always spells a longer
  // string, hence another token, so the heap never acts on a stale candidate.
  std::array<int32_t, kSmallWord> ids;
  std::array<MergeRule, kSmallWord> rule;  // rule[i]: merge of ids[i], ids[i + 1]
  constexpr int32_t kNone = std::numeric_limits<int32_t>::max();
  size_t n = symbols.size();
  std::copy(symbols.begin(), symbols.end(), ids.begin());
  auto lookup = [&](size_t i) {
    const MergeRule* r = find(ids[i], ids[i + 1]);
    rule[i] = r ? *r : MergeRule{kNone, 0};
  };
  for (size_t i = 0; i + 1 < n; ++i) lookup(i);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (rule[i].rank < rule[best].rank) best = i;
    }
    if (rule[best].rank == kNone) break;
    ids[best] = rule[best].new_id;
    for (size_t i = best + 1; i + 1 < n; ++i) {
      ids[i] = ids[i + 1];
      rule[i] = rule[i + 1];
    }
    --n;
    if (best > 0) lookup(best - 1);
    if (best + 1 < n) lookup(best);
  }
  out.insert(out.end(), ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
}

void BpeMerges::apply(std::span<const int32_t> symbols, std::vector<int32_t>& out,
                      BpeScratch& scratch) const {
  const size_t n = symbols.size();
  if (n <= 1) {
    out.insert(out.end(), symbols.begin(), symbols.end());
    return;
  }
  if (n == 2) {  // the most common case after single symbols: no heap needed
    const MergeRule* rule = find(symbols[0], symbols[1]);
    if (rule) {
      out.push_back(rule->new_id);
    } else {
      out.insert(out.end(), symbols.begin(), symbols.end());
    }
    return;
  }

  if (n <= kSmallWord) {
    apply_small(symbols, out);
    return;
  }

  auto& sym = scratch.symbols;
  auto& heap = scratch.heap;
  sym.resize(n);
  heap.clear();
  for (size_t i = 0; i < n; ++i) {
    sym[i] = {symbols[i], static_cast<int32_t>(i) - 1,
              i + 1 < n ? static_cast<int32_t>(i + 1) : -1};
  }
  for (size_t i = 0; i + 1 < n; ++i) {
    if (const MergeRule* rule = find(symbols[i], symbols[i + 1])) {
      heap.push_back(
          {rule->rank, static_cast<int32_t>(i), rule->new_id, symbols[i], symbols[i + 1]});
    }
  }
  const CandidateAfter after;
  std::make_heap(heap.begin(), heap.end(), after);

  constexpr int32_t kDead = -1;
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), after);
    const BpeScratch::Candidate top = heap.back();
    heap.pop_back();
    BpeScratch::Symbol& cur = sym[top.pos];
    if (cur.id != top.left || cur.next < 0) continue;  // merged away or changed since queued
    const int32_t next_pos = cur.next;
    if (sym[next_pos].id != top.right) continue;

    cur.id = top.new_id;
    BpeScratch::Symbol& gone = sym[next_pos];
    cur.next = gone.next;
    if (gone.next >= 0) sym[gone.next].prev = top.pos;
    gone.id = kDead;

    if (cur.prev >= 0) {
      const int32_t left = sym[cur.prev].id;
      if (const MergeRule* rule = find(left, cur.id)) {
        heap.push_back({rule->rank, cur.prev, rule->new_id, left, cur.id});
        std::push_heap(heap.begin(), heap.end(), after);
      }
    }
    if (cur.next >= 0) {
      const int32_t right = sym[cur.next].id;
      if (const MergeRule* rule = find(cur.id, right)) {
        heap.push_back({rule->rank, top.pos, rule->new_id, cur.id, right});
        std::push_heap(heap.begin(), heap.end(), after);
      }
    }
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

}  // namespace llms::tokenizer
