// jinja/builtins: the filters, tests, object methods and global functions templates can call,
// plus the argument-binding helper they share.
//
// Contract: each builtin follows the jinja2 / Python function of the same name as transformers
// configures it (tojson is transformers' json.dumps variant; mutating list/dict methods are
// refused as ImmutableSandboxedEnvironment refuses them). Bad arguments throw EvalError.
// Builtins that build large results charge the interpreter's step budget for them.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "value.h"

namespace llms::jinja {

using FilterFn = Value (*)(Interpreter& interp, const Value& input, CallArgs& args);
using TestFn = bool (*)(Interpreter& interp, const Value& input, CallArgs& args);

FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);

// How attribute lookup resolves a name on a built-in object type.
enum class MethodKind { kNone, kSafe, kUnsafe };
MethodKind method_kind(const Value& obj, std::string_view name);
// A callable bound to `obj` (method_kind must be kSafe).
Value bind_method(const Value& obj, const std::string& name);
Value call_method(Interpreter& interp, const Value& obj, std::string_view name, CallArgs& args);

// Globals: range, dict, namespace, raise_exception, strftime_now. nullopt when unknown.
std::optional<Value> find_global(std::string_view name);

// Binds positional and keyword arguments to parameter names, Python style.
class ArgReader {
 public:
  ArgReader(std::string_view function, CallArgs& args, std::initializer_list<const char*> names);

  // The argument for parameter `index`, or nullptr when not given.
  const Value* get(size_t index) const { return bound_[index]; }
  bool has(size_t index) const { return bound_[index] != nullptr; }

  const Value& required(size_t index) const;
  int64_t get_int(size_t index, int64_t fallback) const;
  bool get_bool(size_t index, bool fallback) const;  // truthiness, as Python filters use it
  std::optional<std::string> get_string(size_t index) const;  // nullopt when absent or None

 private:
  std::string function_;
  std::vector<const char*> names_;
  std::vector<const Value*> bound_;
};

// Python str() of v, failing for undefined only where Python would (never: prints empty).
std::string str_arg(const Value& v);

}  // namespace llms::jinja
