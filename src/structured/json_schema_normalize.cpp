// structured/json_schema_normalize: a schema object's keywords -> a union of Shapes.
//
// Each keyword either narrows the one Shape made of the object's own keywords (type, bounds,
// properties, ...) or contributes a union to meet with it (allOf, anyOf, $ref, not, if/then/else,
// the dependencies). `not S` is the complement of S (json_schema_negate.cpp); if/then/else is
// (if and then) or (not if and else). oneOf is met last, once everything else narrows the
// context: branches provably disjoint there are an anyOf; a branch that may overlap another is
// met with the other's complement, so exactly one branch holds. Keywords that only annotate are
// ignored, as are names that are no keyword at all (JSON Schema ignores unknown keywords).
#include <algorithm>
#include <cmath>

#include "json_schema_compiler.h"
#include "json_schema_keywords.h"
#include "util/error.h"

namespace llms::structured::jsonschema {

// Normalizes one schema object; lives as long as one call of SchemaCompiler::normalize.
class ShapeNormalizer {
 public:
  ShapeNormalizer(SchemaCompiler& compiler, const SchemaNode& node)
      : compiler_(compiler), node_(node), json_(*node.json) {}

  std::vector<Shape> run() {
    SchemaDocument& document = compiler_.document();
    const Draft draft = document.draft();
    // Before 2019-09 a $ref replaces the whole schema object: its siblings are ignored.
    auto ref = json_.find("$ref");
    if (ref != json_.end() && ref->is_string() &&
        (draft == Draft::k4 || draft == Draft::k6 || draft == Draft::k7)) {
      return compiler_.shapes_of(document.resolve(node_, ref->get<std::string>()));
    }
    for (auto it = json_.begin(); it != json_.end(); ++it) apply(it.key(), it.value());
    if (local_.object.properties.size() > 0 || json_.contains("properties")) {
      if (!json_.contains("additionalProperties") &&
          !compiler_.options().allow_additional_properties_by_default) {
        local_.object.additional = SchemaSet::none();
      }
    }
    std::vector<Shape> result{local_};
    for (const auto& conjunct : conjuncts_) {
      result = compiler_.meet(result, conjunct);
      if (result.empty()) return result;
    }
    if (json_.contains("oneOf")) result = apply_one_of(result, json_["oneOf"]);
    return result;
  }

 private:
  std::string where() const { return node_.pointer; }
  std::string path(const std::string& key) const {
    return node_.pointer + "/" + escape_pointer_token(key);
  }
  [[noreturn]] void bad_value(const std::string& key, const std::string& what) const {
    refuse_keyword_value(key, where(), what);
  }
  const SchemaNode* child(const Json& value, const std::string& suffix) {
    return compiler_.document().child(node_, value, suffix);
  }
  SchemaSet child_set(const Json& value, const std::string& suffix, const std::string& key) {
    if (!value.is_object() && !value.is_boolean()) bad_value(key, "a schema (object or boolean)");
    if (value.is_boolean()) return value.get<bool>() ? SchemaSet::any() : SchemaSet::none();
    // Unconstrained schemas ({}, or only annotations) are `true`: one rule, equal sets.
    if (is_unconstrained(value)) return SchemaSet::any();
    return SchemaSet::of(child(value, suffix));
  }
  const std::vector<Shape>& child_shapes(const Json& value, const std::string& suffix,
                                         const std::string& key) {
    if (!value.is_object() && !value.is_boolean()) bad_value(key, "a schema (object or boolean)");
    return compiler_.shapes_of(child(value, suffix));
  }

  int64_t count(const std::string& key, const Json& value) const {
    return parse_count(key, value, where());
  }
  NumberBound bound(const std::string& key, const Json& value, bool exclusive) const {
    return parse_bound(key, value, exclusive, where());
  }

  static void tighten_lower(NumberShape& number, const NumberBound& b) {
    if (!number.lower) {
      number.lower = b;
      return;
    }
    const int order = compare(b.value, number.lower->value);
    if (order > 0 || (order == 0 && b.exclusive)) number.lower = b;
  }
  static void tighten_upper(NumberShape& number, const NumberBound& b) {
    if (!number.upper) {
      number.upper = b;
      return;
    }
    const int order = compare(b.value, number.upper->value);
    if (order < 0 || (order == 0 && b.exclusive)) number.upper = b;
  }

  void mark_unsupported(uint8_t types, const std::string& keyword) {
    local_.unsupported.push_back({types, Unsupported{keyword, where()}});
  }

  void apply(const std::string& key, const Json& value) {
    SchemaCompiler& c = compiler_;
    const Draft draft = c.document().draft();
    if (is_annotation_keyword(key)) return;
    if (key == "type") {
      local_.types &= parse_type(value, where());
    } else if (key == "enum" || key == "const") {
      std::vector<Json> values;
      if (key == "const") {
        values.push_back(value);
      } else {
        if (!value.is_array()) bad_value(key, "an array");
        c.budget().charge(static_cast<int64_t>(value.size()), "enum values");
        values.assign(value.begin(), value.end());
      }
      if (local_.values) {
        c.budget().charge(static_cast<int64_t>(values.size() * local_.values->size()),
                          "enum value comparisons");
        std::vector<Json> kept;
        for (const Json& v : values) {
          for (const Json& w : *local_.values) {
            if (json_equal(v, w)) {
              kept.push_back(v);
              break;
            }
          }
        }
        values = std::move(kept);
      }
      local_.values = std::move(values);
    } else if (key == "multipleOf") {
      if (!value.is_number()) bad_value(key, "a number");
      auto divisor = decimal_of(value);
      if (!divisor || divisor->negative || divisor->is_zero()) bad_value(key, "a positive number");
      if (divisor->integer == "1" && divisor->is_integer()) {
        local_.types &= static_cast<uint8_t>(~kFractionType);  // integers only
      } else {
        mark_unsupported(kIntegerType | kFractionType, key);
      }
    } else if (key == "minimum" || key == "maximum") {
      // Draft 4 (and a document that names no draft): a boolean exclusiveM* modifies these.
      const std::string exclusive_key = key == "minimum" ? "exclusiveMinimum" : "exclusiveMaximum";
      bool exclusive = false;
      auto it = json_.find(exclusive_key);
      if (it != json_.end() && it->is_boolean()) {
        if (draft != Draft::k4 && draft != Draft::kUnspecified) {
          bad_value(exclusive_key, "a number after draft 4");
        }
        exclusive = it->get<bool>();
      }
      const NumberBound b = bound(key, value, exclusive);
      key == "minimum" ? tighten_lower(local_.number, b) : tighten_upper(local_.number, b);
    } else if (key == "exclusiveMinimum" || key == "exclusiveMaximum") {
      if (value.is_boolean()) {
        if (draft != Draft::k4 && draft != Draft::kUnspecified) {
          bad_value(key, "a number after draft 4");
        }
        return;  // applied with minimum/maximum
      }
      if (draft == Draft::k4) bad_value(key, "a boolean in draft 4");
      const NumberBound b = bound(key, value, true);
      key == "exclusiveMinimum" ? tighten_lower(local_.number, b) : tighten_upper(local_.number, b);
    } else if (key == "minLength") {
      local_.string.min_length = std::max(local_.string.min_length, count(key, value));
    } else if (key == "maxLength") {
      const int64_t n = count(key, value);
      local_.string.max_length =
          local_.string.max_length == kUnbounded ? n : std::min(local_.string.max_length, n);
    } else if (key == "pattern") {
      if (!value.is_string()) bad_value(key, "a string");
      local_.string.patterns.push_back({value.get<std::string>(), where(), key});
    } else if (key == "format") {
      if (!value.is_string()) bad_value(key, "a string");
      local_.string.formats.push_back({value.get<std::string>(), where(), key});
    } else if (key == "items") {
      if (value.is_array()) {
        if (json_.contains("prefixItems")) bad_value(key, "a schema when prefixItems is present");
        for (size_t i = 0; i < value.size(); ++i) {
          local_.array.prefix.push_back(child_set(value[i], "/items/" + std::to_string(i), key));
        }
        // Items past the tuple: additionalItems, else any value.
        auto additional = json_.find("additionalItems");
        if (additional != json_.end()) {
          local_.array.rest = child_set(*additional, "/additionalItems", "additionalItems");
        }
      } else {
        local_.array.rest = child_set(value, "/items", key);
      }
    } else if (key == "prefixItems") {
      if (!value.is_array()) bad_value(key, "an array of schemas");
      for (size_t i = 0; i < value.size(); ++i) {
        local_.array.prefix.push_back(
            child_set(value[i], "/prefixItems/" + std::to_string(i), key));
      }
    } else if (key == "additionalItems") {
      if (!value.is_object() && !value.is_boolean()) bad_value(key, "a schema");
      return;  // applied with an items array; without one it does nothing
    } else if (key == "minItems") {
      local_.array.min_items = std::max(local_.array.min_items, count(key, value));
    } else if (key == "maxItems") {
      const int64_t n = count(key, value);
      local_.array.max_items =
          local_.array.max_items == kUnbounded ? n : std::min(local_.array.max_items, n);
    } else if (key == "uniqueItems") {
      if (!value.is_boolean()) bad_value(key, "a boolean");
      if (value.get<bool>()) local_.array.unique_items = where();
    } else if (key == "contains") {
      if (json_.contains("minContains") || json_.contains("maxContains")) {
        mark_unsupported(kArrayType, json_.contains("minContains") ? "minContains" : "maxContains");
      }
      local_.array.contains.push_back(child_set(value, "/contains", key));
      local_.array.contains_at = where();
    } else if (key == "minContains" || key == "maxContains" || key == "unevaluatedItems") {
      if (key == "unevaluatedItems" && value.is_boolean() && value.get<bool>()) return;
      mark_unsupported(kArrayType, key);
    } else if (key == "properties") {
      if (!value.is_object()) bad_value(key, "an object of schemas");
      for (auto it = value.begin(); it != value.end(); ++it) {
        local_.object.properties.push_back(
            {it.key(),
             child_set(it.value(), "/properties/" + escape_pointer_token(it.key()), key)});
      }
    } else if (key == "patternProperties") {
      if (!value.is_object()) bad_value(key, "an object of schemas");
      for (auto it = value.begin(); it != value.end(); ++it) {
        const std::string suffix = "/patternProperties/" + escape_pointer_token(it.key());
        local_.object.pattern_properties.push_back(
            {Sourced{it.key(), where(), key}, child_set(it.value(), suffix, key)});
      }
    } else if (key == "additionalProperties") {
      local_.object.additional = child_set(value, "/additionalProperties", key);
    } else if (key == "required") {
      if (!value.is_array()) bad_value(key, "an array of names");
      for (const Json& name : value) {
        if (!name.is_string()) bad_value(key, "an array of names");
        add_required(local_.object, name.get<std::string>());
      }
    } else if (key == "propertyNames") {
      local_.object.property_names.push_back(child_set(value, "/propertyNames", key));
    } else if (key == "minProperties") {
      local_.object.min_properties = std::max(local_.object.min_properties, count(key, value));
    } else if (key == "maxProperties") {
      const int64_t n = count(key, value);
      local_.object.max_properties = local_.object.max_properties == kUnbounded
                                         ? n
                                         : std::min(local_.object.max_properties, n);
    } else if (key == "dependentRequired" || key == "dependentSchemas" || key == "dependencies") {
      apply_dependencies(key, value);
    } else if (key == "allOf" || key == "anyOf") {
      if (!value.is_array() || value.empty()) bad_value(key, "a non-empty array of schemas");
      if (key == "allOf") {
        for (size_t i = 0; i < value.size(); ++i) {
          conjuncts_.push_back(child_shapes(value[i], "/allOf/" + std::to_string(i), key));
        }
      } else {
        std::vector<Shape> any;
        for (size_t i = 0; i < value.size(); ++i) {
          const auto& branch = child_shapes(value[i], "/anyOf/" + std::to_string(i), key);
          c.budget().charge(static_cast<int64_t>(branch.size()), "JSON Schema alternatives");
          any.insert(any.end(), branch.begin(), branch.end());
        }
        conjuncts_.push_back(std::move(any));
      }
    } else if (key == "oneOf") {
      if (!value.is_array() || value.empty()) bad_value(key, "a non-empty array of schemas");
      return;  // applied last, see run()
    } else if (key == "not") {
      if (!value.is_object() && !value.is_boolean()) bad_value(key, "a schema");
      conjuncts_.push_back(c.negation_of(child(value, "/not")));
    } else if (key == "$ref") {
      if (!value.is_string()) bad_value(key, "a string");
      conjuncts_.push_back(c.shapes_of(c.document().resolve(node_, value.get<std::string>())));
    } else if (key == "if") {
      apply_if(value);
    } else if (key == "$recursiveRef" || key == "$dynamicRef") {
      SchemaCompiler::refuse_keyword(key, where());
    } else if (key == "unevaluatedProperties") {
      if (value.is_boolean() && value.get<bool>()) return;
      mark_unsupported(kObjectType, key);
    }
    // Anything else is not a JSON Schema keyword: ignored, as validators do.
  }

  static void add_required(ObjectShape& object, const std::string& name) {
    if (std::find(object.required.begin(), object.required.end(), name) == object.required.end()) {
      object.required.push_back(name);
    }
  }

  // "if `name` is present then ...": absent, or present and ... .
  void apply_dependencies(const std::string& key, const Json& value) {
    if (!value.is_object()) bad_value(key, "an object");
    for (auto it = value.begin(); it != value.end(); ++it) {
      const std::string& name = it.key();
      // Three disjoint cases: not an object, an object without `name`, one with it and more.
      Shape not_object;
      not_object.types = static_cast<uint8_t>(kAllTypes & ~kObjectType);
      Shape absent;
      absent.types = kObjectType;
      absent.object.properties.push_back({name, SchemaSet::none()});
      Shape present;
      present.types = kObjectType;
      add_required(present.object, name);
      std::vector<Shape> when_present{present};
      if (it.value().is_array() && key != "dependentSchemas") {
        for (const Json& other : it.value()) {
          if (!other.is_string()) bad_value(key, "lists of property names");
          add_required(when_present[0].object, other.get<std::string>());
        }
      } else if ((it.value().is_object() || it.value().is_boolean()) &&
                 key != "dependentRequired") {
        when_present = compiler_.meet(
            when_present,
            child_shapes(it.value(), "/" + key + "/" + escape_pointer_token(name), key));
      } else {
        bad_value(key, key == "dependentRequired" ? "lists of property names" : "schemas");
      }
      std::vector<Shape> either{not_object, absent};
      either.insert(either.end(), when_present.begin(), when_present.end());
      conjuncts_.push_back(std::move(either));
    }
  }

  // if/then/else: (if and then) or (not if and else); a missing then/else is `true`.
  void apply_if(const Json& condition) {
    if (!condition.is_object() && !condition.is_boolean()) bad_value("if", "a schema");
    if (!json_.contains("then") && !json_.contains("else")) return;  // constrains nothing
    const SchemaNode* if_node = child(condition, "/if");
    std::vector<Shape> when_true = compiler_.shapes_of(if_node);
    std::vector<Shape> when_false = compiler_.negation_of(if_node);
    for (const char* key : {"then", "else"}) {
      auto it = json_.find(key);
      if (it == json_.end()) continue;
      std::vector<Shape>& branch = key[0] == 't' ? when_true : when_false;
      branch = compiler_.meet(branch, child_shapes(*it, std::string("/") + key, key));
    }
    when_true.insert(when_true.end(), when_false.begin(), when_false.end());
    conjuncts_.push_back(std::move(when_true));
  }

  // oneOf: exactly one branch. Branches provably disjoint in this context need nothing more;
  // a branch that may overlap another is met with the other's complement.
  std::vector<Shape> apply_one_of(const std::vector<Shape>& context, const Json& branches) {
    std::vector<const SchemaNode*> nodes;
    std::vector<std::vector<Shape>> met;
    for (size_t i = 0; i < branches.size(); ++i) {
      const Json& branch = branches[i];
      if (!branch.is_object() && !branch.is_boolean()) bad_value("oneOf", "an array of schemas");
      nodes.push_back(child(branch, "/oneOf/" + std::to_string(i)));
      met.push_back(compiler_.meet(context, compiler_.shapes_of(nodes.back())));
    }
    auto overlap = [&](size_t i, size_t j) {
      for (const Shape& a : met[i]) {
        for (const Shape& b : met[j]) {
          compiler_.budget().charge(1, "oneOf disjointness checks");
          if (!compiler_.provably_disjoint(a, b, 0)) return true;
        }
      }
      return false;
    };
    std::vector<std::vector<size_t>> excluded(met.size());
    for (size_t i = 0; i < met.size(); ++i) {
      for (size_t j = i + 1; j < met.size(); ++j) {
        if (overlap(i, j)) {
          excluded[i].push_back(j);
          excluded[j].push_back(i);
        }
      }
    }
    std::vector<Shape> out;
    for (size_t i = 0; i < met.size(); ++i) {
      std::vector<Shape> branch = met[i];
      for (size_t j : excluded[i]) {
        if (branch.empty()) break;
        try {
          branch = compiler_.meet(branch, compiler_.negation_of(nodes[j]));
        } catch (const Error& e) {
          SchemaCompiler::refuse_keyword(
              "oneOf", where(),
              "branches " + std::to_string(std::min(i, j)) + " and " +
                  std::to_string(std::max(i, j)) +
                  " may both match, and excluding one from the other needs its complement: " +
                  e.what());
        }
      }
      out.insert(out.end(), branch.begin(), branch.end());
    }
    return out;
  }

  SchemaCompiler& compiler_;
  const SchemaNode& node_;
  const Json& json_;
  Shape local_;
  std::vector<std::vector<Shape>> conjuncts_;
};

std::vector<Shape> SchemaCompiler::normalize(const SchemaNode& node) {
  const Json& json = *node.json;
  if (json.is_boolean())
    return json.get<bool>() ? std::vector<Shape>{Shape{}} : std::vector<Shape>{};
  if (!json.is_object()) {
    refuse("JSON Schema: the schema at " + shown_pointer(node.pointer) +
           " must be an object or a boolean");
  }
  return ShapeNormalizer(*this, node).run();
}

const std::vector<Shape>& SchemaCompiler::shapes_of(const SchemaNode* node) {
  return memoized(node, node_shapes_, in_progress_, [&] { return normalize(*node); });
}

const std::vector<Shape>& SchemaCompiler::shapes_of(const SchemaSet& set) {
  auto found = set_shapes_.find(set);
  if (found != set_shapes_.end()) return found->second;
  // Analyses (has_impossible_requirement) reach sets from inside other sets' meets: a set met
  // again, or a chain too long, means "cannot tell yet" there; elsewhere it cannot happen.
  if (sets_in_progress_.count(set) || set_depth_ >= 64) {
    if (analysis_depth_ > 0) throw NormalizationCycle{};
    refuse("JSON Schema: subschemas nest too deeply to be combined");
  }
  sets_in_progress_.insert(set);
  ++set_depth_;
  struct Leave {
    SchemaCompiler& compiler;
    const SchemaSet& set;
    ~Leave() {
      compiler.sets_in_progress_.erase(set);
      --compiler.set_depth_;
    }
  } leave{*this, set};
  std::vector<Shape> shapes;
  if (!set.never) {
    shapes.push_back(Shape{});
    for (const SchemaNode* node : set.nodes) {
      shapes = meet(shapes, shapes_of(node));
      if (shapes.empty()) break;
    }
    for (const SchemaNode* node : set.negated) {
      if (shapes.empty()) break;
      shapes = meet(shapes, negation_of(node));
    }
  }
  return set_shapes_.emplace(set, std::move(shapes)).first->second;
}

void SchemaCompiler::refuse(const std::string& message) {
  throw Error(Error::Kind::kInvalidArgument, message);
}

void SchemaCompiler::refuse_keyword(const std::string& keyword, const std::string& pointer,
                                    const std::string& why) {
  std::string message =
      "unsupported JSON Schema keyword '" + keyword + "' at " + shown_pointer(pointer);
  if (!why.empty()) message += ": " + why;
  refuse(message);
}

}  // namespace llms::structured::jsonschema
