// structured/regex_parser: the ECMA-262 subset that JSON Schema `pattern` uses, parsed into
// grammar expressions (never a backtracking matcher: the result compiles to an automaton).
//
// Supported: literal code points; escapes \d \D \w \W \s \S \n \r \t \f \v \0 \cX \xHH \uHHHH
// (surrogate pairs combined) \u{H...} and escaped punctuation; `.` (any code point but \n);
// classes [...] / [^...] with ranges and \d \w \s inside; groups ( ) (?: ) (?<name> );
// alternation; quantifiers * + ? {m} {m,} {m,n} and their lazy forms (same language). `^` only
// at the very start and `$` only at the very end. Refused with an error naming the construct and
// its byte offset: other anchors, backreferences, lookaround, \b \B, \p{..}, unknown escapes,
// counts over kMaxRepeat, nesting deeper than kMaxNesting.
#pragma once

#include <cstdint>
#include <string_view>

#include "grammar_ast.h"
#include "structured/compile_budget.h"

namespace llms::structured {

// Parses `pattern` into arena nodes and returns the root expression. Throws
// llms::Error(kInvalidArgument) "regex: <problem> at offset N".
int32_t parse_regex(std::string_view pattern, ExprArena& arena, CompileBudget& budget);

}  // namespace llms::structured
