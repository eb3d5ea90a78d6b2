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
    for (const Shape& shape : compiler_.shapes_of(set)) plans.push_back(plan_shape(shape));
    for (const ShapePlan& plan : plans) {
      if (plan.values) continue;
      if (plan.types & kArrayType) {
        for (const SchemaSet& item : plan.prefix_items) visit(item);
        if (plan.max_items == kUnbounded ||
            plan.max_items > static_cast<int64_t>(plan.prefix_items.size())) {
          visit(plan.rest_items);
        }
      }
      if (plan.types & kObjectType) {
        for (const auto& property : plan.object.properties) visit(property.schema);
        if (plan.object.extras != ObjectPlan::Extras::kNone) visit(plan.object.extra_value);
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
  if (universal) {
    for (const auto& pattern_property : patterns) {
      if (!(pattern_property.schema == patterns[0].schema)) {
        SchemaCompiler::refuse_keyword(
            "patternProperties", pattern_property.pattern.pointer,
            "patterns with different schemas are not supported (a name may match several)");
      }
    }
    if (name_language != nullptr) {
      SchemaCompiler::refuse_keyword("propertyNames", names_pointer,
                                     "propertyNames together with patternProperties is not "
                                     "supported");
    }
    if (!patterns[0].schema.never) {
      plan.extras = ObjectPlan::Extras::kAnyOtherName;
      plan.extra_value = patterns[0].schema;
    }
    return true;
  }
  if (!patterns.empty()) {
    // Other names: those the patterns match, with the patterns' schema. Names that match no
    // pattern are not written even where additionalProperties would allow them (a documented
    // restriction: "matches no pattern" has no regex).
    const auto& first = patterns[0];
    std::vector<PatternNode> languages;
    for (const auto& pattern_property : patterns) {
      if (!(pattern_property.schema == first.schema)) {
        SchemaCompiler::refuse_keyword(
            "patternProperties", pattern_property.pattern.pointer,
            "patterns with different schemas are not supported (a name may match several)");
      }
      const PatternNode& language = c.pattern(pattern_property.pattern);
      for (const std::string& name : plan.declared_names) {
        if (pattern_matches(language, name, c.budget())) {
          SchemaCompiler::refuse_keyword("patternProperties", pattern_property.pattern.pointer,
                                         "the pattern '" + pattern_property.pattern.text +
                                             "' matches the declared property '" + name +
                                             "', which other names would then have to exclude");
        }
      }
      languages.push_back(language);
    }
    if (name_language != nullptr) {
      SchemaCompiler::refuse_keyword("propertyNames", names_pointer,
                                     "propertyNames together with patternProperties is not "
                                     "supported");
    }
    const PatternNode all = simplify_pattern(PatternNode::alternation(std::move(languages)));
    if (first.schema.never || is_empty_language(all)) return true;
    plan.extras = ObjectPlan::Extras::kNameRegex;
    plan.extra_name_regex =
        "\"" + pattern_to_json_regex(all, StringSpelling::kCanonical, c.budget()) + "\"";
    plan.extra_value = first.schema;
    return true;
  }
  if (object.additional.never) return true;
  plan.extra_value = object.additional;
  if (name_language == nullptr) {
    plan.extras = ObjectPlan::Extras::kAnyOtherName;
    return true;
  }
  for (const std::string& name : plan.declared_names) {
    if (c.admits(*name_language, Json(name), 0)) {
      SchemaCompiler::refuse_keyword("propertyNames", names_pointer,
                                     "the names it allows include the declared property '" + name +
                                         "', which other names would then have to exclude");
    }
  }
  if (auto regex = c.string_regex(name_language->string, StringSpelling::kCanonical)) {
    plan.extras = ObjectPlan::Extras::kNameRegex;
    plan.extra_name_regex = *regex;
  }
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

bool GrammarBuilder::shape_satisfiable(const ShapePlan& plan) const {
  if (plan.values) return !plan.values->empty();
  if (plan.types & (kNullType | kBooleanType | kIntegerType | kFractionType | kStringType)) {
    return true;
  }
  if (plan.types & kArrayType) {
    const int64_t writable = writable_items(plan);
    if (writable == kUnbounded || writable >= plan.min_items) return true;
  }
  if (plan.types & kObjectType) {
    const ObjectPlan& object = plan.object;
    bool ok = true;
    int64_t available = 0;
    for (const auto& property : object.properties) {
      const bool sat = satisfiable(property.schema);
      if (property.required && !sat) ok = false;
      available += sat;
    }
    const bool extras =
        object.extras != ObjectPlan::Extras::kNone && satisfiable(object.extra_value);
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
