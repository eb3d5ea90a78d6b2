// jinja/value: the dynamic value model of the interpreter, shaped after the Python objects that
// jinja2 templates see under Hugging Face's ImmutableSandboxedEnvironment.
//
// Invariants:
//  - A Value is cheap to copy: scalars inline, everything else behind one shared_ptr.
//  - Strings are UTF-8 bytes; Python semantics (length, indexing) are applied in code points by
//    the helpers in pystr.h. Lists, tuples and dicts are immutable once built (the sandbox forbids
//    mutating methods), so sharing them is safe. Namespaces are the only mutable objects.
//  - Lists and dicts record their nesting depth at construction and refuse to exceed
//    kMaxValueDepth, so printing, comparing and destroying a value never recurse without bound.
//  - Helpers here throw EvalError (no location); the interpreter adds the template location.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace llms::jinja {

// Deepest allowed nesting of lists/dicts (also bounds JSON input conversion).
inline constexpr uint32_t kMaxValueDepth = 256;

// A runtime error without a location yet; the interpreter attaches line/column.
class EvalError : public std::runtime_error {
 public:
  explicit EvalError(const std::string& message) : std::runtime_error(message) {}
};

class Value;
class Interpreter;
struct ListObj;
class DictObj;

// What Python object a list-kind Value stands for. jinja2 filters such as map/select return
// generators and dict.items() returns a view; templates can observe the difference (a generator
// is always truthy and has no len(); neither is JSON-serializable), so it is kept.
enum class SeqFlavor : uint8_t { kList, kTuple, kIterator, kKeys, kValues, kItems };
struct NamespaceObj;
class CallableObj;

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,  // list, tuple, generator or dict view (ListObj::flavor)
    kDict,
    kNamespace,
    kCallable,
  };

  Value() = default;  // undefined without hint

  // `hint` explains why it is undefined ("'x' is undefined"); used when it is misused.
  static Value undefined(std::string hint);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double d);
  static Value string(std::string s);
  static Value list(std::vector<Value> items, bool is_tuple = false);  // throws when too deep
  static Value sequence(std::vector<Value> items, SeqFlavor flavor);
  static Value failed_generator(std::string error);
  static Value dict(DictObj d);
  static Value new_namespace();
  static Value callable(std::shared_ptr<CallableObj> fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  // Python's bool is an int subclass: True + 1 == 2.
  bool is_intlike() const { return kind_ == Kind::kInt || kind_ == Kind::kBool; }
  bool is_numeric() const { return is_intlike() || kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const;
  bool is_sequence() const;  // a real list or tuple: indexable, sliceable, JSON-serializable
  bool is_iterator() const;  // a generator: always truthy, no len(), consumed by iteration
  SeqFlavor flavor() const;
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool as_bool() const { return scalar_.b; }
  int64_t as_int() const { return kind_ == Kind::kBool ? (scalar_.b ? 1 : 0) : scalar_.i; }
  double as_double() const {
    return kind_ == Kind::kFloat ? scalar_.f : static_cast<double>(as_int());
  }
  const std::string& as_string() const { return *static_cast<const std::string*>(obj_.get()); }
  const std::string& undefined_hint() const;
  const ListObj& list_obj() const { return *static_cast<const ListObj*>(obj_.get()); }
  const std::vector<Value>& items() const;
  const DictObj& dict_obj() const { return *static_cast<const DictObj*>(obj_.get()); }
  NamespaceObj& namespace_obj() const { return *static_cast<NamespaceObj*>(obj_.get()); }
  CallableObj& callable_obj() const { return *static_cast<CallableObj*>(obj_.get()); }
  const std::shared_ptr<void>& object_ptr() const { return obj_; }

  // Nesting depth contributed to a container that holds this value.
  uint32_t depth() const;

 private:
  Kind kind_ = Kind::kUndefined;
  union {
    bool b;
    int64_t i;
    double f;
  } scalar_{};
  std::shared_ptr<void>
      obj_;  // string, undefined hint, ListObj, DictObj, NamespaceObj, CallableObj
};

struct ListObj {
  std::vector<Value> items;
  SeqFlavor flavor = SeqFlavor::kList;
  uint32_t depth = 1;
  // Generators only: items before `cursor` were consumed. Mutated during a render, which is
  // single-threaded; generators never outlive it.
  mutable size_t cursor = 0;
  // Generators only: the error a jinja2 generator would raise when first consumed (its filter
  // failed, e.g. map over an integer); never raised if the template never iterates it.
  std::shared_ptr<const std::string> pending_error;
};

// Insertion-ordered mapping like a Python dict. String keys are indexed by hash; other keys
// (rare: ints in template literals) are found by linear scan.
class DictObj {
 public:
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(const Value& key, Value value);
  void clear();
  size_t size() const { return entries_.size(); }
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  uint32_t depth() const { return depth_; }

 private:
  std::vector<std::pair<Value, Value>> entries_;
  std::unordered_map<std::string, size_t> string_index_;
  uint32_t depth_ = 1;
};

struct NamespaceObj {
  DictObj attrs;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

class CallableObj {
 public:
  virtual ~CallableObj() = default;
  virtual Value call(Interpreter& interp, CallArgs& args) = 0;
  virtual std::string name() const = 0;
};

inline SeqFlavor Value::flavor() const { return list_obj().flavor; }
inline bool Value::is_tuple() const {
  return kind_ == Kind::kList && list_obj().flavor == SeqFlavor::kTuple;
}
inline bool Value::is_sequence() const {
  return kind_ == Kind::kList &&
         (list_obj().flavor == SeqFlavor::kList || list_obj().flavor == SeqFlavor::kTuple);
}
inline bool Value::is_iterator() const {
  return kind_ == Kind::kList && list_obj().flavor == SeqFlavor::kIterator;
}
inline const std::vector<Value>& Value::items() const { return list_obj().items; }

// The longest string repr() / tojson may build on this thread: a render sets it to its output
// cap, because a small value can print enormously ([l] * 1000 shares one big list).
class StringLimitScope {
 public:
  explicit StringLimitScope(size_t max_bytes);
  ~StringLimitScope();
  StringLimitScope(const StringLimitScope&) = delete;
  StringLimitScope& operator=(const StringLimitScope&) = delete;
  static size_t current();

 private:
  size_t saved_;
};

// ---- Python semantics (value.cpp) ----

bool truthy(const Value& v);
// Python str(v) as jinja2 prints it (undefined prints empty).
std::string to_str(const Value& v);
// Python repr(v).
std::string repr(const Value& v);
// Python repr of a float ("1.0", "1e-05", "inf").
std::string format_float(double d);
// "str", "int", "dict", ... as Python names the type (for error messages).
std::string type_name(const Value& v);
// jinja2's object_type_repr: "'dict object'", "'None'".
std::string object_type_repr(const Value& v);
// Python ==.
bool equals(const Value& a, const Value& b);
// Python ordering for < <= > >=; throws EvalError when the types do not order.
// Returns negative/zero/positive.
int compare(const Value& a, const Value& b, std::string_view op);
// Throws EvalError naming the undefined value (used when an undefined is misused).
[[noreturn]] void fail_undefined(const Value& v);

}  // namespace llms::jinja
