// structured/grammar_parser: the GBNF grammar text format (llama.cpp's, plus /regex/ terminals)
// parsed into a Grammar whose rule references are resolved.
//
// Format: `name ::= alternatives`, names [a-zA-Z_][a-zA-Z0-9_-]*, start rule `root`; a rule ends
// where the next `name ::=` begins; `"literal"` and `[class]` with escapes \" \\ \n \r \t \/ \xHH
// \uHHHH \UHHHHHHHH (code points, matched as UTF-8) and \] \- \^ \[; `.` any code point; `( )`,
// `|`, postfix `* + ? {m} {m,} {m,n}` (m, n <= kMaxRepeat); `/regex/` (regex_parser.h syntax,
// `\/` a literal slash); `#` comments. References may precede definitions and may recurse (left
// recursion included).
//
// Errors: llms::Error(kInvalidArgument) "grammar: <problem> at line L:C" (columns count bytes),
// for syntax, undefined or duplicate rules, a missing root, nesting over kMaxNesting.
#pragma once

#include <string_view>

#include "grammar_ast.h"
#include "structured/compile_budget.h"

namespace llms::structured {

Grammar parse_gbnf(std::string_view text, CompileBudget& budget);

// "line L:C" of a byte offset in text (1-based).
std::string line_column(std::string_view text, size_t offset);

}  // namespace llms::structured
