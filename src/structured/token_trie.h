// structured/token_trie: the vocabulary's text tokens in a byte trie laid out in depth-first
// order, plus per-token character-class facts. Internal to structured/ (TokenIndex holds one).
//
// Layout: nodes[0] is the root (the empty prefix); a node's children follow it immediately and
// its subtree ends at subtree_end, so a walk skips a dead subtree with one jump and never
// recurses. The tokens whose bytes end at a node are sorted_ids[token_begin, token_end).
//
// Character classes: a token "is in class k" when its bytes are complete UTF-8 characters all in
// class k. A grammar state that absorbs up to n characters of class k (it stays alive on any
// such string) accepts every class-k token of at most n characters without walking them:
// class_tokens(k, n) is that set, precomputed, and the subtree flags let a walk skip subtrees
// made only of such tokens. The classes are the bodies that dominate structured output: JSON
// string characters (with and without DEL), regex `.`, any character, and two for JSON Schema
// patterns, whose \s and \S refuse the code points the regex engines disagree on (U+0085,
// U+FEFF) and whose `.` refuses the line terminators, so no pattern state absorbs the plain JSON
// string classes: JSON string characters without DEL, U+0085, U+2028, U+2029 and U+FEFF, and
// those of them that neither engine calls whitespace.
//
// Classes nest (kClassParent): a state absorbs at least as many characters of a subclass as of
// its parent, and the parent's tokens hold the subclass's, so a subclass is searched only where
// its parent absorbs nothing (one of its characters dies at once, as U+0085 does in a pattern).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "code_point_set.h"
#include "structured/vocabulary.h"

namespace llms::structured::detail {

inline constexpr int kNumTokenClasses = 6;
// A class enclosing each class (-1: none listed); a parent's index is below its child's.
inline constexpr std::array<int, kNumTokenClasses> kClassParent = {-1, 0, -1, -1, 1, 4};
// Classes from this one on are the pattern classes.
inline constexpr int kFirstPatternClass = 4;
static_assert(kNumTokenClasses <= 8, "TrieNode::class_all holds one bit per class");
static_assert(
    [] {
      for (int k = 0; k < kNumTokenClasses; ++k) {
        if (kClassParent[static_cast<size_t>(k)] >= k) return false;
      }
      return true;
    }(),
    "a class's parent is searched before it");
inline constexpr int kMaxCountedChars = 32;             // class_tokens(k, n) for n <= this
inline constexpr int kAllChars = kMaxCountedChars + 1;  // class_tokens(k, kAllChars): any length
// Tokens longer than this many bytes are "long": few (a few hundred in a 150k vocabulary), but
// a walk over them tests counts up to their length, so walks of counted states keep them apart.
inline constexpr int kShortTokenBytes = kMaxCountedChars;

// What a walk reads at every node it visits, packed in 8 bytes: a walk over a 150k vocabulary
// visits tens of thousands of nodes, and waiting for their cache lines was a quarter of its time
// with the token ranges and class sizes alongside. The rest lives in per-node arrays of
// TokenTrie, read only where a walk stays alive.
struct TrieNode {
  uint32_t subtree_end = 0;
  uint16_t depth = 0;
  uint8_t byte = 0;
  uint8_t class_all = 0;  // bit k: every token in the subtree is in class k
};
static_assert(sizeof(TrieNode) == 8);

class TokenTrie {
 public:
  explicit TokenTrie(Vocabulary vocabulary);  // throws llms::Error(kInvalidArgument)

  int32_t n_tokens() const { return static_cast<int32_t>(bytes_.size()); }
  int32_t n_words() const { return (n_tokens() + 31) / 32; }
  std::string_view bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  bool is_text(int32_t id) const { return is_text_[static_cast<size_t>(id)] != 0; }
  bool is_stop(int32_t id) const { return is_stop_[static_cast<size_t>(id)] != 0; }
  std::span<const int32_t> stop_ids() const { return stop_ids_; }

  const std::vector<TrieNode>& nodes() const { return nodes_; }
  // The tokens whose bytes end at node i.
  std::span<const int32_t> tokens_at(size_t i) const {
    return std::span<const int32_t>(sorted_ids_)
        .subspan(token_begin_[i], token_begin_[i + 1] - token_begin_[i]);
  }
  // The most characters of a class-k token below node i (saturating at 255; meaningful only
  // when bit k of its class_all is set).
  uint8_t class_max_chars(size_t i, int k) const {
    return class_max_chars_[i][static_cast<size_t>(k)];
  }
  // The deepest node of the subtree of node i (i included).
  uint16_t subtree_depth(size_t i) const { return subtree_depth_[i]; }
  // For a node i whose subtree is all class k: the end of the run of such siblings that starts
  // at i (the first later sibling that is not, or the end of the parent's subtree). A walk that
  // accepts every class-k token skips the run at once: a node like "a" has thousands of
  // children, nearly all of them plain word continuations.
  uint32_t class_run_end(int k, size_t i) const {
    return class_run_end_[static_cast<size_t>(k)][i];
  }
  int32_t max_depth() const { return max_depth_; }

  static const CodePointSet& class_set(int k);
  static const std::vector<ByteSequence>& class_sequences(int k);
  std::span<const uint32_t> class_tokens(int k, int n) const;

 private:
  void build_trie();
  void build_classes();

  std::vector<std::string> bytes_;
  std::vector<uint8_t> is_text_;
  std::vector<uint8_t> is_stop_;
  std::vector<int32_t> stop_ids_;
  std::vector<int32_t> sorted_ids_;  // text tokens sorted by bytes
  std::vector<TrieNode> nodes_;
  // Per node (and one past the last): where its tokens start in sorted_ids_; a node's tokens are
  // consecutive there, and the next node's start where they end.
  std::vector<uint32_t> token_begin_;
  std::vector<std::array<uint8_t, kNumTokenClasses>> class_max_chars_;
  std::vector<uint16_t> subtree_depth_;
  std::array<std::vector<uint32_t>, kNumTokenClasses> class_run_end_;
  int32_t max_depth_ = 0;
  // class_bits_[k][n]: mask-layout bitset of class-k tokens of 1..n chars (n = kAllChars: any).
  std::array<std::vector<std::vector<uint32_t>>, kNumTokenClasses> class_bits_;
};

}  // namespace llms::structured::detail
