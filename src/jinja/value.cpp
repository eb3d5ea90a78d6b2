// jinja/value: construction, printing (Python str/repr), equality and ordering of Values.
//
// Recursive helpers carry a depth counter and fail past a fixed limit, because namespaces (the
// one mutable object) can chain or even contain themselves.
#include "value.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "pystr.h"
#include "util/utf8.h"

namespace llms::jinja {

namespace {

constexpr uint32_t kMaxRecursion = 2 * kMaxValueDepth;

void check_recursion(uint32_t depth) {
  if (depth > kMaxRecursion) throw EvalError("value nesting too deep to process");
}

thread_local size_t t_string_limit = SIZE_MAX;

void check_length(const std::string& out) {
  if (out.size() > t_string_limit) {
    throw EvalError("template string exceeds the output limit of " +
                    std::to_string(t_string_limit) + " bytes");
  }
}

}  // namespace

StringLimitScope::StringLimitScope(size_t max_bytes) : saved_(t_string_limit) {
  t_string_limit = max_bytes;
}
StringLimitScope::~StringLimitScope() { t_string_limit = saved_; }
size_t StringLimitScope::current() { return t_string_limit; }

namespace {}  // namespace

// ---- DictObj ----

const Value* DictObj::find(std::string_view key) const {
  const auto it = string_index_.find(std::string(key));
  return it == string_index_.end() ? nullptr : &entries_[it->second].second;
}

const Value* DictObj::find(const Value& key) const {
  if (key.is_string()) return find(key.as_string());
  for (const auto& [k, v] : entries_) {
    if (!k.is_string() && equals(k, key)) return &v;
  }
  return nullptr;
}

void DictObj::set(const Value& key, Value value) {
  depth_ = std::max(depth_, 1 + std::max(key.depth(), value.depth()));
  if (key.is_string()) {
    const auto [it, inserted] = string_index_.emplace(key.as_string(), entries_.size());
    if (!inserted) {
      entries_[it->second].second = std::move(value);
      return;
    }
    entries_.emplace_back(key, std::move(value));
    return;
  }
  for (auto& [k, v] : entries_) {
    if (!k.is_string() && equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries_.emplace_back(key, std::move(value));
}

void DictObj::clear() {
  entries_.clear();
  string_index_.clear();
  depth_ = 1;
}

// ---- Value ----

Value Value::undefined(std::string hint) {
  Value v;
  if (!hint.empty()) v.obj_ = std::make_shared<std::string>(std::move(hint));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.scalar_.b = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.scalar_.i = i;
  return v;
}

Value Value::number(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.scalar_.f = d;
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.obj_ = std::make_shared<std::string>(std::move(s));
  return v;
}

Value Value::list(std::vector<Value> items, bool is_tuple) {
  return sequence(std::move(items), is_tuple ? SeqFlavor::kTuple : SeqFlavor::kList);
}

Value Value::sequence(std::vector<Value> items, SeqFlavor flavor) {
  uint32_t depth = 1;
  for (const Value& item : items) depth = std::max(depth, 1 + item.depth());
  if (depth > kMaxValueDepth) throw EvalError("list nesting exceeds the limit");
  auto obj = std::make_shared<ListObj>();
  obj->items = std::move(items);
  obj->flavor = flavor;
  obj->depth = depth;
  Value v;
  v.kind_ = Kind::kList;
  v.obj_ = std::move(obj);
  return v;
}

Value Value::failed_generator(std::string error) {
  Value v = sequence({}, SeqFlavor::kIterator);
  std::static_pointer_cast<ListObj>(v.obj_)->pending_error =
      std::make_shared<const std::string>(std::move(error));
  return v;
}

Value Value::dict(DictObj d) {
  if (d.depth() > kMaxValueDepth) throw EvalError("dict nesting exceeds the limit");
  Value v;
  v.kind_ = Kind::kDict;
  v.obj_ = std::make_shared<DictObj>(std::move(d));
  return v;
}

Value Value::new_namespace() {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.obj_ = std::make_shared<NamespaceObj>();
  return v;
}

Value Value::callable(std::shared_ptr<CallableObj> fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.obj_ = std::move(fn);
  return v;
}

const std::string& Value::undefined_hint() const {
  static const std::string kEmpty;
  return obj_ ? *static_cast<const std::string*>(obj_.get()) : kEmpty;
}

uint32_t Value::depth() const {
  if (kind_ == Kind::kList) return list_obj().depth;
  if (kind_ == Kind::kDict) return dict_obj().depth();
  return kind_ == Kind::kNamespace ? 1 : 0;
}

// ---- Python semantics ----

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return v.as_bool();
    case Value::Kind::kInt:
      return v.as_int() != 0;
    case Value::Kind::kFloat:
      return v.as_double() != 0.0;
    case Value::Kind::kString:
      return !v.as_string().empty();
    case Value::Kind::kList:
      return v.is_iterator() || !v.items().empty();
    case Value::Kind::kDict:
      return v.dict_obj().size() != 0;
    case Value::Kind::kNamespace:
    case Value::Kind::kCallable:
      return true;
  }
  return false;
}

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
  std::string out;
  if (!sci.empty() && sci[0] == '-') {
    out.push_back('-');
    sci.remove_prefix(1);
  }
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits.push_back(c);
  }
  int exp10 = 0;
  std::from_chars(sci.data() + e_pos + 1 + (sci[e_pos + 1] == '+' ? 1 : 0), sci.data() + sci.size(),
                  exp10);
  const int decpt = exp10 + 1;  // value = 0.DIGITS * 10^decpt
  const int n = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {
    out.push_back(digits[0]);
    if (n > 1) {
      out.push_back('.');
      out.append(digits, 1, std::string::npos);
    }
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out.append(ebuf);
  } else if (decpt <= 0) {
    out.append("0.");
    out.append(static_cast<size_t>(-decpt), '0');
    out.append(digits);
  } else if (decpt < n) {
    out.append(digits, 0, static_cast<size_t>(decpt));
    out.push_back('.');
    out.append(digits, static_cast<size_t>(decpt), std::string::npos);
  } else {
    out.append(digits);
    out.append(static_cast<size_t>(decpt - n), '0');
    out.append(".0");
  }
  return out;
}

namespace {

// Approximates Python's str.isprintable for non-ASCII code points.
bool is_printable(uint32_t cp) {
  if (cp >= 0x80 && cp <= 0xA0) return false;
  if (cp == 0xAD || cp == 0x061C || cp == 0x06DD || cp == 0x070F || cp == 0x1680 || cp == 0x180E ||
      cp == 0x3000 || cp == 0xFEFF)
    return false;
  if ((cp >= 0x0600 && cp <= 0x0605) || (cp >= 0x2000 && cp <= 0x200F) ||
      (cp >= 0x2028 && cp <= 0x202F) || (cp >= 0x205F && cp <= 0x2064) ||
      (cp >= 0x2066 && cp <= 0x206F) || (cp >= 0xD800 && cp <= 0xF8FF) ||
      (cp >= 0xFFF9 && cp <= 0xFFFB) || cp == 0xFFFE || cp == 0xFFFF || cp >= 0xF0000 ||
      (cp >= 0xE0000 && cp <= 0xE007F))
    return false;
  return true;
}

void repr_string(std::string& out, std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  out.push_back(quote);
  for (size_t i = 0; i < s.size();) {
    const uint32_t cp = pystr::decode(s, i);
    char buf[16];
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      out.append("\\n");
    } else if (cp == '\r') {
      out.append("\\r");
    } else if (cp == '\t') {
      out.append("\\t");
    } else if (cp < 0x20 || cp == 0x7F) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", cp);
      out.append(buf);
    } else if (cp < 0x7F || is_printable(cp)) {
      append_utf8(cp, out);
    } else {
      if (cp < 0x100) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", cp);
      } else if (cp < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
      } else {
        std::snprintf(buf, sizeof(buf), "\\U%08x", cp);
      }
      out.append(buf);
    }
  }
  out.push_back(quote);
}

void repr_into(std::string& out, const Value& v, uint32_t depth);

void repr_dict_body(std::string& out, const DictObj& d, uint32_t depth) {
  out.push_back('{');
  bool first = true;
  for (const auto& [k, item] : d.entries()) {
    if (!first) out.append(", ");
    first = false;
    repr_into(out, k, depth + 1);
    out.append(": ");
    repr_into(out, item, depth + 1);
  }
  out.push_back('}');
}

void repr_into(std::string& out, const Value& v, uint32_t depth) {
  check_recursion(depth);
  check_length(out);
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      out.append("Undefined");
      return;
    case Value::Kind::kString:
      repr_string(out, v.as_string());
      return;
    case Value::Kind::kList: {
      const SeqFlavor flavor = v.flavor();
      if (flavor == SeqFlavor::kIterator) {
        out.append("<generator object>");
        return;
      }
      if (flavor != SeqFlavor::kList && flavor != SeqFlavor::kTuple) {
        out.append(type_name(v));
        out.push_back('(');
        repr_into(out, Value::list(v.items()), depth + 1);
        out.push_back(')');
        return;
      }
      const bool tuple = v.is_tuple();
      out.push_back(tuple ? '(' : '[');
      const auto& items = v.items();
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out.append(", ");
        repr_into(out, items[k], depth + 1);
      }
      if (tuple && items.size() == 1) out.push_back(',');
      out.push_back(tuple ? ')' : ']');
      return;
    }
    case Value::Kind::kDict:
      repr_dict_body(out, v.dict_obj(), depth);
      return;
    case Value::Kind::kNamespace:
      out.append("<Namespace ");
      repr_dict_body(out, v.namespace_obj().attrs, depth);
      out.push_back('>');
      return;
    default:
      out.append(to_str(v));
      return;
  }
}

}  // namespace

std::string repr(const Value& v) {
  std::string out;
  repr_into(out, v, 0);
  return out;
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return v.as_bool() ? "True" : "False";
    case Value::Kind::kInt:
      return std::to_string(v.as_int());
    case Value::Kind::kFloat:
      return format_float(v.as_double());
    case Value::Kind::kString:
      return v.as_string();
    case Value::Kind::kCallable:
      return "<function " + v.callable_obj().name() + ">";
    default:
      return repr(v);
  }
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kNone:
      return "NoneType";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return "str";
    case Value::Kind::kList:
      switch (v.flavor()) {
        case SeqFlavor::kList:
          return "list";
        case SeqFlavor::kTuple:
          return "tuple";
        case SeqFlavor::kIterator:
          return "generator";
        case SeqFlavor::kKeys:
          return "dict_keys";
        case SeqFlavor::kValues:
          return "dict_values";
        case SeqFlavor::kItems:
          return "dict_items";
      }
      return "list";
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kNamespace:
      return "Namespace";
    case Value::Kind::kCallable:
      return "function";
  }
  return "object";
}

std::string object_type_repr(const Value& v) {
  if (v.is_none()) return "'None'";
  return "'" + type_name(v) + " object'";
}

namespace {

bool numeric_equals(const Value& a, const Value& b) {
  if (a.is_intlike() && b.is_intlike()) return a.as_int() == b.as_int();
  const double x = a.as_double();
  const double y = b.as_double();
  if (a.is_float() && b.is_float()) return x == y;
  // int vs float: equal only if the float is integral and converts exactly.
  const Value& i = a.is_float() ? b : a;
  const double f = a.is_float() ? x : y;
  if (!(f >= -9.2233720368547758e18 && f < 9.2233720368547758e18)) return false;
  if (std::trunc(f) != f) return false;
  return static_cast<int64_t>(f) == i.as_int();
}

bool equals_at(const Value& a, const Value& b, uint32_t depth) {
  check_recursion(depth);
  if (a.is_numeric() && b.is_numeric()) return numeric_equals(a, b);
  if (a.kind() != b.kind()) return false;
  // Identity implies equality for containers (Python's list comparison takes the same shortcut),
  // which keeps comparing structures that share parts linear in what is distinct.
  if (a.object_ptr() && a.object_ptr() == b.object_ptr() && a.kind() != Value::Kind::kString) {
    return true;
  }
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      if (a.flavor() != b.flavor()) return false;
      const auto& x = a.items();
      const auto& y = b.items();
      if (a.flavor() == SeqFlavor::kIterator || a.flavor() == SeqFlavor::kValues) {
        return a.object_ptr() == b.object_ptr();  // compared by identity in Python
      }
      if (x.size() != y.size()) return false;
      if (x.size() > 4096 && a.flavor() != SeqFlavor::kList && a.flavor() != SeqFlavor::kTuple) {
        throw EvalError("dict view comparison too large");
      }
      if (a.flavor() == SeqFlavor::kKeys || a.flavor() == SeqFlavor::kItems) {
        for (const Value& item : x) {  // set-like comparison
          bool found = false;
          for (const Value& other : y) found = found || equals_at(item, other, depth + 1);
          if (!found) return false;
        }
        return true;
      }
      for (size_t k = 0; k < x.size(); ++k) {
        if (!equals_at(x[k], y[k], depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const DictObj& x = a.dict_obj();
      const DictObj& y = b.dict_obj();
      if (x.size() != y.size()) return false;
      for (const auto& [k, item] : x.entries()) {
        const Value* other = y.find(k);
        if (!other || !equals_at(item, *other, depth + 1)) return false;
      }
      return true;
    }
    default:
      return a.object_ptr() == b.object_ptr();
  }
}

// -1, 0, 1, or 2 when unordered (NaN).
int compare_at(const Value& a, const Value& b, std::string_view op, uint32_t depth) {
  check_recursion(depth);
  if (a.is_numeric() && b.is_numeric()) {
    if (a.is_intlike() && b.is_intlike()) {
      return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
    }
    const double x = a.as_double();
    const double y = b.as_double();
    if (x < y) return -1;
    if (x > y) return 1;
    return x == y ? 0 : 2;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_sequence() && b.is_sequence() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (!equals_at(x[k], y[k], depth + 1)) return compare_at(x[k], y[k], op, depth + 1);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  throw EvalError("'" + std::string(op) + "' not supported between instances of '" + type_name(a) +
                  "' and '" + type_name(b) + "'");
}

}  // namespace

bool equals(const Value& a, const Value& b) { return equals_at(a, b, 0); }

int compare(const Value& a, const Value& b, std::string_view op) { return compare_at(a, b, op, 0); }

void fail_undefined(const Value& v) {
  const std::string& hint = v.undefined_hint();
  throw EvalError(hint.empty() ? "value is undefined" : hint);
}

}  // namespace llms::jinja
