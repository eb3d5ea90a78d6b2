// structured/grammar_ast: see grammar_ast.h.
#include "grammar_ast.h"

namespace llms::structured {

int32_t ExprArena::add_literal(std::string bytes) {
  if (bytes.empty()) return add_empty();
  literals.push_back(std::move(bytes));
  Expr e;
  e.kind = ExprKind::kLiteral;
  e.payload = static_cast<int32_t>(literals.size() - 1);
  return add(std::move(e));
}

namespace {

uint64_t hash_ranges(std::span<const CodePointRange> ranges) {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a's constants, over the 32-bit bounds
  for (const CodePointRange& r : ranges) {
    for (uint32_t v : {r.lo, r.hi}) hash = (hash ^ v) * 0x100000001b3ull;
  }
  return hash;
}

}  // namespace

int32_t ExprArena::add_set_ref(int32_t set) {
  Expr e;
  e.kind = ExprKind::kCharSet;
  e.payload = set;
  return add(std::move(e));
}

int32_t ExprArena::add_set(CodePointSet set) {
  const uint64_t hash = hash_ranges(set.ranges());
  const auto [it, inserted] = set_by_hash.emplace(hash, static_cast<int32_t>(sets.size()));
  if (!inserted && sets[static_cast<size_t>(it->second)].ranges() == set.ranges()) {
    return add_set_ref(it->second);
  }
  // New, or a different set with the same hash (kept apart, never looked up).
  sets.push_back(std::move(set));
  return add_set_ref(static_cast<int32_t>(sets.size() - 1));
}

int32_t ExprArena::add_code_point(uint32_t cp) {
  const CodePointRange range{cp, cp};
  const auto it = set_by_hash.find(hash_ranges(std::span<const CodePointRange>(&range, 1)));
  if (it != set_by_hash.end()) {
    const auto& ranges = sets[static_cast<size_t>(it->second)].ranges();
    if (ranges.size() == 1 && ranges[0] == range) return add_set_ref(it->second);
  }
  return add_set(CodePointSet::single(cp));
}

int32_t ExprArena::add_node(ExprKind kind, std::span<const int32_t> children) {
  if (children.size() == 1) return children[0];
  // An empty sequence matches the empty string; an empty choice (kAlt) matches nothing.
  if (children.empty() && kind == ExprKind::kConcat) return add_empty();
  Expr e;
  e.kind = kind;
  e.first_child = static_cast<uint32_t>(child_ids.size());
  e.n_children = static_cast<uint32_t>(children.size());
  child_ids.insert(child_ids.end(), children.begin(), children.end());
  return add(std::move(e));
}

int32_t ExprArena::add_repeat(int32_t child, int32_t min, int32_t max) {
  Expr e;
  e.kind = ExprKind::kRepeat;
  e.min = min;
  e.max = max;
  e.first_child = static_cast<uint32_t>(child_ids.size());
  e.n_children = 1;
  child_ids.push_back(child);
  return add(std::move(e));
}

}  // namespace llms::structured
