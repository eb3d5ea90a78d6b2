// jinja/ops: Python arithmetic and slicing on Values (+ - * / // % ** and unary minus), with
// 64-bit integers: an integer result that would need Python's big integers is an error instead.
#pragma once

#include <optional>

#include "ast.h"
#include "value.h"

namespace llms::jinja {

Value binary_op(Interpreter& interp, BinOp op, const Value& a, const Value& b);
Value negate(const Value& v);
Value positive(const Value& v);

// Python slice of a list, tuple or string; absent bounds are nullopt.
Value slice_value(Interpreter& interp, const Value& obj, const Value& start, const Value& stop,
                  const Value& step);

// Python "%" string formatting (the subset %s %r %d %i %f %x %% with flags/width/precision).
// The result is bounded by the interpreter's output cap.
std::string percent_format(Interpreter& interp, const std::string& format, const Value& args);

}  // namespace llms::jinja
