// structured/json_schema_grammar: from the normalized schema to grammar text.
//
// Planning (json_schema_plan.cpp) visits every SchemaSet reachable from the root, decides per
// Shape what each type will be written as (a terminal regex for numbers and strings, item and
// property lists for arrays and objects, the admitted values of an enum), refuses the keywords
// that matter and cannot be enforced, and then computes which sets have a finite instance (a
// least fixed point: a required property or item whose schema has none makes its parent
// impossible). Writing (json_schema_emit.cpp) emits only satisfiable alternatives, so every rule
// of the grammar can complete: a token mask never leads into a dead end.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "json_schema_compiler.h"

namespace llms::structured::jsonschema {

// What the grammar writes for the object part of a Shape.
struct ObjectPlan {
  struct Property {
    std::string name;
    SchemaSet schema;  // the effective one (declared, matching patterns, or additional)
    bool required = false;
  };
  std::vector<Property> properties;  // in order; forbidden names are left out
  // The other names an object may have: a language of names (a regex of whole JSON strings,
  // quotes included, holding no declared name) and the schema of their values.
  struct Extra {
    std::string key_regex;
    SchemaSet value;
  };
  std::vector<Extra> extras;
  std::vector<std::string> declared_names;  // every name `properties` covers or forbids
  int64_t min_properties = 0;
  int64_t max_properties = kUnbounded;
};

// What the grammar writes for one Shape.
struct ShapePlan {
  std::optional<std::vector<Json>> values;  // an enum: exactly these (others below unused)
  uint8_t types = 0;                        // the types that can still be written
  std::string number_regex;                 // kIntegerType and/or kFractionType
  std::string string_regex;                 // kStringType
  std::vector<SchemaSet> prefix_items;      // kArrayType
  SchemaSet rest_items;
  int64_t min_items = 0;
  int64_t max_items = kUnbounded;
  std::optional<SchemaSet> witness_items;  // `contains`: the item that satisfies it (and items)
  ObjectPlan object;                       // kObjectType
};

struct SetPlan {
  std::vector<ShapePlan> shapes;
  bool satisfiable = false;
  std::string rule;  // its grammar rule, once named
};

class GrammarBuilder {
 public:
  explicit GrammarBuilder(SchemaCompiler& compiler) : compiler_(compiler) {}

  // The grammar text whose `root` matches the values of `root`.
  std::string build(const SchemaSet& root);

  // The longest array or the largest count the grammar writes with {m,n}.
  static constexpr int64_t kMaxRepeat = 10000;
  // Bounds on the length of an array with `contains` are written as one alternative per place
  // of its witness item: at most this many.
  static constexpr int64_t kMaxContainsBound = 64;

 private:
  // json_schema_plan.cpp
  void discover(const SchemaSet& root);
  // A Shape whose objects need a name outside given lists, as Shapes without that need.
  std::vector<Shape> expand_name_requirements(const Shape& shape);
  ShapePlan plan_shape(const Shape& shape);
  bool plan_object(const ObjectShape& object, ObjectPlan& plan);
  void solve_satisfiability();
  bool satisfiable(const SchemaSet& set) const;
  bool shape_satisfiable(const ShapePlan& plan) const;
  bool array_satisfiable(const ShapePlan& plan) const;
  // Items beyond this many cannot be written (a required item's schema has no instance).
  int64_t writable_items(const ShapePlan& plan) const;

  // json_schema_emit.cpp
  std::string write(const SchemaSet& root);
  std::string set_rule(const SchemaSet& set);
  void shape_alternatives(const ShapePlan& plan, const std::string& rule,
                          std::vector<std::string>& out);
  std::string array_expression(const ShapePlan& plan, const std::string& rule);
  std::string contains_expression(const ShapePlan& plan);
  std::string object_expression(const ObjectPlan& plan, const std::string& rule);
  std::string value_literal(const Json& value, int depth);
  std::string terminal(const std::string& regex, const std::string& hint);
  std::string add_rule(const std::string& hint, const std::string& body);
  std::string ws() const;

  SchemaCompiler& compiler_;
  std::map<SchemaSet, SetPlan> sets_;
  std::vector<SchemaSet> order_;                            // discovery order
  std::vector<std::pair<std::string, std::string>> rules_;  // name, body
  std::map<std::string, std::string> terminals_;            // regex -> rule name
  std::map<std::string, int> name_counts_;
  std::map<std::string, size_t> rule_index_;
  std::vector<const SchemaSet*> pending_;  // sets named but not yet written
};

// A GBNF literal ("...") for raw bytes of valid UTF-8.
std::string gbnf_literal(const std::string& text);

}  // namespace llms::structured::jsonschema
