// structured/json_schema_compiler: the state of one JSON Schema compilation, shared by its parts.
//
//   json_schema_normalize.cpp  keywords -> unions of Shapes (allOf meets, anyOf/oneOf unions)
//   json_schema_meet.cpp       the meet of two Shapes
//   json_schema_check.cpp      whether a Shape admits a value; whether two Shapes are disjoint
//   json_schema_strings.cpp    string constraints (lengths, patterns, formats) -> one regex
//   json_schema_plan.cpp       what each reachable Shape emits, and which ones can be satisfied
//   json_schema_emit.cpp       the grammar text (json_schema_grammar.h)
//
// Invariants: every Shape in a union has at least one type; a SchemaSet's Shapes are computed
// once; recursion through `$ref` happens only inside arrays and objects (a cycle that reaches
// no value is refused), so normalizing terminates; every unit of work is charged to the budget.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "structured/json_schema.h"
#include "structured/json_schema_document.h"
#include "structured/json_schema_shape.h"

namespace llms::structured::jsonschema {

// Pointer text for messages: "/" for the root.
inline std::string shown_pointer(const std::string& pointer) {
  return pointer.empty() ? "/" : pointer;
}

// Thrown (and caught) inside analyses that meet a schema still being normalized; never escapes.
struct NormalizationCycle {};

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const JsonSchemaOptions& options, CompileBudget& budget);

  // The grammar text whose root is the document's root schema.
  std::string compile();

  // Normalization (json_schema_normalize.cpp). The union of Shapes of a set, computed once.
  const std::vector<Shape>& shapes_of(const SchemaSet& set);
  const std::vector<Shape>& shapes_of(const SchemaNode* node);
  // The union of Shapes of the values a subschema rejects (json_schema_negate.cpp); refuses
  // naming the keyword when that complement cannot be written.
  const std::vector<Shape>& negation_of(const SchemaNode* node);

  // The meet of two unions, and of two Shapes (json_schema_meet.cpp).
  std::vector<Shape> meet(const std::vector<Shape>& a, const std::vector<Shape>& b);
  std::optional<Shape> meet(const Shape& a, const Shape& b);
  // Cheap checks that prune contradictory alternatives while meeting: an enum value against the
  // number bounds and excluded strings; an object Shape whose required property has no value.
  bool admits_scalar(const Shape& shape, const Json& value);
  bool has_impossible_requirement(const Shape& shape);

  // Checks (json_schema_check.cpp). A check that cannot decide throws llms::Error.
  bool admits(const SchemaSet& set, const Json& value, int depth);
  bool admits(const Shape& shape, const Json& value, int depth);
  // True only when no value satisfies both; false when they may overlap or it is not known.
  bool provably_disjoint(const Shape& a, const Shape& b, int depth);

  // Strings (json_schema_strings.cpp).
  const PatternNode& pattern(const Sourced& source);
  // The regex of a JSON string (with quotes) satisfying `shape`; nullopt when none does.
  // Computed once per constraints (many properties of a schema share a format or a pattern).
  std::optional<std::string> string_regex(const StringShape& shape, StringSpelling spelling);
  std::optional<std::string> compute_string_regex(const StringShape& shape,
                                                  StringSpelling spelling);
  // The language of a format as a pattern; throws naming it when the format is unknown.
  const PatternNode* format_pattern(const Sourced& format);
  // JSON string contents whose decoded value is none of `excluded`, computed once per list
  // (the objects of a oneOf exclude the same declared names again and again).
  const std::string& strings_except(const std::vector<std::string>& excluded,
                                    StringSpelling spelling);

  // The effective schema of a property name in an object Shape.
  SchemaSet property_schema(const ObjectShape& object, const std::string& name);

  const JsonSchemaOptions& options() const { return options_; }
  CompileBudget& budget() { return budget_; }
  SchemaDocument& document() { return document_; }

  [[noreturn]] static void refuse(const std::string& message);
  [[noreturn]] static void refuse_keyword(const std::string& keyword, const std::string& pointer,
                                          const std::string& why = {});

 private:
  std::vector<Shape> normalize(const SchemaNode& node);
  friend class ShapeNormalizer;
  friend class ShapeNegator;
  // Runs `compute` for `node` with cycle and depth guards shared by normalizing and negating.
  template <typename Compute>
  const std::vector<Shape>& memoized(
      const SchemaNode* node, std::unordered_map<const SchemaNode*, std::vector<Shape>>& memo,
      std::unordered_set<const SchemaNode*>& in_progress, Compute compute);

  const JsonSchemaOptions options_;
  CompileBudget& budget_;
  SchemaDocument document_;
  std::map<SchemaSet, std::vector<Shape>> set_shapes_;
  std::set<SchemaSet> sets_in_progress_;
  int set_depth_ = 0;
  std::unordered_map<const SchemaNode*, std::vector<Shape>> node_shapes_;
  std::unordered_set<const SchemaNode*> in_progress_;
  std::unordered_map<const SchemaNode*, std::vector<Shape>> node_negations_;
  std::unordered_set<const SchemaNode*> negations_in_progress_;
  int normalize_depth_ = 0;
  int analysis_depth_ = 0;  // > 0 while a check runs: a cycle then means "cannot tell"
  std::unordered_map<std::string, std::unique_ptr<PatternNode>> patterns_;
  std::unordered_map<std::string, std::unique_ptr<PatternNode>> formats_;
  std::map<std::pair<StringSpelling, std::vector<std::string>>, std::string> strings_except_;
  std::unordered_map<std::string, std::optional<std::string>> string_regexes_;
};

template <typename Compute>
const std::vector<Shape>& SchemaCompiler::memoized(
    const SchemaNode* node, std::unordered_map<const SchemaNode*, std::vector<Shape>>& memo,
    std::unordered_set<const SchemaNode*>& in_progress, Compute compute) {
  constexpr int kMaxCompositionDepth = 64;
  auto found = memo.find(node);
  if (found != memo.end()) return found->second;
  if (in_progress.count(node)) {
    if (analysis_depth_ > 0) throw NormalizationCycle{};
    refuse("JSON Schema: the schema at " + shown_pointer(node->pointer) +
           " refers to itself without an array or object in between (an infinite '$ref' loop)");
  }
  if (normalize_depth_ >= kMaxCompositionDepth) {
    refuse("JSON Schema: '$ref', allOf, anyOf, oneOf, not or if nest deeper than " +
           std::to_string(kMaxCompositionDepth) + " levels at " + shown_pointer(node->pointer));
  }
  budget_.charge(1, "JSON Schema normalizations");
  in_progress.insert(node);
  ++normalize_depth_;
  std::vector<Shape> shapes;
  try {
    shapes = compute();
  } catch (...) {
    in_progress.erase(node);
    --normalize_depth_;
    throw;
  }
  in_progress.erase(node);
  --normalize_depth_;
  return memo.emplace(node, std::move(shapes)).first->second;
}

// JSON string contents whose decoded value is none of `excluded` (json_schema_strings.cpp).
std::string strings_except_regex(const std::vector<std::string>& excluded, StringSpelling spelling,
                                 CompileBudget& budget);

}  // namespace llms::structured::jsonschema
