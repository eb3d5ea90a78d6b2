// structured/json_schema_pattern: see json_schema_pattern.h. Simplifying, measuring, bounding
// and writing pattern languages; parsing is in json_schema_pattern_parser.cpp, automata in
// json_schema_pattern_automata.cpp.
#include "structured/json_schema_pattern.h"

#include <algorithm>
#include <memory>
#include <unordered_set>

#include "util/error.h"
#include "util/utf8.h"

namespace llms::structured::jsonschema {

PatternNode PatternNode::of_set(CodePointSet s) {
  PatternNode node;
  node.kind = Kind::kSet;
  node.set = std::move(s);
  return node;
}

PatternNode PatternNode::concat(std::vector<PatternNode> parts) {
  PatternNode node;
  node.kind = Kind::kConcat;
  node.children = std::move(parts);
  return node;
}

PatternNode PatternNode::alternation(std::vector<PatternNode> options) {
  PatternNode node;
  node.kind = Kind::kAlternation;
  node.children = std::move(options);
  return node;
}

PatternNode PatternNode::repeat(PatternNode child, int64_t lo, int64_t hi) {
  PatternNode node;
  node.kind = Kind::kRepeat;
  node.children.push_back(std::move(child));
  node.min = lo;
  node.max = hi;
  return node;
}

namespace {

bool is_empty_string(const PatternNode& node) {
  return node.kind == PatternNode::Kind::kConcat && node.children.empty();
}

}  // namespace

bool is_empty_language(const PatternNode& simplified) {
  return simplified.kind == PatternNode::Kind::kAlternation && simplified.children.empty();
}

PatternNode simplify_pattern(const PatternNode& node) {
  using Kind = PatternNode::Kind;
  switch (node.kind) {
    case Kind::kStartAnchor:
    case Kind::kEndAnchor:             // only while parsing
      return PatternNode::concat({});  // anchors never outlive parse_pattern
    case Kind::kSet: {
      // Surrogates are not characters of valid text.
      CodePointSet set = node.set.minus(CodePointSet::range(0xD800, 0xDFFF));
      return set.empty() ? PatternNode::nothing() : PatternNode::of_set(std::move(set));
    }
    case Kind::kConcat: {
      std::vector<PatternNode> parts;
      for (const PatternNode& child : node.children) {
        PatternNode part = simplify_pattern(child);
        if (is_empty_language(part)) return PatternNode::nothing();
        if (is_empty_string(part)) continue;
        if (part.kind == Kind::kConcat) {
          for (PatternNode& inner : part.children) parts.push_back(std::move(inner));
        } else {
          parts.push_back(std::move(part));
        }
      }
      if (parts.size() == 1) return std::move(parts[0]);
      return PatternNode::concat(std::move(parts));
    }
    case Kind::kAlternation: {
      std::vector<PatternNode> options;
      for (const PatternNode& child : node.children) {
        PatternNode option = simplify_pattern(child);
        if (is_empty_language(option)) continue;
        if (option.kind == Kind::kAlternation) {
          for (PatternNode& inner : option.children) options.push_back(std::move(inner));
        } else {
          options.push_back(std::move(option));
        }
      }
      if (options.size() == 1) return std::move(options[0]);
      return PatternNode::alternation(std::move(options));
    }
    case Kind::kRepeat: {
      PatternNode child = simplify_pattern(node.children[0]);
      if (node.max == 0 || is_empty_string(child)) return PatternNode::concat({});
      if (is_empty_language(child)) {
        return node.min == 0 ? PatternNode::concat({}) : PatternNode::nothing();
      }
      if (node.min == 1 && node.max == 1) return child;
      return PatternNode::repeat(std::move(child), node.min, node.max);
    }
  }
  return PatternNode::nothing();
}

bool is_universal_language(const PatternNode& node) {
  using Kind = PatternNode::Kind;
  switch (node.kind) {
    case Kind::kStartAnchor:
    case Kind::kEndAnchor:  // only while parsing
      return false;
    case Kind::kSet:
      return false;
    case Kind::kRepeat:
      return node.min == 0 && node.max == kUnbounded && node.children[0].kind == Kind::kSet &&
             node.children[0].set == CodePointSet::all().minus(CodePointSet::range(0xD800, 0xDFFF));
    case Kind::kConcat: {
      // One part holds every string and every other part may be empty.
      bool universal_part = false;
      for (const PatternNode& child : node.children) {
        if (!universal_part && is_universal_language(child)) {
          universal_part = true;
        } else if (pattern_length(child).min != 0) {
          return false;
        }
      }
      return universal_part;
    }
    case Kind::kAlternation:
      return std::any_of(node.children.begin(), node.children.end(), is_universal_language);
  }
  return false;
}

LengthRange pattern_length(const PatternNode& node) {
  using Kind = PatternNode::Kind;
  switch (node.kind) {
    case Kind::kStartAnchor:
    case Kind::kEndAnchor:  // only while parsing
      return {0, 0};
    case Kind::kSet:
      return {1, 1};
    case Kind::kConcat: {
      LengthRange total{0, 0};
      for (const PatternNode& child : node.children) {
        const LengthRange part = pattern_length(child);
        total.min += part.min;
        total.max =
            (total.max == kUnbounded || part.max == kUnbounded) ? kUnbounded : total.max + part.max;
      }
      return total;
    }
    case Kind::kAlternation: {
      if (node.children.empty()) return {0, 0};
      LengthRange total = pattern_length(node.children[0]);
      for (size_t i = 1; i < node.children.size(); ++i) {
        const LengthRange part = pattern_length(node.children[i]);
        total.min = std::min(total.min, part.min);
        total.max = (total.max == kUnbounded || part.max == kUnbounded)
                        ? kUnbounded
                        : std::max(total.max, part.max);
      }
      return total;
    }
    case Kind::kRepeat: {
      const LengthRange part = pattern_length(node.children[0]);
      LengthRange total;
      total.min = part.min * node.min;
      if (node.max == kUnbounded) {
        total.max = part.max == 0 ? 0 : kUnbounded;
      } else {
        total.max = part.max == kUnbounded ? kUnbounded : part.max * node.max;
      }
      return total;
    }
  }
  return {0, 0};
}

namespace {

bool within(const LengthRange& length, int64_t lo, int64_t hi) {
  return length.min >= lo && (hi == kUnbounded || (length.max != kUnbounded && length.max <= hi));
}

bool disjoint(const LengthRange& length, int64_t lo, int64_t hi) {
  return (length.max != kUnbounded && length.max < lo) || (hi != kUnbounded && length.min > hi);
}

int64_t sub_floor(int64_t value, int64_t amount) { return std::max<int64_t>(0, value - amount); }

std::optional<PatternNode> constrain(const PatternNode& node, int64_t lo, int64_t hi,
                                     CompileBudget& budget) {
  using Kind = PatternNode::Kind;
  budget.charge(1, "pattern length rewrites");
  const LengthRange length = pattern_length(node);
  if (within(length, lo, hi)) return node;
  if (disjoint(length, lo, hi)) return PatternNode::nothing();
  switch (node.kind) {
    case Kind::kStartAnchor:
    case Kind::kEndAnchor:  // only while parsing
      return node;
    case Kind::kSet:
      return node;  // unreachable: length 1 is within or disjoint
    case Kind::kRepeat: {
      const LengthRange part = pattern_length(node.children[0]);
      if (part.min != part.max || part.min == 0) return std::nullopt;
      const int64_t width = part.min;
      int64_t new_min = std::max(node.min, (lo + width - 1) / width);
      int64_t new_max = hi == kUnbounded ? node.max : hi / width;
      if (node.max != kUnbounded && new_max != kUnbounded) new_max = std::min(new_max, node.max);
      if (new_max != kUnbounded && new_max > kMaxPatternRepeat) return std::nullopt;
      if (new_min > kMaxPatternRepeat) return std::nullopt;
      if (new_max != kUnbounded && new_min > new_max) return PatternNode::nothing();
      return PatternNode::repeat(node.children[0], new_min, new_max);
    }
    case Kind::kConcat: {
      // Only one part of variable length: the bounds pass to it.
      int64_t fixed = 0;
      size_t variable = node.children.size();
      for (size_t i = 0; i < node.children.size(); ++i) {
        const LengthRange part = pattern_length(node.children[i]);
        if (part.min == part.max) {
          fixed += part.min;
        } else if (variable != node.children.size()) {
          return std::nullopt;
        } else {
          variable = i;
        }
      }
      if (variable == node.children.size()) return std::nullopt;
      auto inner = constrain(node.children[variable], sub_floor(lo, fixed),
                             hi == kUnbounded ? kUnbounded : hi - fixed, budget);
      if (!inner) return std::nullopt;
      if (is_empty_language(*inner)) return PatternNode::nothing();
      PatternNode out = node;
      out.children[variable] = std::move(*inner);
      return out;
    }
    case Kind::kAlternation: {
      std::vector<PatternNode> options;
      for (const PatternNode& child : node.children) {
        auto option = constrain(child, lo, hi, budget);
        if (!option) return std::nullopt;
        if (!is_empty_language(*option)) options.push_back(std::move(*option));
      }
      if (options.size() == 1) return std::move(options[0]);
      return PatternNode::alternation(std::move(options));
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<PatternNode> constrain_pattern_length(const PatternNode& simplified,
                                                    int64_t min_length, int64_t max_length,
                                                    CompileBudget& budget) {
  if (max_length != kUnbounded && max_length < min_length) return PatternNode::nothing();
  auto out = constrain(simplified, min_length, max_length, budget);
  if (!out) return std::nullopt;
  return simplify_pattern(*out);
}

namespace {

// Appends the regex of `node`; `atomic` asks for a form a quantifier can follow.
void write_regex(const PatternNode& node, StringSpelling spelling, bool atomic,
                 CompileBudget& budget, std::string& out) {
  using Kind = PatternNode::Kind;
  budget.charge(1, "pattern regex nodes");
  switch (node.kind) {
    case Kind::kStartAnchor:
    case Kind::kEndAnchor:  // only while parsing
      return;
    case Kind::kSet: {
      out += json_char_regex(node.set, spelling);  // a class or a (?:...) group: atomic
      return;
    }
    case Kind::kConcat: {
      if (atomic && node.children.size() != 1) out += "(?:";
      for (const PatternNode& child : node.children) {
        write_regex(child, spelling, child.kind == Kind::kAlternation, budget, out);
      }
      if (atomic && node.children.size() != 1) out += ")";
      return;
    }
    case Kind::kAlternation: {
      // An empty alternative becomes `?` on the group, the surest syntax for engines.
      bool has_empty = false;
      std::vector<const PatternNode*> options;
      for (const PatternNode& child : node.children) {
        if (is_empty_string(child)) {
          has_empty = true;
        } else {
          options.push_back(&child);
        }
      }
      const bool wrap = has_empty && atomic;  // `(?:a|b)?` cannot take another quantifier
      if (wrap) out += "(?:";
      out += "(?:";
      for (size_t i = 0; i < options.size(); ++i) {
        if (i) out.push_back('|');
        write_regex(*options[i], spelling, false, budget, out);
      }
      out += ")";
      if (has_empty) out += "?";
      if (wrap) out += ")";
      return;
    }
    case Kind::kRepeat: {
      if (atomic) out += "(?:";
      write_regex(node.children[0], spelling, true, budget, out);
      if (node.min == 0 && node.max == kUnbounded) {
        out += "*";
      } else if (node.min == 1 && node.max == kUnbounded) {
        out += "+";
      } else if (node.min == 0 && node.max == 1) {
        out += "?";
      } else if (node.max == kUnbounded) {
        out += "{" + std::to_string(node.min) + ",}";
      } else if (node.min == node.max) {
        out += "{" + std::to_string(node.min) + "}";
      } else {
        out += "{" + std::to_string(node.min) + "," + std::to_string(node.max) + "}";
      }
      if (atomic) out += ")";
      return;
    }
  }
}

}  // namespace

std::string pattern_to_json_regex(const PatternNode& simplified, StringSpelling spelling,
                                  CompileBudget& budget) {
  std::string out;
  write_regex(simplified, spelling, false, budget, out);
  return out;
}

}  // namespace llms::structured::jsonschema
