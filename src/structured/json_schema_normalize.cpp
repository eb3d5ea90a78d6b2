// structured/json_schema_normalize: a schema object's keywords -> a union of Shapes.
//
// Each keyword either narrows the one Shape made of the object's own keywords (type, bounds,
// properties, ...) or contributes a union to meet with it (allOf, anyOf, $ref, not, the
// dependencies). oneOf is met last, once everything else narrows the context, and only when its
// branches are provably disjoint there (then it equals anyOf). Keywords that only annotate are
// ignored, as are names that are no keyword at all (JSON Schema ignores unknown keywords).
#include <algorithm>
#include <cmath>

#include "json_schema_compiler.h"
#include "util/error.h"

namespace llms::structured::jsonschema {

namespace {

constexpr int kMaxCompositionDepth = 64;

// Annotations and containers of definitions: no effect on which values are valid.
bool is_annotation(const std::string& key) {
  static const char* const kKeys[] = {
      "$schema",
      "$id",
      "id",
      "$anchor",
      "$comment",
      "$defs",
      "definitions",
      "title",
      "description",
      "default",
      "examples",
      "readOnly",
      "writeOnly",
      "deprecated",
      "contentEncoding",
      "contentMediaType",
      "contentSchema",
      "$vocabulary",
      "$dynamicAnchor",
      "$recursiveAnchor",
      "then",
      "else"};  // then/else without if do nothing; with if, `if` is refused
  for (const char* k : kKeys) {
    if (key == k) return true;
  }
  return false;
}

uint8_t type_bits(const std::string& name) {
  if (name == "null") return kNullType;
  if (name == "boolean") return kBooleanType;
  if (name == "integer") return kIntegerType;
  if (name == "number") return kIntegerType | kFractionType;
  if (name == "string") return kStringType;
  if (name == "array") return kArrayType;
  if (name == "object") return kObjectType;
  return 0;
}

}  // namespace

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
    SchemaCompiler::refuse("JSON Schema: '" + key + "' at " + shown_pointer(where()) + " must be " +
                           what);
  }
  const SchemaNode* child(const Json& value, const std::string& suffix) {
    return compiler_.document().child(node_, value, suffix);
  }
  SchemaSet child_set(const Json& value, const std::string& suffix, const std::string& key) {
    if (!value.is_object() && !value.is_boolean()) bad_value(key, "a schema (object or boolean)");
    if (value.is_boolean()) return value.get<bool>() ? SchemaSet::any() : SchemaSet::none();
    return SchemaSet::of(child(value, suffix));
  }
  const std::vector<Shape>& child_shapes(const Json& value, const std::string& suffix,
                                         const std::string& key) {
    if (!value.is_object() && !value.is_boolean()) bad_value(key, "a schema (object or boolean)");
    return compiler_.shapes_of(child(value, suffix));
  }

  // A non-negative integer count (5 or 5.0); saturates far above any supported bound.
  int64_t count(const std::string& key, const Json& value) const {
    if (value.is_number_unsigned() || value.is_number_integer()) {
      if (value.is_number_integer() && !value.is_number_unsigned() && value.get<int64_t>() < 0) {
        bad_value(key, "a non-negative integer");
      }
      if (value.is_number_unsigned()) {
        return static_cast<int64_t>(std::min<uint64_t>(value.get<uint64_t>(), 1ull << 40));
      }
      return std::min<int64_t>(value.get<int64_t>(), int64_t{1} << 40);
    }
    if (value.is_number_float()) {
      const double d = value.get<double>();
      if (d >= 0 && std::floor(d) == d) return static_cast<int64_t>(std::min(d, 1099511627776.0));
    }
    bad_value(key, "a non-negative integer");
  }

  NumberBound bound(const std::string& key, const Json& value, bool exclusive) const {
    if (!value.is_number()) bad_value(key, "a number");
    auto decimal = decimal_of(value);
    if (!decimal) bad_value(key, "a number of at most 400 digits");
    return NumberBound{*decimal, exclusive};
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
    if (is_annotation(key)) return;
    if (key == "type") {
      uint8_t bits = 0;
      if (value.is_string()) {
        bits = type_bits(value.get<std::string>());
        if (!bits) bad_value(key, "a JSON Schema type name");
      } else if (value.is_array()) {
        for (const Json& name : value) {
          if (!name.is_string() || !type_bits(name.get<std::string>())) {
            bad_value(key, "a type name or an array of them");
          }
          bits |= type_bits(name.get<std::string>());
        }
      } else {
        bad_value(key, "a type name or an array of them");
      }
      local_.types &= bits;
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
    } else if (key == "contains" || key == "minContains" || key == "maxContains" ||
               key == "unevaluatedItems") {
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
      conjuncts_.push_back(negate(value, "/not"));
    } else if (key == "$ref") {
      if (!value.is_string()) bad_value(key, "a string");
      conjuncts_.push_back(c.shapes_of(c.document().resolve(node_, value.get<std::string>())));
    } else if (key == "if") {
      SchemaCompiler::refuse_keyword("if", where(),
                                     "conditionals (if/then/else) are not supported");
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

  // `not`: the complement, for the forms whose complement is a union of Shapes.
  std::vector<Shape> negate(const Json& value, const std::string& suffix) {
    if (value.is_boolean()) {
      return value.get<bool>() ? std::vector<Shape>{} : std::vector<Shape>{Shape{}};
    }
    if (!value.is_object()) bad_value("not", "a schema");
    std::vector<std::string> keys;
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (!is_annotation(it.key())) keys.push_back(it.key());
    }
    if (keys.empty()) return {};  // not {}: nothing is valid
    auto only = [&](std::initializer_list<const char*> allowed) {
      for (const std::string& k : keys) {
        bool ok = false;
        for (const char* a : allowed) ok = ok || k == a;
        if (!ok) return false;
      }
      return true;
    };
    if (only({"required"}) && value["required"].is_array() && !value["required"].empty()) {
      // An object lacking at least one of the names (non-objects always have them all).
      std::vector<Shape> out;
      for (const Json& name : value["required"]) {
        if (!name.is_string()) bad_value("required", "an array of names");
        Shape lacking;
        lacking.types = kObjectType;
        lacking.object.properties.push_back({name.get<std::string>(), SchemaSet::none()});
        out.push_back(std::move(lacking));
      }
      return out;
    }
    if (only({"type"})) {
      Shape complement;
      uint8_t bits = 0;
      const Json& type = value["type"];
      if (type.is_string()) {
        bits = type_bits(type.get<std::string>());
      } else if (type.is_array()) {
        for (const Json& name : type) {
          if (name.is_string()) bits |= type_bits(name.get<std::string>());
        }
      }
      complement.types = static_cast<uint8_t>(kAllTypes & ~bits);
      return {complement};
    }
    if (only({"enum", "const"}) && keys.size() == 1) {
      // Complement of finitely many values, when they are null, booleans or strings.
      std::vector<Json> values;
      if (keys[0] == "const") {
        values.push_back(value["const"]);
      } else if (value["enum"].is_array()) {
        values.assign(value["enum"].begin(), value["enum"].end());
      }
      Shape complement;
      std::vector<Json> booleans_left{Json(true), Json(false)};
      bool all_simple = true;
      for (const Json& v : values) {
        if (v.is_null()) {
          complement.types &= static_cast<uint8_t>(~kNullType);
        } else if (v.is_boolean()) {
          std::erase_if(booleans_left, [&](const Json& b) { return b == v; });
        } else if (v.is_string()) {
          complement.string.excluded.push_back(v.get<std::string>());
        } else {
          all_simple = false;
        }
      }
      if (all_simple) {
        std::vector<Shape> out;
        Shape others = complement;
        others.types &= static_cast<uint8_t>(~kBooleanType);
        out.push_back(others);
        if (!booleans_left.empty()) {
          Shape booleans;
          booleans.types = kBooleanType;
          booleans.values = booleans_left;
          out.push_back(booleans);
        }
        return out;
      }
    }
    if (only({"anyOf"}) && value["anyOf"].is_array()) {
      // not (A or B) = not A and not B.
      std::vector<Shape> out{Shape{}};
      for (size_t i = 0; i < value["anyOf"].size(); ++i) {
        out =
            compiler_.meet(out, negate(value["anyOf"][i], suffix + "/anyOf/" + std::to_string(i)));
      }
      return out;
    }
    SchemaCompiler::refuse_keyword("not", where(),
                                   "only 'not' of required, type, enum/const of "
                                   "null/boolean/string values, or anyOf of those is supported");
  }

  // oneOf equals anyOf when, in the context of everything else, no two branches overlap.
  std::vector<Shape> apply_one_of(const std::vector<Shape>& context, const Json& branches) {
    std::vector<std::vector<Shape>> met;
    for (size_t i = 0; i < branches.size(); ++i) {
      met.push_back(compiler_.meet(
          context, child_shapes(branches[i], "/oneOf/" + std::to_string(i), "oneOf")));
    }
    for (size_t i = 0; i < met.size(); ++i) {
      for (size_t j = i + 1; j < met.size(); ++j) {
        for (const Shape& a : met[i]) {
          for (const Shape& b : met[j]) {
            compiler_.budget().charge(1, "oneOf disjointness checks");
            if (!compiler_.provably_disjoint(a, b, 0)) {
              SchemaCompiler::refuse_keyword(
                  "oneOf", where(),
                  "branches " + std::to_string(i) + " and " + std::to_string(j) +
                      " may both match (oneOf is supported when its branches are provably "
                      "disjoint: different types, distinct const/enum values, or a required "
                      "property whose schemas are)");
            }
          }
        }
      }
    }
    std::vector<Shape> out;
    for (auto& shapes : met) out.insert(out.end(), shapes.begin(), shapes.end());
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
  auto found = node_shapes_.find(node);
  if (found != node_shapes_.end()) return found->second;
  if (in_progress_.count(node)) {
    if (analysis_depth_ > 0) throw NormalizationCycle{};
    refuse("JSON Schema: the schema at " + shown_pointer(node->pointer) +
           " refers to itself without an array or object in between (an infinite '$ref' loop)");
  }
  if (normalize_depth_ >= kMaxCompositionDepth) {
    refuse("JSON Schema: '$ref', allOf, anyOf or oneOf nest deeper than " +
           std::to_string(kMaxCompositionDepth) + " levels at " + shown_pointer(node->pointer));
  }
  budget_.charge(1, "JSON Schema normalizations");
  in_progress_.insert(node);
  ++normalize_depth_;
  std::vector<Shape> shapes;
  try {
    shapes = normalize(*node);
  } catch (...) {
    in_progress_.erase(node);
    --normalize_depth_;
    throw;
  }
  in_progress_.erase(node);
  --normalize_depth_;
  return node_shapes_.emplace(node, std::move(shapes)).first->second;
}

const std::vector<Shape>& SchemaCompiler::shapes_of(const SchemaSet& set) {
  auto found = set_shapes_.find(set);
  if (found != set_shapes_.end()) return found->second;
  std::vector<Shape> shapes;
  if (!set.never) {
    shapes.push_back(Shape{});
    for (const SchemaNode* node : set.nodes) {
      shapes = meet(shapes, shapes_of(node));
      if (shapes.empty()) break;
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
