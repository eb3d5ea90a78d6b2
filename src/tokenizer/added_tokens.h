// tokenizer/added_tokens: finds added (control and user-defined) tokens in raw input text.
//
// Contract: find() returns the leftmost match at or after `from`, and among matches starting
// there the longest: the order of tokenizers' AddedVocabulary, which runs a leftmost-longest
// Aho-Corasick automaton over the raw (not normalized) text. Matching is a byte trie walked from
// each candidate start (a bitmap of first bytes skips most positions), so the cost is at most
// O(text length x longest added token).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "flat_map.h"

namespace llms::tokenizer {

class AddedTokenMatcher {
 public:
  struct Match {
    size_t begin;
    size_t end;
    int32_t id;
    bool special;
  };

  // Adds a token; adding the same content again replaces its id and flag. Empty content is
  // ignored (it could never be matched by an automaton either).
  void add(std::string_view content, int32_t id, bool special);

  std::optional<Match> find(std::string_view text, size_t from) const;

  bool empty() const { return n_tokens_ == 0; }

 private:
  struct Terminal {
    int32_t id = -1;
    bool special = false;
  };
  int32_t child(int32_t node, uint8_t byte) const;

  std::vector<Terminal> terminals_{Terminal{}};  // one per trie node; node 0 is the root
  FlatMap<int32_t> edges_;                       // (node << 8 | byte) -> child node
  std::array<bool, 256> first_byte_{};
  size_t n_tokens_ = 0;
};

}  // namespace llms::tokenizer
