// structured/json_schema: JSON Schema -> grammar text (the format of docs/STRUCTURED.md).
//
// Contract: the grammar's `root` matches a JSON text only if the schema accepts the value it
// denotes (soundness is absolute; the one caveat: a text repeating a name among an object's
// additional properties counts it twice for minProperties, where parsers keep one value). It
// matches every valid value written the way the options say
// (whitespace, key order, number and string spellings below), except the documented gaps. A
// keyword that cannot be enforced exactly is refused with llms::Error(kInvalidArgument) naming the
// keyword and its JSON pointer ("unsupported JSON Schema keyword 'uniqueItems' at /properties/x");
// nothing is silently dropped. All work is charged to the CompileBudget.
//
// How values are written (a valid value written otherwise is rejected; all of these are sound
// restrictions, never relaxations):
//   - objects: the properties in the order of the schema's `properties` (after merging allOf and
//     $ref: the schema object's own first, then each subschema's new names in document order),
//     optional ones skipped, then names required but not declared, then other names (additional
//     or pattern properties); an `enum`/`const` object in its own key order.
//   - whitespace: per `whitespace`, between tokens only, never before or after the root value.
//   - strings with minLength/maxLength, enum/const strings and declared property names: one
//     spelling per character, the canonical one (raw UTF-8, the short escapes \" \\ \b \f \n \r
//     \t, \u00XX in lowercase for other control characters); other property names: raw, \" or
//     \\ (no control characters); other strings (free text, pattern, format): any RFC 8259
//     spelling unless `any_string_escape` is false. Escaped lone surrogates are never produced.
//   - integers: `-?(0|[1-9][0-9]*)` (no fraction, no exponent, no "-0"); numbers with a bound: no
//     exponent; numbers without one: the full JSON syntax.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "structured/compile_budget.h"

namespace llms::structured {

struct JsonSchemaOptions {
  enum class Whitespace {
    kFlexible,  // JSON's [ \t\n\r] between tokens, at most `max_whitespace` bytes a run
    kCompact,   // none at all: {"a":1,"b":[1,2]}
  };
  Whitespace whitespace = Whitespace::kFlexible;
  // Bound on one run of flexible whitespace, so that a model cannot loop on newlines.
  int max_whitespace = 20;

  // JSON Schema's default: an object may carry properties its schema does not name unless
  // `additionalProperties` says otherwise. false forbids them when the keyword is absent (OpenAI's
  // strict mode); sound either way.
  bool allow_additional_properties_by_default = true;

  // Free strings may use any RFC 8259 escape (\u00e9 for é, \ud83d\ude00 for an emoji, \/).
  // false: only the canonical spelling, which makes smaller automata.
  bool any_string_escape = true;

  // An unknown `format` is refused (it may assert something we cannot check). true treats it as
  // an annotation, as JSON Schema 2019-09+ does by default: sound only for validators that do not
  // assert formats, hence off.
  bool ignore_unknown_formats = false;

  // `maxLength` above this many code points is lowered to it (a sound restriction: longer valid
  // strings are rejected); `minLength` above it is refused. Keeps string automata bounded.
  int64_t max_string_length = 10000;
};

// Grammar text whose `root` matches the JSON texts valid under `schema`, written as described
// above. Key order comes from the ordered JSON; see the nlohmann::json overload otherwise.
std::string json_schema_to_grammar(const nlohmann::ordered_json& schema,
                                   const JsonSchemaOptions& options, CompileBudget& budget);

// The same for an unordered document: properties follow nlohmann::json's (alphabetical) order.
std::string json_schema_to_grammar(const nlohmann::json& schema, const JsonSchemaOptions& options,
                                   CompileBudget& budget);

// `instance` with every object's keys in the order the grammar of `schema` writes them: those of
// the first alternative that admits the object, declared properties first, then the others in
// their own order (an enum/const object: its own order). Values are unchanged. For tests, and
// for showing a model an example it may copy. Throws like json_schema_to_grammar.
nlohmann::ordered_json order_keys_like_grammar(const nlohmann::ordered_json& schema,
                                               const nlohmann::ordered_json& instance,
                                               const JsonSchemaOptions& options = {});

// Grammar text whose `root` matches any JSON object (response_format: json_object).
std::string any_json_object_grammar(const JsonSchemaOptions& options);

}  // namespace llms::structured
