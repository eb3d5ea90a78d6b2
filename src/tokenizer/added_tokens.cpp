// tokenizer/added_tokens: byte trie for leftmost-longest matching (see added_tokens.h).
#include "added_tokens.h"

namespace llms::tokenizer {

int32_t AddedTokenMatcher::child(int32_t node, uint8_t byte) const {
  const int32_t* next = edges_.find((static_cast<uint64_t>(node) << 8) | byte);
  return next ? *next : -1;
}

void AddedTokenMatcher::add(std::string_view content, int32_t id, bool special) {
  if (content.empty()) return;
  int32_t node = 0;
  for (char c : content) {
    const auto byte = static_cast<uint8_t>(c);
    int32_t next = child(node, byte);
    if (next < 0) {
      next = static_cast<int32_t>(terminals_.size());
      terminals_.push_back(Terminal{});
      edges_.insert_or_assign((static_cast<uint64_t>(node) << 8) | byte, next);
    }
    node = next;
  }
  if (terminals_[node].id < 0) ++n_tokens_;
  terminals_[node] = Terminal{id, special};
  first_byte_[static_cast<uint8_t>(content[0])] = true;
}

std::optional<AddedTokenMatcher::Match> AddedTokenMatcher::find(std::string_view text,
                                                                size_t from) const {
  if (n_tokens_ == 0) return std::nullopt;
  for (size_t start = from; start < text.size(); ++start) {
    if (!first_byte_[static_cast<uint8_t>(text[start])]) continue;
    int32_t node = 0;
    std::optional<Match> best;
    for (size_t i = start; i < text.size(); ++i) {
      node = child(node, static_cast<uint8_t>(text[i]));
      if (node < 0) break;
      const Terminal& t = terminals_[node];
      if (t.id >= 0) best = Match{start, i + 1, t.id, t.special};
    }
    if (best) return best;
  }
  return std::nullopt;
}

}  // namespace llms::tokenizer
