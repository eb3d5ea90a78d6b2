// structured/json_schema_meet: the conjunction of two Shapes (allOf, $ref beside keywords, ...).
//
// Per type the constraints combine: type bits and enum values intersect, bounds tighten,
// patterns and formats accumulate, items and properties meet position by position and name by
// name. A property's effective schema on either side includes the patternProperties and
// additionalProperties that side applies to its name, so nothing one side says is lost.
#include <algorithm>
#include <unordered_set>

#include "json_schema_compiler.h"

namespace llms::structured::jsonschema {

namespace {

void tighten(std::optional<NumberBound>& bound, const std::optional<NumberBound>& other,
             int better) {
  if (!other) return;
  if (!bound) {
    bound = other;
    return;
  }
  const int order = compare(other->value, bound->value);
  if (order == better || (order == 0 && other->exclusive)) bound = other;
}

int64_t min_bound(int64_t a, int64_t b) {
  if (a == kUnbounded) return b;
  if (b == kUnbounded) return a;
  return std::min(a, b);
}

void add_unique(std::vector<Sourced>& out, const std::vector<Sourced>& more) {
  for (const Sourced& s : more) {
    if (std::none_of(out.begin(), out.end(), [&](const Sourced& o) { return o.text == s.text; })) {
      out.push_back(s);
    }
  }
}

}  // namespace

SchemaSet SchemaCompiler::property_schema(const ObjectShape& object, const std::string& name) {
  // A scan per name: charged, so that objects with thousands of names meet the budget.
  budget_.charge(static_cast<int64_t>(object.properties.size() / 64) + 1, "property lookups");
  SchemaSet schema;
  bool declared = false, matched = false;
  for (const auto& property : object.properties) {
    if (property.name == name) schema = schema.meet(property.schema), declared = true;
  }
  for (const auto& pattern_property : object.pattern_properties) {
    if (pattern_matches(pattern(pattern_property.pattern), name, budget_)) {
      schema = schema.meet(pattern_property.schema);
      matched = true;
    }
  }
  if (!declared && !matched) schema = schema.meet(object.additional);
  return schema;
}

std::optional<Shape> SchemaCompiler::meet(const Shape& a, const Shape& b) {
  budget_.charge(1, "JSON Schema shape meets");
  Shape out;
  out.types = a.types & b.types;
  if (out.types == 0) return std::nullopt;

  if (a.values && b.values) {
    budget_.charge(static_cast<int64_t>(a.values->size() * b.values->size()),
                   "enum value comparisons");
    std::vector<Json> kept;
    for (const Json& v : *a.values) {
      for (const Json& w : *b.values) {
        if (json_equal(v, w)) {
          kept.push_back(v);
          break;
        }
      }
    }
    if (kept.empty()) return std::nullopt;
    out.values = std::move(kept);
  } else {
    out.values = a.values ? a.values : b.values;
  }

  out.number = a.number;
  tighten(out.number.lower, b.number.lower, 1);
  tighten(out.number.upper, b.number.upper, -1);

  out.string = a.string;
  out.string.min_length = std::max(a.string.min_length, b.string.min_length);
  out.string.max_length = min_bound(a.string.max_length, b.string.max_length);
  add_unique(out.string.patterns, b.string.patterns);
  add_unique(out.string.formats, b.string.formats);
  out.string.excluded.insert(out.string.excluded.end(), b.string.excluded.begin(),
                             b.string.excluded.end());

  // Arrays: item i meets item i; past both prefixes the rests meet.
  const size_t prefix = std::max(a.array.prefix.size(), b.array.prefix.size());
  for (size_t i = 0; i < prefix; ++i) {
    const SchemaSet& x = i < a.array.prefix.size() ? a.array.prefix[i] : a.array.rest;
    const SchemaSet& y = i < b.array.prefix.size() ? b.array.prefix[i] : b.array.rest;
    out.array.prefix.push_back(x.meet(y));
  }
  out.array.rest = a.array.rest.meet(b.array.rest);
  out.array.min_items = std::max(a.array.min_items, b.array.min_items);
  out.array.max_items = min_bound(a.array.max_items, b.array.max_items);
  out.array.unique_items = a.array.unique_items ? a.array.unique_items : b.array.unique_items;
  out.array.contains = a.array.contains;
  out.array.contains.insert(out.array.contains.end(), b.array.contains.begin(),
                            b.array.contains.end());
  out.array.contains_at = a.array.contains_at ? a.array.contains_at : b.array.contains_at;

  // Objects.
  const ObjectShape& p = a.object;
  const ObjectShape& q = b.object;
  const bool p_closed = p.additional.never && p.pattern_properties.empty();
  const bool q_closed = q.additional.never && q.pattern_properties.empty();
  if (!p_closed && !q_closed &&
      ((!p.pattern_properties.empty() && !q.additional.is_any()) ||
       (!q.pattern_properties.empty() && !p.additional.is_any()))) {
    const Sourced& where = !p.pattern_properties.empty() ? p.pattern_properties[0].pattern
                                                         : q.pattern_properties[0].pattern;
    refuse_keyword("patternProperties", where.pointer,
                   "combining it (through allOf or $ref) with another schema's "
                   "additionalProperties is not supported");
  }
  const bool both_plain = p.pattern_properties.empty() && q.pattern_properties.empty() &&
                          p.additional.is_any() && q.additional.is_any();
  std::vector<std::string> names;
  std::unordered_set<std::string> seen;
  for (const auto& property : p.properties) {
    if (seen.insert(property.name).second) names.push_back(property.name);
  }
  for (const auto& property : q.properties) {
    if (seen.insert(property.name).second) names.push_back(property.name);
  }
  budget_.charge(
      static_cast<int64_t>(names.size() * (p.properties.size() + q.properties.size()) / 64),
      "property lookups");
  for (const std::string& name : names) {
    SchemaSet schema;
    if (both_plain) {
      // Fast path: no patterns and no additionalProperties on either side.
      for (const auto& property : p.properties) {
        if (property.name == name) schema = schema.meet(property.schema);
      }
      for (const auto& property : q.properties) {
        if (property.name == name) schema = schema.meet(property.schema);
      }
    } else {
      schema = property_schema(p, name).meet(property_schema(q, name));
    }
    out.object.properties.push_back({name, std::move(schema)});
  }
  if (p_closed || q_closed) {
    out.object.additional = SchemaSet::none();  // patterns already folded into the names
  } else {
    out.object.pattern_properties = p.pattern_properties;
    out.object.pattern_properties.insert(out.object.pattern_properties.end(),
                                         q.pattern_properties.begin(), q.pattern_properties.end());
    out.object.additional = p.additional.meet(q.additional);
  }
  out.object.required = p.required;
  for (const std::string& name : q.required) {
    if (std::find(out.object.required.begin(), out.object.required.end(), name) ==
        out.object.required.end()) {
      out.object.required.push_back(name);
    }
  }
  out.object.property_names = p.property_names;
  out.object.property_names.insert(out.object.property_names.end(), q.property_names.begin(),
                                   q.property_names.end());
  out.object.some_name_outside = p.some_name_outside;
  out.object.some_name_outside.insert(out.object.some_name_outside.end(),
                                      q.some_name_outside.begin(), q.some_name_outside.end());
  out.object.some_name_outside_at =
      p.some_name_outside_at.empty() ? q.some_name_outside_at : p.some_name_outside_at;
  out.object.min_properties = std::max(p.min_properties, q.min_properties);
  out.object.max_properties = min_bound(p.max_properties, q.max_properties);

  out.unsupported = a.unsupported;
  out.unsupported.insert(out.unsupported.end(), b.unsupported.begin(), b.unsupported.end());

  // Enum values the other side's scalar rules already reject go now, so that contradictory
  // alternatives (const "a" and not const "a") vanish before they multiply.
  if (out.values) {
    std::erase_if(*out.values, [&](const Json& v) { return !admits_scalar(out, v); });
    if (out.values->empty()) return std::nullopt;
  }
  return out;
}

bool SchemaCompiler::admits_scalar(const Shape& shape, const Json& value) {
  const uint8_t type = json_type_of(value);
  if (!(shape.types & type)) return false;
  if (type == kIntegerType || type == kFractionType) {
    auto decimal = decimal_of(value);
    if (!decimal) return false;
    if (shape.number.lower) {
      const int order = compare(*decimal, shape.number.lower->value);
      if (order < 0 || (order == 0 && shape.number.lower->exclusive)) return false;
    }
    if (shape.number.upper) {
      const int order = compare(*decimal, shape.number.upper->value);
      if (order > 0 || (order == 0 && shape.number.upper->exclusive)) return false;
    }
  }
  if (type == kStringType) {
    const std::string& text = value.get_ref<const std::string&>();
    const auto& excluded = shape.string.excluded;
    if (std::find(excluded.begin(), excluded.end(), text) != excluded.end()) return false;
  }
  return true;
}

bool SchemaCompiler::has_impossible_requirement(const Shape& shape) {
  if (!(shape.types & kObjectType) || shape.object.required.empty()) return false;
  ++analysis_depth_;
  bool impossible = false;
  try {
    for (const std::string& name : shape.object.required) {
      const SchemaSet schema = property_schema(shape.object, name);
      if (schema.never || shapes_of(schema).empty()) {
        impossible = true;
        break;
      }
    }
  } catch (const NormalizationCycle&) {
    impossible = false;  // still being normalized: cannot tell yet
  } catch (...) {
    --analysis_depth_;
    throw;
  }
  --analysis_depth_;
  return impossible;
}

std::vector<Shape> SchemaCompiler::meet(const std::vector<Shape>& a, const std::vector<Shape>& b) {
  budget_.charge(static_cast<int64_t>(a.size() * b.size()), "JSON Schema alternatives");
  std::vector<Shape> out;
  for (const Shape& x : a) {
    for (const Shape& y : b) {
      auto shape = meet(x, y);
      if (!shape) continue;
      // An object whose required property can have no value is no alternative at all.
      if (shape->types == kObjectType && has_impossible_requirement(*shape)) continue;
      out.push_back(std::move(*shape));
    }
  }
  return out;
}

}  // namespace llms::structured::jsonschema
