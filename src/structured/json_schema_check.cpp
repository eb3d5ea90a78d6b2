// structured/json_schema_check: whether a Shape admits a value (to keep the enum values that
// the rest of a schema allows, and the property names of propertyNames), and whether two Shapes
// are provably disjoint (which makes oneOf an anyOf).
//
// Disjointness is sufficient, not complete: different types; values of one side rejected by the
// other; numeric ranges or length ranges that do not meet; a property both require (or an item
// both require) whose schemas are disjoint; a property one requires and the other forbids.
#include <algorithm>

#include "json_schema_compiler.h"
#include "util/error.h"
#include "util/utf8.h"

namespace llms::structured::jsonschema {

namespace {

constexpr int kMaxDisjointDepth = 8;
constexpr int kMaxValueDepth = 256;

bool above_lower(const Decimal& value, const std::optional<NumberBound>& lower) {
  if (!lower) return true;
  const int order = compare(value, lower->value);
  return order > 0 || (order == 0 && !lower->exclusive);
}

bool below_upper(const Decimal& value, const std::optional<NumberBound>& upper) {
  if (!upper) return true;
  const int order = compare(value, upper->value);
  return order < 0 || (order == 0 && !upper->exclusive);
}

// [lo, hi] of two ranges of counts, hi kUnbounded for none, do not meet.
bool counts_disjoint(int64_t lo_a, int64_t hi_a, int64_t lo_b, int64_t hi_b) {
  return (hi_a != kUnbounded && hi_a < lo_b) || (hi_b != kUnbounded && hi_b < lo_a);
}

// The numbers above `lower` and below `upper` of two shapes do not meet.
bool ranges_disjoint(const NumberShape& a, const NumberShape& b) {
  auto apart = [](const std::optional<NumberBound>& upper,
                  const std::optional<NumberBound>& lower) {
    if (!upper || !lower) return false;
    const int order = compare(upper->value, lower->value);
    return order < 0 || (order == 0 && (upper->exclusive || lower->exclusive));
  };
  return apart(a.upper, b.lower) || apart(b.upper, a.lower);
}

// Integer bounds [lo, hi] of a shape's integers.
void integer_bounds(const NumberShape& n, std::optional<Decimal>& lo, std::optional<Decimal>& hi) {
  if (n.lower)
    lo = n.lower->exclusive ? add_one(floor_decimal(n.lower->value)) : ceil_decimal(n.lower->value);
  if (n.upper) {
    hi = n.upper->exclusive ? subtract_one(ceil_decimal(n.upper->value))
                            : floor_decimal(n.upper->value);
  }
}

bool integers_disjoint(const NumberShape& a, const NumberShape& b) {
  std::optional<Decimal> a_lo, a_hi, b_lo, b_hi;
  integer_bounds(a, a_lo, a_hi);
  integer_bounds(b, b_lo, b_hi);
  if (a_lo && a_hi && compare(*a_lo, *a_hi) > 0) return true;
  if (b_lo && b_hi && compare(*b_lo, *b_hi) > 0) return true;
  return (a_hi && b_lo && compare(*a_hi, *b_lo) < 0) || (b_hi && a_lo && compare(*b_hi, *a_lo) < 0);
}

const SchemaSet& item_schema(const ArrayShape& array, size_t i) {
  return i < array.prefix.size() ? array.prefix[i] : array.rest;
}

}  // namespace

bool SchemaCompiler::admits(const SchemaSet& set, const Json& value, int depth) {
  if (set.never) return false;
  for (const Shape& shape : shapes_of(set)) {
    if (admits(shape, value, depth)) return true;
  }
  return false;
}

bool SchemaCompiler::admits(const Shape& shape, const Json& value, int depth) {
  if (depth > kMaxValueDepth) refuse("JSON Schema: a value nests too deeply to be checked");
  budget_.charge(1, "JSON Schema value checks");
  const uint8_t type = json_type_of(value);
  if (!(shape.types & type)) return false;
  if (shape.values && std::none_of(shape.values->begin(), shape.values->end(),
                                   [&](const Json& v) { return json_equal(v, value); })) {
    return false;
  }
  for (const auto& [types, unsupported] : shape.unsupported) {
    if (types & type) refuse_keyword(unsupported.keyword, unsupported.pointer);
  }
  switch (type) {
    case kIntegerType:
    case kFractionType: {
      auto decimal = decimal_of(value);
      return decimal && above_lower(*decimal, shape.number.lower) &&
             below_upper(*decimal, shape.number.upper);
    }
    case kStringType: {
      const std::string& text = value.get_ref<const std::string&>();
      if (!is_valid_utf8(text)) return false;
      const auto length = static_cast<int64_t>(utf8_length(text));
      if (length < shape.string.min_length) return false;
      if (shape.string.max_length != kUnbounded && length > shape.string.max_length) return false;
      for (const Sourced& p : shape.string.patterns) {
        if (!pattern_matches(pattern(p), text, budget_)) return false;
      }
      for (const Sourced& f : shape.string.formats) {
        const PatternNode* language = format_pattern(f);
        if (language && !pattern_matches(*language, text, budget_)) return false;
      }
      return std::find(shape.string.excluded.begin(), shape.string.excluded.end(), text) ==
             shape.string.excluded.end();
    }
    case kArrayType: {
      const ArrayShape& array = shape.array;
      const auto size = static_cast<int64_t>(value.size());
      if (size < array.min_items) return false;
      if (array.max_items != kUnbounded && size > array.max_items) return false;
      for (size_t i = 0; i < value.size(); ++i) {
        if (array.unique_items) {
          for (size_t j = 0; j < i; ++j) {
            if (json_equal(value[i], value[j])) return false;
          }
        }
        if (!admits(item_schema(array, i), value[i], depth + 1)) return false;
      }
      for (const SchemaSet& wanted : array.contains) {
        bool found = false;
        for (size_t i = 0; i < value.size() && !found; ++i)
          found = admits(wanted, value[i], depth + 1);
        if (!found) return false;
      }
      return true;
    }
    case kObjectType: {
      const ObjectShape& object = shape.object;
      const auto size = static_cast<int64_t>(value.size());
      if (size < object.min_properties) return false;
      if (object.max_properties != kUnbounded && size > object.max_properties) return false;
      for (const std::string& name : object.required) {
        if (!value.contains(name)) return false;
      }
      for (const auto& inside : object.some_name_outside) {
        bool found = false;
        for (auto it = value.begin(); it != value.end() && !found; ++it) {
          found = std::find(inside.begin(), inside.end(), it.key()) == inside.end();
        }
        if (!found) return false;
      }
      for (auto it = value.begin(); it != value.end(); ++it) {
        for (const SchemaSet& names : object.property_names) {
          if (!admits(names, Json(it.key()), depth + 1)) return false;
        }
        if (!admits(property_schema(object, it.key()), it.value(), depth + 1)) return false;
      }
      return true;
    }
    default:
      return true;  // null, boolean
  }
}

namespace {

// Restores the analysis counter however the analysis ends.
struct AnalysisScope {
  explicit AnalysisScope(int& depth) : depth_(depth) { ++depth_; }
  ~AnalysisScope() { --depth_; }
  int& depth_;
};

}  // namespace

bool SchemaCompiler::provably_disjoint(const Shape& a, const Shape& b, int depth) {
  if (depth > kMaxDisjointDepth) return false;
  AnalysisScope scope(analysis_depth_);
  try {
    const uint8_t common = a.types & b.types;
    if (common == 0) return true;
    // Every enum value of one side is rejected by the other (or by its own side's rules).
    auto values_excluded = [&](const Shape& with_values, const Shape& other) {
      if (!with_values.values) return false;
      Shape rest = with_values;  // the values' own membership needs no check
      rest.values.reset();
      for (const Json& v : *with_values.values) {
        if (admits(rest, v, 0) && admits(other, v, 0)) return false;
      }
      return true;
    };
    if (values_excluded(a, b) || values_excluded(b, a)) return true;
    auto sets_disjoint = [&](const SchemaSet& x, const SchemaSet& y) {
      if (x.never || y.never) return true;
      const std::vector<Shape>& xs = shapes_of(x);
      const std::vector<Shape>& ys = shapes_of(y);
      for (const Shape& s : xs) {
        for (const Shape& t : ys) {
          if (!provably_disjoint(s, t, depth + 1)) return false;
        }
      }
      return true;
    };
    for (uint8_t bit = 1; bit < 128; bit = static_cast<uint8_t>(bit << 1)) {
      if (!(common & bit)) continue;
      bool apart = false;
      switch (bit) {
        case kIntegerType:
          apart = integers_disjoint(a.number, b.number);
          break;
        case kFractionType:
          apart = ranges_disjoint(a.number, b.number);
          break;
        case kStringType: {
          apart = counts_disjoint(a.string.min_length, a.string.max_length, b.string.min_length,
                                  b.string.max_length);
          // One pattern or format on each side whose languages share no string.
          auto language = [&](const StringShape& s) -> const PatternNode* {
            if (s.patterns.size() + s.formats.size() != 1) return nullptr;
            return s.patterns.empty() ? format_pattern(s.formats[0]) : &pattern(s.patterns[0]);
          };
          const PatternNode* x = language(a.string);
          const PatternNode* y = language(b.string);
          apart = apart || (x && y && languages_disjoint(*x, *y, budget_));
          break;
        }
        case kArrayType: {
          apart = counts_disjoint(a.array.min_items, a.array.max_items, b.array.min_items,
                                  b.array.max_items);
          const int64_t both = std::min(a.array.min_items, b.array.min_items);
          for (int64_t i = 0; !apart && i < both && i < 64; ++i) {
            apart = sets_disjoint(item_schema(a.array, static_cast<size_t>(i)),
                                  item_schema(b.array, static_cast<size_t>(i)));
          }
          break;
        }
        case kObjectType: {
          apart = counts_disjoint(a.object.min_properties, a.object.max_properties,
                                  b.object.min_properties, b.object.max_properties);
          // A name one side requires whose schemas on the two sides are disjoint (the other
          // side forbidding it included).
          auto required_apart = [&](const Shape& x, const Shape& y) {
            for (const std::string& name : x.object.required) {
              const SchemaSet theirs = property_schema(y.object, name);
              // x requires `name`; if y's schema for it is disjoint from x's, no object
              // satisfies both, whether or not y requires it too.
              if (theirs.never || shapes_of(theirs).empty()) return true;
              if (sets_disjoint(property_schema(x.object, name), theirs)) return true;
            }
            return false;
          };
          apart = apart || required_apart(a, b) || required_apart(b, a);
          break;
        }
        default:
          break;  // null, boolean: only their values tell them apart
      }
      if (!apart) return false;
    }
    return true;
  } catch (const NormalizationCycle&) {
    return false;
  } catch (const Error&) {
    // Cannot decide (an unsupported keyword inside): not provably disjoint. A spent budget,
    // though, must still stop the compilation: charging nothing re-checks it.
    budget_.charge(0, "JSON Schema oneOf analysis");
    return false;
  }
}

}  // namespace llms::structured::jsonschema
