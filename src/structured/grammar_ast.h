// structured/grammar_ast: a parsed grammar, regex or choice list, before any automaton exists.
//
// Expressions live in one flat arena and refer to their children by index, so no pass over them
// needs recursion (hostile inputs nest deeply) and destroying a huge tree is a few vector frees
// (and one hash node per distinct character set).
// The children of all nodes share one array, so a node is small and allocates nothing.
// A node's children always precede it in the arena (front ends build bottom-up).
// Every compiler front end (GBNF, regex, choices) produces a Grammar; one back end turns any
// Grammar into automata.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "code_point_set.h"

namespace llms::structured {

inline constexpr int32_t kUnbounded = -1;     // Expr::max of `*`, `+`, `{m,}`
inline constexpr int32_t kMaxRepeat = 10000;  // largest m or n accepted in {m,n}
inline constexpr int kMaxNesting = 200;       // deepest group nesting a parser accepts

enum class ExprKind : uint8_t {
  kEmpty,    // matches the empty string
  kLiteral,  // the bytes literals[payload]
  kCharSet,  // one code point of sets[payload], as UTF-8
  kConcat,   // children in order
  kAlt,      // any one child
  kRepeat,   // children[0] repeated min..max times (max may be kUnbounded)
  kRuleRef,  // rule payload (names[payload] until resolved)
};

struct Expr {
  ExprKind kind = ExprKind::kEmpty;
  int32_t payload = -1;
  int32_t min = 0;
  int32_t max = 0;
  int32_t source_offset = 0;  // where it was written, for errors
  uint32_t first_child = 0;   // its children: ExprArena::child_ids[first_child, + n_children)
  uint32_t n_children = 0;
};

struct ExprArena {
  std::vector<Expr> nodes;
  std::vector<int32_t> child_ids;  // every node's children, each node's in a row
  std::vector<std::string> literals;
  // Distinct, and never changed once added (nodes share them): add_set gives an equal set's id
  // again. A large schema's name patterns write the same few classes thousands of times, and
  // each distinct set is split into UTF-8 sequences once (nfa.h, CharSetSequences).
  std::vector<CodePointSet> sets;
  std::unordered_map<uint64_t, int32_t> set_by_hash;  // a set's hash -> the first set with it
  // A regex class's text ("[...]") -> its set, for parsers (a schema repeats a few classes).
  std::map<std::string, int32_t, std::less<>> set_by_class_text;

  int32_t add(Expr expr) {
    nodes.push_back(std::move(expr));
    return static_cast<int32_t>(nodes.size() - 1);
  }
  int32_t add_empty() { return add(Expr{}); }
  int32_t add_literal(std::string bytes);
  int32_t add_set(CodePointSet set);
  int32_t add_code_point(uint32_t cp);  // add_set of one code point, without building the set
  int32_t add_set_ref(int32_t set);     // a node of sets[set], already held
  // `children` must not point into child_ids itself (inserting a vector's range into it).
  int32_t add_node(ExprKind kind, std::span<const int32_t> children);
  int32_t add_repeat(int32_t child, int32_t min, int32_t max);

  std::span<const int32_t> children(const Expr& e) const {
    return std::span<const int32_t>(child_ids).subspan(e.first_child, e.n_children);
  }
  int32_t child(const Expr& e, size_t i) const { return child_ids[e.first_child + i]; }
};

struct GrammarRule {
  std::string name;
  int32_t expr = -1;
  int32_t source_offset = 0;
};

struct Grammar {
  ExprArena arena;
  std::vector<GrammarRule> rules;
  int32_t root = -1;  // index into rules
};

}  // namespace llms::structured
