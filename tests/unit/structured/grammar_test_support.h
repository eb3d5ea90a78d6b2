// Helpers for the grammar engine tests: small vocabularies, mask reading, and the brute-force
// oracles the masks are checked against.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "structured/grammar.h"
#include "structured/matcher.h"

namespace llms::structured::testing {

// Ids 0..255: the single bytes; 256: a stop token (special, empty); 257: a padding row (special,
// empty); 258: a special token with text ("<|im_start|>") that must never be allowed; then
// `extra` tokens in order.
inline constexpr int32_t kStopId = 256;
inline constexpr int32_t kPaddingId = 257;
inline constexpr int32_t kSpecialTextId = 258;
inline constexpr int32_t kFirstExtraId = 259;

inline Vocabulary byte_vocabulary(const std::vector<std::string>& extra = {}) {
  Vocabulary v;
  for (int b = 0; b < 256; ++b) {
    v.token_bytes.emplace_back(1, static_cast<char>(b));
    v.is_special.push_back(0);
  }
  v.token_bytes.emplace_back();
  v.is_special.push_back(1);
  v.token_bytes.emplace_back();
  v.is_special.push_back(1);
  v.token_bytes.emplace_back("<|im_start|>");
  v.is_special.push_back(1);
  for (const std::string& s : extra) {
    v.token_bytes.push_back(s);
    v.is_special.push_back(0);
  }
  v.stop_token_ids = {kStopId};
  return v;
}

inline std::shared_ptr<const TokenIndex> byte_index(const std::vector<std::string>& extra = {}) {
  return build_token_index(byte_vocabulary(extra));
}

inline std::vector<int32_t> allowed_ids(Matcher& m) {
  const TokenIndex& index = token_index(m.grammar());
  std::vector<uint32_t> words(static_cast<size_t>(index.n_mask_words()));
  m.fill_mask(words);
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < index.n_tokens(); ++id) {
    if (words[static_cast<size_t>(id) / 32] >> (id % 32) & 1u) ids.push_back(id);
  }
  return ids;
}

// The tokens a copy of the matcher accepts (the parser's own verdict, token by token).
inline std::vector<int32_t> brute_force_ids(const Matcher& m) {
  const TokenIndex& index = token_index(m.grammar());
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < index.n_tokens(); ++id) {
    Matcher copy = m;
    if (copy.accept_token(id)) ids.push_back(id);
  }
  return ids;
}

// Whether some completion of the matcher's text is a sentence: breadth-first over single bytes,
// positions deduplicated by debug_state(). kDead only when every reachable position was
// explored; kUndecided when a bound cut the search short (highly ambiguous grammars).
enum class Completion { kFound, kDead, kUndecided };

inline Completion completion(const Matcher& start, int max_depth = 48, size_t max_states = 20000) {
  std::set<std::string> seen;
  std::deque<std::pair<Matcher, int>> queue;
  queue.emplace_back(start, 0);
  seen.insert(start.debug_state());
  bool cut = false;
  while (!queue.empty()) {
    auto [m, depth] = std::move(queue.front());
    queue.pop_front();
    if (m.is_accepting()) return Completion::kFound;
    if (depth >= max_depth) {
      cut = true;
      continue;
    }
    for (int b = 0; b < 256; ++b) {
      Matcher next = m;
      const char c = static_cast<char>(b);
      if (!next.accept_bytes(std::string_view(&c, 1))) continue;
      if (!seen.insert(next.debug_state()).second) continue;
      if (seen.size() > max_states) return Completion::kUndecided;
      queue.emplace_back(std::move(next), depth + 1);
    }
  }
  return cut ? Completion::kUndecided : Completion::kDead;
}

inline bool can_complete(const Matcher& start) { return completion(start) == Completion::kFound; }

inline bool accepts(const std::shared_ptr<const CompiledGrammar>& g, std::string_view text) {
  Matcher m(g);
  return m.accept_bytes(text) && m.is_accepting();
}

}  // namespace llms::structured::testing
