// structured/token_trie: see token_trie.h.
#include "token_trie.h"

#include <algorithm>
#include <limits>

#include "regex_whitespace.h"
#include "util/error.h"

namespace llms::structured::detail {
namespace {

constexpr size_t kMaxTokenBytes = std::numeric_limits<uint16_t>::max();

std::array<CodePointSet, kNumTokenClasses> make_class_sets() {
  std::array<CodePointSet, kNumTokenClasses> sets;
  // JSON string characters that need no escape (RFC 8259): all but C0 controls, '"' and '\'.
  CodePointSet json = CodePointSet::range(0x20, kMaxCodePoint);
  json = json.negated();
  json.add('"', '"');
  json.add('\\', '\\');
  json = json.negated();
  sets[0] = json;
  CodePointSet json_no_del = json.negated();
  json_no_del.add(0x7F, 0x7F);
  sets[1] = json_no_del.negated();
  CodePointSet non_newline = CodePointSet::range(0, '\n' - 1);
  non_newline.add('\n' + 1, kMaxCodePoint);
  sets[2] = non_newline;
  sets[3] = CodePointSet::all();
  // Pattern text: what JSON Schema patterns' \s / \S / `.` decide alike in ECMA-262 and Python:
  // JSON string characters less DEL, the whitespace of one engine only (U+0085, U+FEFF; the
  // rest are C0 controls) and the line terminators `.` refuses.
  CodePointSet not_pattern_text = sets[1].negated();
  for (const CodePointInterval& i : kSpaceInPythonOnly) not_pattern_text.add(i.lo, i.hi);
  not_pattern_text.add(kSpaceInEcmaOnly.lo, kSpaceInEcmaOnly.hi);
  not_pattern_text.add(0x2028, 0x2029);
  sets[4] = not_pattern_text.negated();
  // ...and of those, the characters neither engine calls whitespace (\S).
  CodePointSet not_word = not_pattern_text;
  for (const CodePointInterval& i : kSpaceInBothEngines) not_word.add(i.lo, i.hi);
  sets[5] = not_word.negated();
  return sets;
}

}  // namespace

const CodePointSet& TokenTrie::class_set(int k) {
  static const std::array<CodePointSet, kNumTokenClasses> sets = make_class_sets();
  return sets[static_cast<size_t>(k)];
}

const std::vector<ByteSequence>& TokenTrie::class_sequences(int k) {
  static const std::array<std::vector<ByteSequence>, kNumTokenClasses> sequences = [] {
    std::array<std::vector<ByteSequence>, kNumTokenClasses> out;
    for (int i = 0; i < kNumTokenClasses; ++i)
      out[static_cast<size_t>(i)] = utf8_sequences(class_set(i));
    return out;
  }();
  return sequences[static_cast<size_t>(k)];
}

TokenTrie::TokenTrie(Vocabulary vocabulary) {
  const size_t n = vocabulary.token_bytes.size();
  if (n == 0) throw Error(Error::Kind::kInvalidArgument, "vocabulary: no tokens");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max() / 2)) {
    throw Error(Error::Kind::kInvalidArgument, "vocabulary: too many tokens");
  }
  if (vocabulary.is_special.size() != n) {
    throw Error(Error::Kind::kInvalidArgument, "vocabulary: is_special has " +
                                                   std::to_string(vocabulary.is_special.size()) +
                                                   " entries for " + std::to_string(n) + " tokens");
  }
  bytes_ = std::move(vocabulary.token_bytes);
  is_stop_.assign(n, 0);
  for (int32_t id : vocabulary.stop_token_ids) {
    if (id < 0 || static_cast<size_t>(id) >= n) {
      throw Error(Error::Kind::kInvalidArgument,
                  "vocabulary: stop token id " + std::to_string(id) + " out of range");
    }
    if (!is_stop_[static_cast<size_t>(id)]) stop_ids_.push_back(id);
    is_stop_[static_cast<size_t>(id)] = 1;
  }
  std::sort(stop_ids_.begin(), stop_ids_.end());
  is_text_.assign(n, 0);
  for (size_t id = 0; id < n; ++id) {
    if (bytes_[id].size() > kMaxTokenBytes) {
      throw Error(Error::Kind::kInvalidArgument, "vocabulary: token " + std::to_string(id) +
                                                     " is longer than " +
                                                     std::to_string(kMaxTokenBytes) + " bytes");
    }
    // A stop token is only ever allowed as a stop token, even if it also has text.
    if (!bytes_[id].empty() && !vocabulary.is_special[id] && !is_stop_[id]) is_text_[id] = 1;
  }
  build_trie();
  build_classes();
}

void TokenTrie::build_trie() {
  for (int32_t id = 0; id < n_tokens(); ++id) {
    if (is_text_[static_cast<size_t>(id)]) sorted_ids_.push_back(id);
  }
  std::sort(sorted_ids_.begin(), sorted_ids_.end(), [&](int32_t a, int32_t b) {
    return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)];
  });
  // Tokens are sorted, so the tokens ending at a node are consecutive and come before those of
  // every later node: node i's run starts where the ids seen before node i + 1 was made end.
  nodes_.push_back(TrieNode{});
  token_begin_.push_back(0);
  std::vector<uint32_t> path{0};  // path[d]: the node of the current prefix of length d
  std::string_view prev;
  auto close_deeper_than = [&](size_t depth) {
    while (path.size() > depth + 1) {
      nodes_[path.back()].subtree_end = static_cast<uint32_t>(nodes_.size());
      path.pop_back();
    }
  };
  for (size_t i = 0; i < sorted_ids_.size(); ++i) {
    const std::string_view s = bytes_[static_cast<size_t>(sorted_ids_[i])];
    size_t lcp = 0;
    while (lcp < prev.size() && lcp < s.size() && prev[lcp] == s[lcp]) ++lcp;
    close_deeper_than(lcp);
    for (size_t d = lcp; d < s.size(); ++d) {
      TrieNode node;
      node.depth = static_cast<uint16_t>(d + 1);
      node.byte = static_cast<uint8_t>(s[d]);
      path.push_back(static_cast<uint32_t>(nodes_.size()));
      nodes_.push_back(node);
      token_begin_.push_back(static_cast<uint32_t>(i));
    }
    max_depth_ = std::max(max_depth_, static_cast<int32_t>(s.size()));
    prev = s;
  }
  token_begin_.push_back(static_cast<uint32_t>(sorted_ids_.size()));
  close_deeper_than(0);
  nodes_[0].subtree_end = static_cast<uint32_t>(nodes_.size());
  // Deepest node of each subtree: children (later in the order) before their parents.
  subtree_depth_.assign(nodes_.size(), 0);
  for (size_t i = nodes_.size(); i-- > 0;) {
    uint16_t deepest = nodes_[i].depth;
    for (size_t c = i + 1; c < nodes_[i].subtree_end; c = nodes_[c].subtree_end) {
      deepest = std::max(deepest, subtree_depth_[c]);
    }
    subtree_depth_[i] = deepest;
  }
}

void TokenTrie::build_classes() {
  // Per token: its character count if it is in class k, else 0.
  std::array<std::vector<uint8_t>, kNumTokenClasses> chars;
  for (auto& c : chars) c.assign(bytes_.size(), 0);
  // Class bits of the ASCII characters, which most tokens are made of.
  std::array<uint8_t, 128> ascii_classes{};
  for (uint32_t cp = 0; cp < ascii_classes.size(); ++cp) {
    for (int k = 0; k < kNumTokenClasses; ++k) {
      if (class_set(k).contains(cp)) ascii_classes[cp] |= static_cast<uint8_t>(1u << k);
    }
  }
  for (int32_t id : sorted_ids_) {
    const std::string& s = bytes_[static_cast<size_t>(id)];
    std::array<bool, kNumTokenClasses> in{};
    in.fill(true);
    size_t count = 0;
    for (size_t pos = 0; pos < s.size();) {
      uint32_t cp = 0;
      const int length = decode_utf8(s, pos, cp);
      if (length == 0) {
        in.fill(false);
        break;
      }
      for (int k = 0; k < kNumTokenClasses; ++k) {
        const bool member = cp < ascii_classes.size() ? (ascii_classes[cp] >> k & 1u) != 0
                                                      : class_set(k).contains(cp);
        if (in[static_cast<size_t>(k)] && !member) in[static_cast<size_t>(k)] = false;
      }
      pos += static_cast<size_t>(length);
      ++count;
    }
    for (int k = 0; k < kNumTokenClasses; ++k) {
      if (in[static_cast<size_t>(k)])
        chars[static_cast<size_t>(k)][static_cast<size_t>(id)] =
            static_cast<uint8_t>(std::min<size_t>(count, 255));
    }
  }

  // Subtree flags, children before parents: nodes are in pre-order, so a reverse scan sees every
  // child before its parent. A node's parent is the nearest earlier node of depth - 1.
  std::vector<uint32_t> parent(nodes_.size(), 0);
  {
    std::vector<uint32_t> path{0};
    for (uint32_t i = 1; i < nodes_.size(); ++i) {
      path.resize(nodes_[i].depth);
      parent[i] = path.back();
      path.push_back(i);
    }
  }
  for (TrieNode& node : nodes_) node.class_all = static_cast<uint8_t>((1u << kNumTokenClasses) - 1);
  class_max_chars_.assign(nodes_.size(), {});
  for (size_t i = nodes_.size(); i-- > 0;) {
    TrieNode& node = nodes_[i];
    auto& max_chars = class_max_chars_[i];
    for (int32_t id : tokens_at(i)) {
      for (int k = 0; k < kNumTokenClasses; ++k) {
        const uint8_t c = chars[static_cast<size_t>(k)][static_cast<size_t>(id)];
        if (c == 0) node.class_all &= static_cast<uint8_t>(~(1u << k));
        max_chars[static_cast<size_t>(k)] = std::max(max_chars[static_cast<size_t>(k)], c);
      }
    }
    if (i == 0) break;
    nodes_[parent[i]].class_all &= node.class_all;
    auto& up = class_max_chars_[parent[i]];
    for (int k = 0; k < kNumTokenClasses; ++k) {
      up[static_cast<size_t>(k)] =
          std::max(up[static_cast<size_t>(k)], max_chars[static_cast<size_t>(k)]);
    }
  }

  // Runs of all-class-k siblings, from the last node back: a node's run goes on through the
  // run of the sibling right after its subtree when that sibling is all class k too.
  for (int k = 0; k < kNumTokenClasses; ++k) {
    auto& run_end = class_run_end_[static_cast<size_t>(k)];
    run_end.assign(nodes_.size(), 0);
    for (size_t i = nodes_.size(); i-- > 0;) {
      const uint32_t next = nodes_[i].subtree_end;
      const bool sibling_in_class = next < nodes_.size() && nodes_[next].depth == nodes_[i].depth &&
                                    (nodes_[next].class_all & (1u << k));
      run_end[i] = sibling_in_class ? run_end[next] : next;
    }
  }

  const auto n_words = static_cast<size_t>(this->n_words());
  for (int k = 0; k < kNumTokenClasses; ++k) {
    auto& bits = class_bits_[static_cast<size_t>(k)];
    bits.assign(kAllChars + 1, std::vector<uint32_t>(n_words, 0));
    for (int32_t id : sorted_ids_) {
      const int c = chars[static_cast<size_t>(k)][static_cast<size_t>(id)];
      if (c == 0) continue;
      const uint32_t bit = 1u << (id % 32);
      const auto word = static_cast<size_t>(id) / 32;
      for (int n = c; n <= kMaxCountedChars; ++n) bits[static_cast<size_t>(n)][word] |= bit;
      bits[kAllChars][word] |= bit;
    }
  }
}

std::span<const uint32_t> TokenTrie::class_tokens(int k, int n) const {
  return class_bits_[static_cast<size_t>(k)][static_cast<size_t>(std::clamp(n, 0, kAllChars))];
}

}  // namespace llms::structured::detail
