// structured/json_schema_plan: which SchemaSets the grammar needs, what each Shape writes, and
// which sets have an instance. See json_schema_grammar.h.
#include <algorithm>

#include "json_schema_grammar.h"

namespace llms::structured::jsonschema {

namespace {

constexpr const char* kFractionOnlyRegex = "-?(?:0|[1-9][0-9]*)\\.[0-9]*[1-9][0-9]*";

bool is_trivial_string(const Shape& shape) {
  return !shape.values && (shape.types & kStringType) && shape.string.min_length == 0 &&
         shape.string.max_length == kUnbounded && shape.string.patterns.empty() &&
         shape.string.formats.empty() && shape.string.excluded.empty();
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

std::vector<Shape> GrammarBuilder::expand_name_requirements(const Shape& shape) {
  const ObjectShape& object = shape.object;
  if (object.some_name_outside.empty() || !(shape.types & kObjectType)) return {shape};
  // Non-objects are untouched; objects need, per list, one of their declared names outside it.
  // That is only writable when the object has no other names: then the candidates are its
  // declared names outside the list, taken in order (the i-th present, the earlier ones absent).
  std::vector<Shape> out;
  if (shape.types != kObjectType) {
    Shape others = shape;
    others.types &= static_cast<uint8_t>(~kObjectType);
    out.push_back(std::move(others));
  }
  if (!object.additional.never || !object.pattern_properties.empty()) {
    SchemaCompiler::refuse_keyword("additionalProperties", object.some_name_outside_at,
                                   "its complement (some other name is present) is supported "
                                   "only where the object has no other names");
  }
  Shape objects = shape;
  objects.types = kObjectType;
  objects.object.some_name_outside.clear();
  std::vector<Shape> variants{objects};
  for (const auto& inside : object.some_name_outside) {
    std::vector<std::string> candidates;
    for (const auto& property : object.properties) {
      if (!property.schema.never &&
          std::find(inside.begin(), inside.end(), property.name) == inside.end()) {
        candidates.push_back(property.name);
      }
    }
    std::vector<Shape> next;
    for (const Shape& variant : variants) {
      for (size_t i = 0; i < candidates.size(); ++i) {
        compiler_.budget().charge(1, "JSON Schema alternatives");
        Shape chosen = variant;
        chosen.object.required.push_back(candidates[i]);
        for (size_t j = 0; j < i; ++j) {
          chosen.object.properties.push_back({candidates[j], SchemaSet::none()});
        }
        next.push_back(std::move(chosen));
      }
    }
    variants = std::move(next);
  }
  out.insert(out.end(), variants.begin(), variants.end());
  return out;
}

void GrammarBuilder::discover(const SchemaSet& root) {
  sets_.emplace(root, SetPlan{});
  order_.push_back(root);
  auto visit = [&](const SchemaSet& set) {
    if (sets_.emplace(set, SetPlan{}).second) order_.push_back(set);
  };
  for (size_t i = 0; i < order_.size(); ++i) {
    const SchemaSet set = order_[i];  // a copy: order_ grows below
    compiler_.budget().charge(1, "JSON Schema grammar rules");
    std::vector<ShapePlan> plans;
    for (const Shape& shape : compiler_.shapes_of(set)) {
      for (const Shape& variant : expand_name_requirements(shape)) {
        plans.push_back(plan_shape(variant));
      }
    }
    for (const ShapePlan& plan : plans) {
      if (plan.values) continue;
      if (plan.types & kArrayType) {
        for (const SchemaSet& item : plan.prefix_items) visit(item);
        if (plan.max_items == kUnbounded ||
            plan.max_items > static_cast<int64_t>(plan.prefix_items.size())) {
          visit(plan.rest_items);
        }
        if (plan.witness_items) visit(*plan.witness_items);
      }
      if (plan.types & kObjectType) {
        for (const auto& property : plan.object.properties) visit(property.schema);
        for (const auto& extra : plan.object.extras) visit(extra.value);
      }
    }
    sets_[set].shapes = std::move(plans);
  }
}

ShapePlan GrammarBuilder::plan_shape(const Shape& shape) {
  ShapePlan plan;
  if (shape.values) {
    // Each value against the rest of the Shape (checking membership too would be quadratic).
    Shape rest = shape;
    rest.values.reset();
    std::vector<Json> kept;
    for (const Json& value : *shape.values) {
      if (compiler_.admits(rest, value, 0)) kept.push_back(value);
    }
    plan.values = std::move(kept);
    return plan;
  }
  uint8_t types = shape.types;
  for (const auto& [bits, unsupported] : shape.unsupported) {
    if (types & bits) SchemaCompiler::refuse_keyword(unsupported.keyword, unsupported.pointer);
  }
  const NumberShape& number = shape.number;
  const bool bounded = number.lower || number.upper;
  if ((types & kIntegerType) && (types & kFractionType)) {
    if (!bounded) {
      plan.number_regex = kAnyNumberRegex;
    } else if (auto regex = number_range_regex(number.lower, number.upper, compiler_.budget())) {
      plan.number_regex = *regex;
    } else {
      types &= static_cast<uint8_t>(~(kIntegerType | kFractionType));
    }
  } else if (types & kIntegerType) {
    if (auto regex = integer_range_regex(number.lower, number.upper, compiler_.budget())) {
      plan.number_regex = *regex;
    } else {
      types &= static_cast<uint8_t>(~kIntegerType);
    }
  } else if (types & kFractionType) {
    // Only non-integral numbers (from `not: {type: integer}`).
    if (bounded) {
      SchemaCompiler::refuse_keyword(
          "not", "", "bounds on numbers that must not be integers are not supported");
    }
    plan.number_regex = kFractionOnlyRegex;
  }
  if (types & kStringType) {
    const StringSpelling spelling = compiler_.options().any_string_escape
                                        ? StringSpelling::kAnyEscape
                                        : StringSpelling::kCanonical;
    if (auto regex = compiler_.string_regex(shape.string, spelling)) {
      plan.string_regex = *regex;
    } else {
      types &= static_cast<uint8_t>(~kStringType);
    }
  }
  if (types & kArrayType) {
    const ArrayShape& array = shape.array;
    int64_t max_items = array.max_items;
    if (array.rest.never) {
      const auto tuple = static_cast<int64_t>(array.prefix.size());
      max_items = max_items == kUnbounded ? tuple : std::min(max_items, tuple);
    }
    if (array.min_items > kMaxRepeat) {
      SchemaCompiler::refuse("JSON Schema: minItems " + std::to_string(array.min_items) +
                             " is above the supported maximum of " + std::to_string(kMaxRepeat));
    }
    if (max_items != kUnbounded && max_items > kMaxRepeat) max_items = kMaxRepeat;  // sound
    if (max_items != kUnbounded && array.min_items > max_items) {
      types &= static_cast<uint8_t>(~kArrayType);
    } else {
      if (array.unique_items && (max_items == kUnbounded || max_items > 1)) {
        SchemaCompiler::refuse_keyword("uniqueItems", *array.unique_items,
                                       "the grammar cannot compare items with each other");
      }
      plan.prefix_items = array.prefix;
      if (max_items != kUnbounded && static_cast<int64_t>(plan.prefix_items.size()) > max_items) {
        plan.prefix_items.resize(static_cast<size_t>(max_items));
      }
      plan.rest_items = array.rest;
      plan.min_items = array.min_items;
      plan.max_items = max_items;
      if (!array.contains.empty()) {
        const std::string& at = *array.contains_at;
        if (array.contains.size() > 1) {
          SchemaCompiler::refuse_keyword("contains", at, "two contains on one array");
        }
        if (!array.prefix.empty()) {
          SchemaCompiler::refuse_keyword("contains", at, "contains with prefixItems");
        }
        if (array.min_items > kMaxContainsBound ||
            (max_items != kUnbounded && max_items > kMaxContainsBound)) {
          SchemaCompiler::refuse_keyword("contains", at,
                                         "contains with minItems/maxItems above 64");
        }
        plan.witness_items = array.rest.meet(array.contains[0]);
      }
    }
  }
  if ((types & kObjectType) && !plan_object(shape.object, plan.object)) {
    types &= static_cast<uint8_t>(~kObjectType);
  }
  plan.types = types;
  return plan;
}

bool GrammarBuilder::plan_object(const ObjectShape& object, ObjectPlan& plan) {
  SchemaCompiler& c = compiler_;
  std::vector<std::string> names;
  for (const auto& property : object.properties) {
    if (!contains(names, property.name)) names.push_back(property.name);
  }
  for (const std::string& name : object.required) {
    if (!contains(names, name)) names.push_back(name);
  }

  // propertyNames: each one is a no-op, a finite list of names, or one string language.
  std::optional<std::vector<std::string>> finite_names;
  const Shape* name_language = nullptr;
  std::string names_pointer;
  for (const SchemaSet& rule : object.property_names) {
    const std::vector<Shape>& shapes = c.shapes_of(rule);
    if (rule.never || shapes.empty()) {
      finite_names = std::vector<std::string>{};
      continue;
    }
    if (std::any_of(shapes.begin(), shapes.end(), is_trivial_string)) continue;
    names_pointer = rule.nodes.empty() ? "" : rule.nodes[0]->pointer;
    if (std::all_of(shapes.begin(), shapes.end(),
                    [](const Shape& s) { return s.values.has_value(); })) {
      std::vector<std::string> listed;
      for (const Shape& shape : shapes) {
        for (const Json& value : *shape.values) {
          if (value.is_string() && c.admits(shape, value, 0))
            listed.push_back(value.get<std::string>());
        }
      }
      if (finite_names) {
        std::erase_if(listed, [&](const std::string& n) { return !contains(*finite_names, n); });
      }
      finite_names = std::move(listed);
      continue;
    }
    if (std::none_of(shapes.begin(), shapes.end(),
                     [](const Shape& s) { return (s.types & kStringType) != 0; })) {
      finite_names = std::vector<std::string>{};
      continue;
    }
    if (shapes.size() != 1 || name_language != nullptr) {
      SchemaCompiler::refuse_keyword("propertyNames", names_pointer,
                                     "only a pattern, a length, a format or an enum of names is "
                                     "supported");
    }
    name_language = &shapes[0];
  }
  auto name_allowed = [&](const std::string& name) {
    if (finite_names && !contains(*finite_names, name)) return false;
    for (const SchemaSet& rule : object.property_names) {
      if (!c.admits(rule, Json(name), 0)) return false;
    }
    return true;
  };

  int64_t n_required = 0;
  for (const std::string& name : names) {
    SchemaSet schema = c.property_schema(object, name);
    const bool required = contains(object.required, name);
    if (!name_allowed(name)) schema = SchemaSet::none();
    plan.declared_names.push_back(name);
    if (schema.never) {
      if (required) return false;
      continue;  // forbidden: left out, and excluded from the other names
    }
    plan.properties.push_back({name, std::move(schema), required});
    n_required += required;
  }
  plan.min_properties = object.min_properties;
  plan.max_properties = object.max_properties;
  if (plan.max_properties != kUnbounded && n_required > plan.max_properties) return false;

  if (finite_names) {
    // The other names are listed: each becomes an optional property.
    for (const std::string& name : *finite_names) {
      if (contains(names, name) || !name_allowed(name)) continue;
      SchemaSet schema = c.property_schema(object, name);
      plan.declared_names.push_back(name);
      if (!schema.never) plan.properties.push_back({name, std::move(schema), false});
    }
    return true;
  }
  // A pattern whose schema is additionalProperties' changes nothing for undeclared names (its
  // schema already joined the declared names it matches); one that matches every name leaves
  // additionalProperties nothing and makes "any other name" the language of the others.
  std::vector<ObjectShape::PatternProperty> patterns;
  bool universal = false;
  for (const auto& pattern_property : object.pattern_properties) {
    if (pattern_property.schema == object.additional) continue;
    patterns.push_back(pattern_property);
    universal = universal || is_universal_language(c.pattern(pattern_property.pattern));
  }
  if (!patterns.empty() && name_language != nullptr) {
    SchemaCompiler::refuse_keyword("propertyNames", names_pointer,
                                   "propertyNames together with patternProperties is not "
                                   "supported");
  }
  // Names other than the declared ones, with the language of their names (minus the declared
  // names) and the schema of their values.
  auto add_extras = [&](const PatternNode& language, const SchemaSet& value) {
    if (value.never) return;
    const PatternNode others = pattern_minus_strings(language, plan.declared_names, c.budget());
    if (is_empty_language(others)) return;
    plan.extras.push_back(
        {"\"" + pattern_to_json_regex(others, StringSpelling::kName, c.budget()) + "\"", value});
  };
  auto any_other_name = [&] {
    return "\"" + c.strings_except(plan.declared_names, StringSpelling::kName) + "\"";
  };
  if (universal) {
    for (const auto& pattern_property : patterns) {
      if (!(pattern_property.schema == patterns[0].schema)) {
        SchemaCompiler::refuse_keyword(
            "patternProperties", pattern_property.pattern.pointer,
            "patterns with different schemas, one matching every name, are not supported");
      }
    }
    if (!patterns[0].schema.never) plan.extras.push_back({any_other_name(), patterns[0].schema});
    return true;
  }
  if (!patterns.empty()) {
    // Other names: those the patterns match, with their patterns' schema; patterns of different
    // schemas must be provably disjoint (a name matching two would need both). Names matching
    // no pattern are not written even where additionalProperties would allow them (a documented
    // restriction: "matches no pattern" has no regex).
    std::vector<std::pair<SchemaSet, std::vector<PatternNode>>> groups;
    for (const auto& pattern_property : patterns) {
      auto group = std::find_if(groups.begin(), groups.end(),
                                [&](const auto& g) { return g.first == pattern_property.schema; });
      if (group == groups.end()) {
        groups.push_back({pattern_property.schema, {}});
        group = groups.end() - 1;
      }
      group->second.push_back(c.pattern(pattern_property.pattern));
    }
    std::vector<PatternNode> languages;
    for (auto& group : groups) {
      languages.push_back(simplify_pattern(PatternNode::alternation(std::move(group.second))));
    }
    for (size_t i = 0; i < languages.size(); ++i) {
      for (size_t j = i + 1; j < languages.size(); ++j) {
        if (!languages_disjoint(languages[i], languages[j], c.budget())) {
          SchemaCompiler::refuse_keyword("patternProperties", patterns[0].pattern.pointer,
                                         "patterns with different schemas may match one name");
        }
      }
    }
    for (size_t i = 0; i < languages.size(); ++i) add_extras(languages[i], groups[i].first);
    return true;
  }
  if (object.additional.never) return true;
  if (name_language == nullptr) {
    plan.extras.push_back({any_other_name(), object.additional});
    return true;
  }
  // propertyNames: its language of names (one pattern or format, lengths) minus the declared ones.
  const StringShape& names_shape = name_language->string;
  if (names_shape.patterns.size() + names_shape.formats.size() > 1 ||
      !names_shape.excluded.empty()) {
    SchemaCompiler::refuse_keyword("propertyNames", names_pointer,
                                   "only one pattern or format with lengths is supported");
  }
  PatternNode language =
      PatternNode::repeat(PatternNode::of_set(CodePointSet::all()), 0, kUnbounded);
  const Sourced* source = nullptr;
  if (!names_shape.patterns.empty()) source = &names_shape.patterns[0];
  if (!names_shape.formats.empty()) source = &names_shape.formats[0];
  if (source != nullptr) {
    const PatternNode* known =
        source->keyword == "format" ? c.format_pattern(*source) : &c.pattern(*source);
    if (known != nullptr) language = *known;
  }
  auto bounded = constrain_pattern_length(simplify_pattern(language), names_shape.min_length,
                                          names_shape.max_length, c.budget());
  if (!bounded) {
    SchemaCompiler::refuse_keyword("propertyNames", names_pointer,
                                   "its pattern and lengths cannot be combined");
  }
  add_extras(*bounded, object.additional);
  return true;
}

bool GrammarBuilder::satisfiable(const SchemaSet& set) const {
  auto it = sets_.find(set);
  return it != sets_.end() && it->second.satisfiable;
}

int64_t GrammarBuilder::writable_items(const ShapePlan& plan) const {
  const auto prefix = static_cast<int64_t>(plan.prefix_items.size());
  for (int64_t i = 0; i < prefix; ++i) {
    if (plan.max_items != kUnbounded && i >= plan.max_items) return plan.max_items;
    if (!satisfiable(plan.prefix_items[static_cast<size_t>(i)])) return i;
  }
  if (plan.max_items != kUnbounded && prefix >= plan.max_items) return plan.max_items;
  return satisfiable(plan.rest_items) ? plan.max_items : prefix;
}

bool GrammarBuilder::array_satisfiable(const ShapePlan& plan) const {
  if (plan.witness_items) {
    // The witness, and as many other items as the bounds need.
    const int64_t lo = std::max<int64_t>(plan.min_items, 1);
    return satisfiable(*plan.witness_items) &&
           (plan.max_items == kUnbounded || plan.max_items >= lo) &&
           (lo <= 1 || satisfiable(plan.rest_items));
  }
  const int64_t writable = writable_items(plan);
  return writable == kUnbounded || writable >= plan.min_items;
}

bool GrammarBuilder::shape_satisfiable(const ShapePlan& plan) const {
  if (plan.values) return !plan.values->empty();
  if (plan.types & (kNullType | kBooleanType | kIntegerType | kFractionType | kStringType)) {
    return true;
  }
  if ((plan.types & kArrayType) && array_satisfiable(plan)) return true;
  if (plan.types & kObjectType) {
    const ObjectPlan& object = plan.object;
    bool ok = true;
    int64_t available = 0;
    for (const auto& property : object.properties) {
      const bool sat = satisfiable(property.schema);
      if (property.required && !sat) ok = false;
      available += sat;
    }
    const bool extras = std::any_of(object.extras.begin(), object.extras.end(),
                                    [&](const auto& extra) { return satisfiable(extra.value); });
    if (ok && (extras || available >= object.min_properties)) return true;
  }
  return false;
}

void GrammarBuilder::solve_satisfiability() {
  // Least fixed point: a set is satisfiable once one of its Shapes is, given what is known.
  bool changed = true;
  while (changed) {
    changed = false;
    for (const SchemaSet& set : order_) {
      SetPlan& plan = sets_[set];
      if (plan.satisfiable) continue;
      compiler_.budget().charge(static_cast<int64_t>(plan.shapes.size()) + 1,
                                "JSON Schema satisfiability checks");
      for (const ShapePlan& shape : plan.shapes) {
        if (shape_satisfiable(shape)) {
          plan.satisfiable = true;
          changed = true;
          break;
        }
      }
    }
  }
}

}  // namespace llms::structured::jsonschema
