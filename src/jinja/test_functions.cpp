// jinja/test_functions: jinja2's built-in tests (`x is defined`, `n is divisibleby 3`, ...), with
// the operator aliases (==, <, ...) that selectattr/select accept as test names.
#include <unordered_map>

#include "builtins.h"
#include "interpreter.h"
#include "ops.h"
#include "pystr.h"

namespace llms::jinja {

namespace {
bool t_defined(Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }
bool t_boolean(Interpreter&, const Value& v, CallArgs&) { return v.is_bool(); }
bool t_true(Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }
bool t_false(Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }
bool t_integer(Interpreter&, const Value& v, CallArgs&) { return v.is_int(); }
bool t_float(Interpreter&, const Value& v, CallArgs&) { return v.is_float(); }
bool t_number(Interpreter&, const Value& v, CallArgs&) { return v.is_numeric(); }
bool t_string(Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }
bool t_mapping(Interpreter&, const Value& v, CallArgs&) { return v.is_dict(); }
bool t_callable(Interpreter&, const Value& v, CallArgs&) { return v.is_callable(); }
bool t_iterable(Interpreter&, const Value& v, CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}
bool t_sequence(Interpreter& i, const Value& v, CallArgs& a) {
  return !v.is_iterator() && t_iterable(i, v, a);
}
bool t_escaped(Interpreter&, const Value&, CallArgs&) { return false; }

const Value& one_arg(CallArgs& args, const char* test) {
  ArgReader r(test, args, {"other"});
  return r.required(0);
}

bool t_eq(Interpreter&, const Value& v, CallArgs& a) { return equals(v, one_arg(a, "eq")); }
bool t_ne(Interpreter&, const Value& v, CallArgs& a) { return !equals(v, one_arg(a, "ne")); }
bool t_lt(Interpreter&, const Value& v, CallArgs& a) {
  return compare(v, one_arg(a, "lt"), "<") == -1;
}
bool t_le(Interpreter&, const Value& v, CallArgs& a) {
  const int c = compare(v, one_arg(a, "le"), "<=");
  return c == -1 || c == 0;
}
bool t_gt(Interpreter&, const Value& v, CallArgs& a) {
  return compare(v, one_arg(a, "gt"), ">") == 1;
}
bool t_ge(Interpreter&, const Value& v, CallArgs& a) {
  const int c = compare(v, one_arg(a, "ge"), ">=");
  return c == 1 || c == 0;
}
bool t_in(Interpreter& i, const Value& v, CallArgs& a) { return i.contains(one_arg(a, "in"), v); }
bool t_sameas(Interpreter&, const Value& v, CallArgs& a) {
  const Value& other = one_arg(a, "sameas");
  if (v.kind() != other.kind()) return false;
  if (v.object_ptr() || other.object_ptr()) return v.object_ptr() == other.object_ptr();
  return equals(v, other);
}

bool t_odd(Interpreter& i, const Value& v, CallArgs& a) {
  ArgReader("odd", a, {});
  return equals(binary_op(i, BinOp::kMod, v, Value::integer(2)), Value::integer(1));
}
bool t_even(Interpreter& i, const Value& v, CallArgs& a) {
  ArgReader("even", a, {});
  return equals(binary_op(i, BinOp::kMod, v, Value::integer(2)), Value::integer(0));
}
bool t_divisibleby(Interpreter& i, const Value& v, CallArgs& a) {
  return equals(binary_op(i, BinOp::kMod, v, one_arg(a, "divisibleby")), Value::integer(0));
}
bool t_lower(Interpreter&, const Value& v, CallArgs&) {
  const std::string s = to_str(v);
  return pystr::lower(s) == s && pystr::upper(s) != s;
}
bool t_upper(Interpreter&, const Value& v, CallArgs&) {
  const std::string s = to_str(v);
  return pystr::upper(s) == s && pystr::lower(s) != s;
}
bool t_filter(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() && find_filter(v.as_string()) != nullptr;
}
bool t_test(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() && find_test(v.as_string()) != nullptr;
}

const std::unordered_map<std::string_view, TestFn>& test_table() {
  static const std::unordered_map<std::string_view, TestFn> table = {
      {"defined", t_defined},
      {"undefined", t_undefined},
      {"none", t_none},
      {"boolean", t_boolean},
      {"true", t_true},
      {"false", t_false},
      {"integer", t_integer},
      {"float", t_float},
      {"number", t_number},
      {"string", t_string},
      {"mapping", t_mapping},
      {"callable", t_callable},
      {"iterable", t_iterable},
      {"sequence", t_sequence},
      {"escaped", t_escaped},
      {"eq", t_eq},
      {"equalto", t_eq},
      {"==", t_eq},
      {"ne", t_ne},
      {"!=", t_ne},
      {"lt", t_lt},
      {"lessthan", t_lt},
      {"<", t_lt},
      {"le", t_le},
      {"<=", t_le},
      {"gt", t_gt},
      {"greaterthan", t_gt},
      {">", t_gt},
      {"ge", t_ge},
      {">=", t_ge},
      {"in", t_in},
      {"sameas", t_sameas},
      {"odd", t_odd},
      {"even", t_even},
      {"divisibleby", t_divisibleby},
      {"lower", t_lower},
      {"upper", t_upper},
      {"filter", t_filter},
      {"test", t_test},
  };
  return table;
}

}  // namespace

TestFn find_test(std::string_view name) {
  const auto& table = test_table();
  const auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

}  // namespace llms::jinja
