// structured/json_schema_negate: the complement of a subschema as a union of Shapes, for `not`,
// the false branch of if/then/else, and oneOf branches that may overlap.
//
// A schema object is the conjunction of its keywords, so its complement is the union of the
// complements of its keywords: not (type T) = the other types; not (minimum m) = non-numbers and
// numbers below m; not (required [a, b]) = objects without a, or without b; not (properties
// {p: S}) = objects with p whose value is not S (a child SchemaSet holding S negated); not allOf =
// union of complements; not anyOf = meet of complements; not not S = S; not (enum V) = everything
// but V when V's values are scalars. A keyword whose complement no Shape can hold (pattern,
// format, uniqueItems, additionalProperties, patternProperties, oneOf, ...) is refused by name.
#include <algorithm>

#include "json_schema_compiler.h"
#include "json_schema_keywords.h"
#include "util/error.h"

namespace llms::structured::jsonschema {

namespace {

Shape of_types(uint8_t types) {
  Shape shape;
  shape.types = types;
  return shape;
}

Shape all_but(uint8_t types) { return of_types(static_cast<uint8_t>(kAllTypes & ~types)); }

constexpr uint8_t kNumberTypes = kIntegerType | kFractionType;

}  // namespace

// Negates one schema object; lives as long as one call of SchemaCompiler::negation_of.
class ShapeNegator {
 public:
  ShapeNegator(SchemaCompiler& compiler, const SchemaNode& node)
      : compiler_(compiler), node_(node), json_(*node.json) {}

  std::vector<Shape> run() {
    if (json_.is_boolean()) {
      return json_.get<bool>() ? std::vector<Shape>{} : std::vector<Shape>{Shape{}};
    }
    if (!json_.is_object()) {
      SchemaCompiler::refuse("JSON Schema: the schema at " + shown_pointer(node_.pointer) +
                             " must be an object or a boolean");
    }
    const Draft draft = compiler_.document().draft();
    auto ref = json_.find("$ref");
    if (ref != json_.end() && ref->is_string() &&
        (draft == Draft::k4 || draft == Draft::k6 || draft == Draft::k7)) {
      return compiler_.negation_of(compiler_.document().resolve(node_, ref->get<std::string>()));
    }
    for (auto it = json_.begin(); it != json_.end(); ++it) negate(it.key(), it.value());
    return std::move(out_);
  }

 private:
  std::string where() const { return node_.pointer; }
  [[noreturn]] void cannot(const std::string& key) const {
    SchemaCompiler::refuse_keyword(key, where(),
                                   "its complement cannot be written (it is under 'not', 'if', "
                                   "or a oneOf branch that may overlap another)");
  }
  const SchemaNode* child(const Json& value, const std::string& suffix, const std::string& key) {
    if (!value.is_object() && !value.is_boolean()) refuse_keyword_value(key, where(), "a schema");
    return compiler_.document().child(node_, value, suffix);
  }
  void add(Shape shape) {
    if (shape.types == 0) return;
    compiler_.budget().charge(1, "JSON Schema alternatives");
    out_.push_back(std::move(shape));
  }
  void add(const std::vector<Shape>& shapes) {
    for (const Shape& shape : shapes) add(shape);
  }

  void negate(const std::string& key, const Json& value) {
    if (is_annotation_keyword(key)) return;
    if (key == "type") {
      add(all_but(parse_type(value, where())));
    } else if (key == "enum" || key == "const") {
      negate_values(key, value);
    } else if (key == "minimum" || key == "maximum") {
      const std::string exclusive_key = key == "minimum" ? "exclusiveMinimum" : "exclusiveMaximum";
      auto it = json_.find(exclusive_key);
      const bool exclusive = it != json_.end() && it->is_boolean() && it->get<bool>();
      negate_bound(key == "minimum", parse_bound(key, value, exclusive, where()));
    } else if (key == "exclusiveMinimum" || key == "exclusiveMaximum") {
      if (value.is_boolean()) return;  // read with minimum/maximum
      negate_bound(key == "exclusiveMinimum", parse_bound(key, value, true, where()));
    } else if (key == "multipleOf") {
      auto divisor = value.is_number() ? decimal_of(value) : std::nullopt;
      if (!divisor || divisor->integer != "1" || !divisor->is_integer()) cannot(key);
      add(all_but(kNumberTypes));
      add(of_types(kFractionType));
    } else if (key == "minLength" || key == "maxLength") {
      const int64_t n = parse_count(key, value, where());
      if (key == "minLength" && n == 0) return;
      add(all_but(kStringType));
      Shape strings = of_types(kStringType);
      if (key == "minLength") {
        strings.string.max_length = n - 1;
      } else {
        strings.string.min_length = n + 1;
      }
      add(strings);
    } else if (key == "minItems" || key == "maxItems") {
      const int64_t n = parse_count(key, value, where());
      if (key == "minItems" && n == 0) return;
      add(all_but(kArrayType));
      Shape arrays = of_types(kArrayType);
      if (key == "minItems") {
        arrays.array.max_items = n - 1;
      } else {
        arrays.array.min_items = n + 1;
      }
      add(arrays);
    } else if (key == "minProperties" || key == "maxProperties") {
      const int64_t n = parse_count(key, value, where());
      if (key == "minProperties" && n == 0) return;
      add(all_but(kObjectType));
      Shape objects = of_types(kObjectType);
      if (key == "minProperties") {
        objects.object.max_properties = n - 1;
      } else {
        objects.object.min_properties = n + 1;
      }
      add(objects);
    } else if (key == "items" || key == "prefixItems") {
      negate_items(key, value);
    } else if (key == "additionalItems") {
      // Only with an items array: some item past the tuple, which `false` forbids outright.
      auto items = json_.find("items");
      if (items == json_.end() || !items->is_array()) return;
      if (value.is_boolean() && value.get<bool>()) return;
      if (!value.is_boolean()) cannot(key);
      Shape longer = of_types(kArrayType);
      longer.array.min_items = static_cast<int64_t>(items->size()) + 1;
      add(longer);
    } else if (key == "contains") {
      if (json_.contains("minContains") || json_.contains("maxContains")) cannot(key);
      // No item satisfies it: every item satisfies its complement.
      Shape arrays = of_types(kArrayType);
      arrays.array.rest = SchemaSet::negation_of(child(value, "/contains", key));
      add(arrays);
    } else if (key == "uniqueItems") {
      if (value.is_boolean() && !value.get<bool>()) return;
      cannot(key);
    } else if (key == "required") {
      if (!value.is_array()) refuse_keyword_value(key, where(), "an array of names");
      for (const Json& name : value) {
        if (!name.is_string()) refuse_keyword_value(key, where(), "an array of names");
        Shape lacking = of_types(kObjectType);
        lacking.object.properties.push_back({name.get<std::string>(), SchemaSet::none()});
        add(lacking);
      }
    } else if (key == "properties") {
      if (!value.is_object()) refuse_keyword_value(key, where(), "an object of schemas");
      for (auto it = value.begin(); it != value.end(); ++it) {
        if (it.value().is_boolean() && it.value().get<bool>()) continue;
        const SchemaNode* schema =
            child(it.value(), "/properties/" + escape_pointer_token(it.key()), key);
        Shape violating = of_types(kObjectType);
        violating.object.required.push_back(it.key());
        violating.object.properties.push_back({it.key(), SchemaSet::negation_of(schema)});
        add(violating);
      }
    } else if (key == "additionalProperties") {
      if (value.is_boolean() && value.get<bool>()) return;
      // `false`: some name the schema does not declare is present.
      if (!value.is_boolean() || json_.contains("patternProperties")) cannot(key);
      Shape objects = of_types(kObjectType);
      std::vector<std::string> declared;
      auto properties = json_.find("properties");
      if (properties != json_.end() && properties->is_object()) {
        for (auto it = properties->begin(); it != properties->end(); ++it) {
          declared.push_back(it.key());
        }
      }
      objects.object.some_name_outside.push_back(std::move(declared));
      objects.object.some_name_outside_at = where();
      add(objects);
    } else if (key == "dependentRequired" || key == "dependentSchemas" || key == "dependencies") {
      negate_dependencies(key, value);
    } else if (key == "allOf") {
      if (!value.is_array()) refuse_keyword_value(key, where(), "an array of schemas");
      for (size_t i = 0; i < value.size(); ++i) {
        add(compiler_.negation_of(child(value[i], "/allOf/" + std::to_string(i), key)));
      }
    } else if (key == "anyOf") {
      if (!value.is_array()) refuse_keyword_value(key, where(), "an array of schemas");
      std::vector<Shape> none_holds{Shape{}};
      for (size_t i = 0; i < value.size() && !none_holds.empty(); ++i) {
        none_holds = compiler_.meet(
            none_holds, compiler_.negation_of(child(value[i], "/anyOf/" + std::to_string(i), key)));
      }
      add(none_holds);
    } else if (key == "not") {
      add(compiler_.shapes_of(child(value, "/not", key)));
    } else if (key == "$ref") {
      if (!value.is_string()) refuse_keyword_value(key, where(), "a string");
      add(compiler_.negation_of(compiler_.document().resolve(node_, value.get<std::string>())));
    } else if (key == "if") {
      // not ((if and then) or (not if and else)) = (if and not then) or (not if and not else).
      const SchemaNode* condition = child(value, "/if", key);
      for (const char* branch_key : {"then", "else"}) {
        auto branch = json_.find(branch_key);
        if (branch == json_.end()) continue;
        const SchemaNode* branch_node = child(*branch, std::string("/") + branch_key, branch_key);
        const std::vector<Shape>& side = branch_key[0] == 't' ? compiler_.shapes_of(condition)
                                                              : compiler_.negation_of(condition);
        add(compiler_.meet(side, compiler_.negation_of(branch_node)));
      }
    } else if (key == "unevaluatedProperties" || key == "unevaluatedItems") {
      if (value.is_boolean() && value.get<bool>()) return;
      cannot(key);
    } else if (key == "oneOf") {
      // Not exactly one: none holds, or some two do.
      if (!value.is_array()) refuse_keyword_value(key, where(), "an array of schemas");
      std::vector<const SchemaNode*> branches;
      for (size_t i = 0; i < value.size(); ++i) {
        branches.push_back(child(value[i], "/oneOf/" + std::to_string(i), key));
      }
      std::vector<Shape> none_holds{Shape{}};
      for (const SchemaNode* branch : branches) {
        if (none_holds.empty()) break;
        none_holds = compiler_.meet(none_holds, compiler_.negation_of(branch));
      }
      add(none_holds);
      for (size_t i = 0; i < branches.size(); ++i) {
        for (size_t j = i + 1; j < branches.size(); ++j) {
          add(compiler_.meet(compiler_.shapes_of(branches[i]), compiler_.shapes_of(branches[j])));
        }
      }
    } else if (key == "pattern" || key == "format" || key == "patternProperties" ||
               key == "propertyNames" || key == "minContains" || key == "maxContains" ||
               key == "$recursiveRef" || key == "$dynamicRef") {
      cannot(key);
    }
    // Every other name is not a keyword: it constrains nothing, so it adds no complement.
  }

  // not (x >= m) = non-numbers or x < m; not (x <= m) = non-numbers or x > m.
  void negate_bound(bool lower, const NumberBound& bound) {
    add(all_but(kNumberTypes));
    Shape numbers = of_types(kNumberTypes);
    const NumberBound opposite{bound.value, !bound.exclusive};
    if (lower) {
      numbers.number.upper = opposite;
    } else {
      numbers.number.lower = opposite;
    }
    add(numbers);
  }

  // Everything but finitely many values: possible when they are null, booleans, numbers or
  // strings (a complement of one array or object has no Shape).
  void negate_values(const std::string& key, const Json& value) {
    std::vector<Json> values;
    if (key == "const") {
      values.push_back(value);
    } else {
      if (!value.is_array()) refuse_keyword_value(key, where(), "an array");
      values.assign(value.begin(), value.end());
    }
    uint8_t kept_types = kAllTypes;
    std::vector<Json> booleans_left{Json(true), Json(false)};
    std::vector<std::string> strings;
    std::vector<Decimal> numbers;
    for (const Json& v : values) {
      if (v.is_null()) {
        kept_types &= static_cast<uint8_t>(~kNullType);
      } else if (v.is_boolean()) {
        std::erase_if(booleans_left, [&](const Json& b) { return b == v; });
      } else if (v.is_string()) {
        strings.push_back(v.get<std::string>());
      } else if (v.is_number()) {
        if (auto d = decimal_of(v)) numbers.push_back(*d);
      } else {
        cannot(key);
      }
    }
    // Null, arrays and objects: as they are kept.
    add(of_types(kept_types & (kNullType | kArrayType | kObjectType)));
    if (!booleans_left.empty()) {
      Shape booleans = of_types(kBooleanType);
      if (booleans_left.size() == 1) booleans.values = booleans_left;
      add(booleans);
    }
    Shape other_strings = of_types(kStringType);
    other_strings.string.excluded = strings;
    add(other_strings);
    // Numbers: the open intervals between the excluded values.
    std::sort(numbers.begin(), numbers.end(),
              [](const Decimal& a, const Decimal& b) { return compare(a, b) < 0; });
    numbers.erase(std::unique(numbers.begin(), numbers.end()), numbers.end());
    if (numbers.empty()) {
      add(of_types(kNumberTypes));
      return;
    }
    for (size_t i = 0; i <= numbers.size(); ++i) {
      Shape interval = of_types(kNumberTypes);
      if (i > 0) interval.number.lower = NumberBound{numbers[i - 1], true};
      if (i < numbers.size()) interval.number.upper = NumberBound{numbers[i], true};
      add(interval);
    }
  }

  // Some item of the tuple exists and fails its schema (a schema `items` needs `contains`).
  void negate_items(const std::string& key, const Json& value) {
    if (value.is_array()) {
      for (size_t i = 0; i < value.size(); ++i) {
        if (value[i].is_boolean() && value[i].get<bool>()) continue;
        Shape arrays = of_types(kArrayType);
        arrays.array.min_items = static_cast<int64_t>(i) + 1;
        arrays.array.prefix.assign(i + 1, SchemaSet::any());
        arrays.array.prefix[i] =
            SchemaSet::negation_of(child(value[i], "/" + key + "/" + std::to_string(i), key));
        add(arrays);
      }
      return;
    }
    if (value.is_boolean()) {
      if (value.get<bool>()) return;
      Shape non_empty = of_types(kArrayType);  // items: false allows only []
      non_empty.array.min_items = 1;
      if (json_.contains("prefixItems") && json_["prefixItems"].is_array()) {
        non_empty.array.min_items = static_cast<int64_t>(json_["prefixItems"].size()) + 1;
      }
      add(non_empty);
      return;
    }
    // Some item (past prefixItems) fails the schema: `contains` its complement.
    if (json_.contains("prefixItems")) cannot(key);
    const SchemaNode* schema = child(value, "/" + key, key);
    if (compiler_.negation_of(schema).empty()) return;  // the schema accepts everything
    Shape arrays = of_types(kArrayType);
    arrays.array.contains.push_back(SchemaSet::negation_of(schema));
    arrays.array.contains_at = where();
    add(arrays);
  }

  // not (if a then B) = a present and not B.
  void negate_dependencies(const std::string& key, const Json& value) {
    if (!value.is_object()) refuse_keyword_value(key, where(), "an object");
    for (auto it = value.begin(); it != value.end(); ++it) {
      Shape present = of_types(kObjectType);
      present.object.required.push_back(it.key());
      if (it.value().is_array()) {
        for (const Json& other : it.value()) {
          if (!other.is_string()) refuse_keyword_value(key, where(), "lists of property names");
          Shape lacking = present;
          lacking.object.properties.push_back({other.get<std::string>(), SchemaSet::none()});
          add(lacking);
        }
      } else {
        const SchemaNode* schema =
            child(it.value(), "/" + key + "/" + escape_pointer_token(it.key()), key);
        add(compiler_.meet({present}, compiler_.negation_of(schema)));
      }
    }
  }

  SchemaCompiler& compiler_;
  const SchemaNode& node_;
  const Json& json_;
  std::vector<Shape> out_;
};

const std::vector<Shape>& SchemaCompiler::negation_of(const SchemaNode* node) {
  return memoized(node, node_negations_, negations_in_progress_,
                  [&] { return ShapeNegator(*this, *node).run(); });
}

}  // namespace llms::structured::jsonschema
