// jinja/parser: tokens -> Program, with jinja2's grammar and operator precedence.
//
// Contract: recursion is bounded by `max_depth` (nesting of expressions and blocks); deeper input
// is an llms::Error, as is any syntax error, always with line and column. Supported tags: if/elif/
// else, for (else, `if` filter, break/continue), set (and block set), macro, call, filter, with,
// print, raw, generation. Template inheritance and includes are refused: chat templates are
// single strings.
#pragma once

#include <cstdint>
#include <string_view>

#include "ast.h"

namespace llms::jinja {

Program parse_program(std::string_view source, uint32_t max_depth);

}  // namespace llms::jinja
