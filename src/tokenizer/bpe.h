// tokenizer/bpe: the merge loop shared by byte-level and SentencePiece-style BPE.
//
// Contract: apply() performs exactly the merges Hugging Face tokenizers' BPE model performs on a
// word (tokenizers/src/models/bpe/word.rs, merge_all without dropout): among all adjacent symbol
// pairs that have a merge rule, repeatedly merge the one with the lowest rank, the leftmost on a
// tie. It uses a binary heap of candidate merges with lazy invalidation, so a word of n symbols
// costs O(n log n) no matter how hostile it is; there is no length cap that could change the
// result. tokenizers treats a candidate as stale when its pair now maps to another new token; we
// check that the pair itself changed. The two agree because every symbol spells a non-empty
// string and symbols only grow: the pair at a position can only change into a pair that spells a
// longer string, hence another token.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "flat_map.h"

namespace llms::tokenizer {

struct MergeRule {
  int32_t rank = 0;    // lower merges first
  int32_t new_id = 0;  // the token the pair becomes
};

// Reusable buffers, so that encoding many words allocates nothing after warm-up.
struct BpeScratch {
  struct Symbol {
    int32_t id;
    int32_t prev;  // index of the previous live symbol, -1 at the start
    int32_t next;  // index of the next live symbol, -1 at the end
  };
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t new_id;
    int32_t left;   // the pair this merge was queued for; the candidate is stale once the
    int32_t right;  // symbols at pos / next differ
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

class BpeMerges {
 public:
  // Sets the rule for (left, right); a later call for the same pair replaces the earlier one,
  // as in tokenizers, which collects merges into a map.
  void set(int32_t left, int32_t right, MergeRule rule);
  const MergeRule* find(int32_t left, int32_t right) const {
    return table_.find(
        FlatMap<MergeRule>::pair_key(static_cast<uint32_t>(left), static_cast<uint32_t>(right)));
  }
  size_t size() const { return table_.size(); }
  void reserve(size_t n) { table_.reserve(n); }

  // Merges the word whose initial symbols are `symbols` and appends the final ids to `out`.
  void apply(std::span<const int32_t> symbols, std::vector<int32_t>& out,
             BpeScratch& scratch) const;

 private:
  static constexpr size_t kSmallWord = 16;  // up to here a linear scan beats the heap
  void apply_small(std::span<const int32_t> symbols, std::vector<int32_t>& out) const;

  FlatMap<MergeRule> table_;
};

}  // namespace llms::tokenizer
