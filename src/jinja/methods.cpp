// jinja/methods: Python methods of str, dict and list that templates call (message.content
// .strip(), tool.items(), ...) and the global functions transformers provides.
//
// Mutating list/dict methods resolve to "unsafe" (ImmutableSandboxedEnvironment): looking them
// up yields an undefined that fails when called, as in transformers.
#include <array>
#include <ctime>
#include <unordered_map>

#include "builtins.h"
#include "interpreter.h"
#include "ops.h"
#include "pystr.h"

namespace llms::jinja {

namespace {

constexpr std::array kStrMethods = {
    "capitalize", "count",      "endswith",  "find",         "format",       "isalnum",
    "isalpha",    "isdigit",    "islower",   "isspace",      "isupper",      "join",
    "lower",      "lstrip",     "partition", "removeprefix", "removesuffix", "replace",
    "rfind",      "rpartition", "rsplit",    "rstrip",       "split",        "splitlines",
    "startswith", "strip",      "swapcase",  "title",        "upper",
};
constexpr std::array kDictMethods = {"copy", "get", "items", "keys", "values"};
constexpr std::array kDictUnsafe = {"clear", "pop", "popitem", "setdefault", "update"};
constexpr std::array kListMethods = {"copy", "count", "index"};
constexpr std::array kListUnsafe = {"append", "clear",  "extend",  "insert",
                                    "pop",    "remove", "reverse", "sort"};

template <size_t N>
bool in(const std::array<const char*, N>& names, std::string_view name) {
  for (const char* n : names) {
    if (name == n) return true;
  }
  return false;
}

class BoundMethod : public CallableObj {
 public:
  BoundMethod(Value receiver, std::string name)
      : receiver_(std::move(receiver)), name_(std::move(name)) {}
  Value call(Interpreter& interp, CallArgs& args) override {
    return call_method(interp, receiver_, name_, args);
  }
  std::string name() const override { return name_; }

 private:
  Value receiver_;
  std::string name_;
};

Value string_list(std::vector<std::string> parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (std::string& p : parts) items.push_back(Value::string(std::move(p)));
  return Value::list(std::move(items));
}

bool affix_matches(const Value& affix, const std::string& s, bool prefix, const char* method) {
  const auto one = [&](const Value& a) {
    if (!a.is_string()) {
      throw EvalError(std::string(method) + " first arg must be str or a tuple of str");
    }
    const std::string& x = a.as_string();
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0
                  : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_tuple()) {
    for (const Value& a : affix.items()) {
      if (one(a)) return true;
    }
    return false;
  }
  return one(affix);
}

template <typename Pred>
bool all_cps(const std::string& s, Pred pred) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size();) {
    if (!pred(pystr::decode(s, i))) return false;
  }
  return true;
}

bool is_alpha_cp(uint32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return pystr::to_upper(cp) != cp || pystr::to_lower(cp) != cp || cp == 0xDF ||
         (cp >= 0x3040 && cp <= 0x30FF) || (cp >= 0x4E00 && cp <= 0x9FFF) ||
         (cp >= 0xAC00 && cp <= 0xD7A3);
}

// str.format with {} / {0} / {name} fields and optional !r / !s; format specs are refused.
std::string str_format(Interpreter& interp, const std::string& fmt, CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out.push_back('}');
        ++i;
        continue;
      }
      throw EvalError("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos) throw EvalError("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    char conversion = 0;
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      if (bang + 2 != field.size()) throw EvalError("unsupported format conversion");
      conversion = field[bang + 1];
      field.resize(bang);
    }
    if (field.find(':') != std::string::npos) throw EvalError("format specs are not supported");
    const Value* v = nullptr;
    if (field.empty()) {
      if (auto_index >= args.positional.size()) throw EvalError("Replacement index out of range");
      v = &args.positional[auto_index++];
    } else if (std::all_of(field.begin(), field.end(),
                           [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t k = field.size() < 9 ? std::stoul(field) : SIZE_MAX;
      if (k >= args.positional.size()) throw EvalError("Replacement index out of range");
      v = &args.positional[k];
    } else {
      for (const auto& [key, value] : args.keyword) {
        if (key == field) v = &value;
      }
      if (!v) throw EvalError("format field '" + field + "' not given");
    }
    out += conversion == 'r' ? repr(*v) : to_str(*v);
    interp.check_size(out.size());
  }
  return out;
}

Value call_str_method(Interpreter& interp, const std::string& s, std::string_view name,
                      CallArgs& args) {
  const std::string fn(name);
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    ArgReader r(fn, args, {"chars"});
    return Value::string(pystr::strip(s, r.get_string(0), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    ArgReader r(fn, args, {"sep", "maxsplit"});
    const std::optional<std::string> sep = r.get_string(0);
    const int64_t maxsplit = r.get_int(1, -1);
    interp.charge_bytes(s.size());
    return string_list(name == "split" ? pystr::split(s, sep, maxsplit)
                                       : pystr::rsplit(s, sep, maxsplit));
  }
  if (name == "splitlines") {
    ArgReader r(fn, args, {"keepends"});
    return string_list(pystr::splitlines(s, r.get_bool(0, false)));
  }
  if (name == "startswith" || name == "endswith") {
    ArgReader r(fn, args, {"prefix"});
    return Value::boolean(affix_matches(r.required(0), s, name == "startswith", fn.c_str()));
  }
  if (name == "replace") {
    ArgReader r(fn, args, {"old", "new", "count"});
    const Value& old_v = r.required(0);
    const Value& new_v = r.required(1);
    if (!old_v.is_string() || !new_v.is_string())
      throw EvalError("replace() arguments must be str");
    const std::string& o = old_v.as_string();
    const std::string& n = new_v.as_string();
    const uint64_t matches =
        o.empty() ? pystr::length(s) + 1 : static_cast<uint64_t>(pystr::count(s, o));
    interp.check_size(s.size() + matches * n.size());
    interp.charge_bytes(s.size() + matches * n.size());
    return Value::string(pystr::replace(s, o, n, r.get_int(2, -1)));
  }
  if (name == "upper") return ArgReader(fn, args, {}), Value::string(pystr::upper(s));
  if (name == "lower") return ArgReader(fn, args, {}), Value::string(pystr::lower(s));
  if (name == "title") return ArgReader(fn, args, {}), Value::string(pystr::title(s));
  if (name == "capitalize") return ArgReader(fn, args, {}), Value::string(pystr::capitalize(s));
  if (name == "swapcase") {
    ArgReader(fn, args, {});
    std::string out;
    for (size_t i = 0; i < s.size();) {
      const uint32_t cp = pystr::decode(s, i);
      const uint32_t up = pystr::to_upper(cp);
      pystr::append_cp(out, up != cp ? up : pystr::to_lower(cp));
    }
    return Value::string(std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "count") {
    ArgReader r(fn, args, {"sub"});
    const Value& sub = r.required(0);
    if (!sub.is_string()) throw EvalError("must be str, not " + type_name(sub));
    if (name == "find") return Value::integer(pystr::find(s, sub.as_string()));
    if (name == "rfind") return Value::integer(pystr::rfind(s, sub.as_string()));
    return Value::integer(pystr::count(s, sub.as_string()));
  }
  if (name == "join") {
    ArgReader r(fn, args, {"iterable"});
    std::string out;
    bool first = true;
    for (const Value& item : interp.iterate(r.required(0))) {
      if (!item.is_string()) {
        throw EvalError("sequence item: expected str instance, " + type_name(item) + " found");
      }
      if (!first) out += s;
      first = false;
      out += item.as_string();
      interp.check_size(out.size());
    }
    return Value::string(std::move(out));
  }
  if (name == "format") return Value::string(str_format(interp, s, args));
  if (name == "removeprefix" || name == "removesuffix") {
    ArgReader r(fn, args, {"affix"});
    const std::optional<std::string> a = r.get_string(0);
    if (!a) throw EvalError(fn + "() argument must be str");
    if (name == "removeprefix" && s.compare(0, a->size(), *a) == 0)
      return Value::string(s.substr(a->size()));
    if (name == "removesuffix" && !a->empty() && s.size() >= a->size() &&
        s.compare(s.size() - a->size(), a->size(), *a) == 0) {
      return Value::string(s.substr(0, s.size() - a->size()));
    }
    return Value::string(s);
  }
  if (name == "partition" || name == "rpartition") {
    ArgReader r(fn, args, {"sep"});
    const std::optional<std::string> sep = r.get_string(0);
    if (!sep || sep->empty()) throw EvalError("empty separator");
    const std::vector<size_t> at =
        name == "partition" ? pystr::find_all(s, *sep, 1) : pystr::rfind_all(s, *sep, 1);
    const size_t pos = at.empty() ? std::string::npos : at[0];
    if (pos == std::string::npos) {
      return name == "partition"
                 ? Value::list({Value::string(s), Value::string(""), Value::string("")}, true)
                 : Value::list({Value::string(""), Value::string(""), Value::string(s)}, true);
    }
    return Value::list({Value::string(s.substr(0, pos)), Value::string(*sep),
                        Value::string(s.substr(pos + sep->size()))},
                       true);
  }
  ArgReader(fn, args, {});
  if (name == "isdigit")
    return Value::boolean(all_cps(s, [](uint32_t c) { return c >= '0' && c <= '9'; }));
  if (name == "isalpha") return Value::boolean(all_cps(s, is_alpha_cp));
  if (name == "isalnum") {
    return Value::boolean(
        all_cps(s, [](uint32_t c) { return is_alpha_cp(c) || (c >= '0' && c <= '9'); }));
  }
  if (name == "isspace") return Value::boolean(all_cps(s, pystr::is_space));
  if (name == "islower") return Value::boolean(pystr::lower(s) == s && pystr::upper(s) != s);
  if (name == "isupper") return Value::boolean(pystr::upper(s) == s && pystr::lower(s) != s);
  throw EvalError("'str' object has no attribute '" + fn + "'");
}

Value call_dict_method(Interpreter& interp, const Value& obj, std::string_view name,
                       CallArgs& args) {
  const DictObj& d = obj.dict_obj();
  const std::string fn(name);
  if (name == "get") {
    ArgReader r(fn, args, {"key", "default"});
    if (const Value* v = d.find(r.required(0))) return *v;
    return r.has(1) ? *r.get(1) : Value::none();
  }
  ArgReader(fn, args, {});
  if (name == "copy") return obj;
  interp.charge(d.size());
  std::vector<Value> out;
  out.reserve(d.size());
  for (const auto& [k, v] : d.entries()) {
    if (name == "items")
      out.push_back(Value::list({k, v}, true));
    else if (name == "keys")
      out.push_back(k);
    else
      out.push_back(v);
  }
  const SeqFlavor view = name == "items"  ? SeqFlavor::kItems
                         : name == "keys" ? SeqFlavor::kKeys
                                          : SeqFlavor::kValues;
  return Value::sequence(std::move(out), view);
}

Value call_list_method(Interpreter& interp, const Value& obj, std::string_view name,
                       CallArgs& args) {
  const std::string fn(name);
  if (name == "copy") {
    ArgReader(fn, args, {});
    return obj;
  }
  ArgReader r(fn, args, {"value"});
  const Value& x = r.required(0);
  interp.charge(obj.items().size());
  int64_t count = 0;
  for (size_t k = 0; k < obj.items().size(); ++k) {
    if (!equals(obj.items()[k], x)) continue;
    if (name == "index") return Value::integer(static_cast<int64_t>(k));
    ++count;
  }
  if (name == "index") throw EvalError(repr(x) + " is not in list");
  return Value::integer(count);
}

// ---- globals ----

using GlobalFn = Value (*)(Interpreter&, CallArgs&);

class BuiltinFn : public CallableObj {
 public:
  BuiltinFn(const char* name, GlobalFn fn) : name_(name), fn_(fn) {}
  Value call(Interpreter& interp, CallArgs& args) override { return fn_(interp, args); }
  std::string name() const override { return name_; }

 private:
  const char* name_;
  GlobalFn fn_;
};

Value g_range(Interpreter& interp, CallArgs& args) {
  if (!args.keyword.empty()) throw EvalError("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) throw EvalError("range expected 1 to 3 arguments");
  for (const Value& v : p) {
    if (!v.is_intlike()) {
      throw EvalError("'" + type_name(v) + "' object cannot be interpreted as an integer");
    }
  }
  const int64_t start = p.size() == 1 ? 0 : p[0].as_int();
  const int64_t stop = p.size() == 1 ? p[0].as_int() : p[1].as_int();
  const int64_t step = p.size() == 3 ? p[2].as_int() : 1;
  if (step == 0) throw EvalError("range() arg 3 must not be zero");
  uint64_t count = 0;
  if (step > 0 && start < stop) {
    count = (static_cast<uint64_t>(stop) - static_cast<uint64_t>(start) - 1) /
                static_cast<uint64_t>(step) +
            1;
  } else if (step < 0 && start > stop) {
    count = (static_cast<uint64_t>(start) - static_cast<uint64_t>(stop) - 1) /
                (static_cast<uint64_t>(-(step + 1)) + 1) +
            1;
  }
  interp.charge(count);
  std::vector<Value> items;
  items.reserve(count);
  for (uint64_t k = 0; k < count; ++k) {
    items.push_back(Value::integer(
        static_cast<int64_t>(static_cast<uint64_t>(start) + k * static_cast<uint64_t>(step))));
  }
  return Value::list(std::move(items));
}

// dict(*args, **kwargs) as Python builds it: a mapping or iterable of pairs, then keywords.
DictObj build_dict(Interpreter& interp, CallArgs& args, const char* function) {
  if (args.positional.size() > 1) {
    throw EvalError(std::string(function) + " expected at most 1 positional argument");
  }
  DictObj d;
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_dict()) {
      for (const auto& [k, v] : src.dict_obj().entries()) d.set(k, v);
    } else {
      for (const Value& pair : interp.iterate(src)) {
        const std::vector<Value> kv = interp.iterate(pair);
        if (kv.size() != 2) throw EvalError("dictionary update sequence element has wrong length");
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (auto& [k, v] : args.keyword) d.set(Value::string(k), v);
  return d;
}

Value g_dict(Interpreter& interp, CallArgs& args) {
  return Value::dict(build_dict(interp, args, "dict"));
}

Value g_namespace(Interpreter& interp, CallArgs& args) {
  DictObj attrs = build_dict(interp, args, "namespace");
  Value ns = interp.make_namespace();
  for (const auto& [k, v] : attrs.entries()) {
    if (k.is_string() && !k.as_string().empty() && k.as_string()[0] == '_') {
      throw EvalError(
          "Chat templates cannot store underscore-prefixed attributes on a "
          "namespace, but got " +
          repr(k) + ". Please rename the attribute.");
    }
    ns.namespace_obj().attrs.set(k, v);
  }
  return ns;
}

Value g_raise_exception(Interpreter&, CallArgs& args) {
  ArgReader r("raise_exception", args, {"message"});
  throw TemplateRaised(to_str(r.required(0)));
}

Value g_strftime_now(Interpreter& interp, CallArgs& args) {
  ArgReader r("strftime_now", args, {"format"});
  const Value& fmt_v = r.required(0);
  if (!fmt_v.is_string()) throw EvalError("strftime() argument 1 must be str");
  const std::string& fmt = fmt_v.as_string();
  if (fmt.find('\0') != std::string::npos) throw EvalError("embedded null character");
  if (fmt.empty()) return Value::string("");
  const std::time_t now = interp.options().now_unix_seconds
                              ? static_cast<std::time_t>(*interp.options().now_unix_seconds)
                              : std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  // strftime returns 0 both for "buffer too small" and for an empty result; grow a few times.
  for (size_t cap = fmt.size() * 4 + 64; cap <= (1u << 20); cap *= 4) {
    std::string buf(cap, '\0');
    const size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
    if (n > 0) {
      buf.resize(n);
      return Value::string(std::move(buf));
    }
  }
  return Value::string("");
}

const std::unordered_map<std::string_view, Value>& global_table() {
  static const std::unordered_map<std::string_view, Value> table = [] {
    std::unordered_map<std::string_view, Value> t;
    const auto add = [&t](const char* name, GlobalFn fn) {
      t.emplace(name, Value::callable(std::make_shared<BuiltinFn>(name, fn)));
    };
    add("range", g_range);
    add("dict", g_dict);
    add("namespace", g_namespace);
    add("raise_exception", g_raise_exception);
    add("strftime_now", g_strftime_now);
    return t;
  }();
  return table;
}

}  // namespace

MethodKind method_kind(const Value& obj, std::string_view name) {
  if (obj.is_string()) return in(kStrMethods, name) ? MethodKind::kSafe : MethodKind::kNone;
  if (obj.is_dict()) {
    if (in(kDictMethods, name)) return MethodKind::kSafe;
    return in(kDictUnsafe, name) ? MethodKind::kUnsafe : MethodKind::kNone;
  }
  if (obj.is_sequence()) {
    if (in(kListMethods, name)) return MethodKind::kSafe;
    return in(kListUnsafe, name) ? MethodKind::kUnsafe : MethodKind::kNone;
  }
  return MethodKind::kNone;
}

Value bind_method(const Value& obj, const std::string& name) {
  return Value::callable(std::make_shared<BoundMethod>(obj, name));
}

Value call_method(Interpreter& interp, const Value& obj, std::string_view name, CallArgs& args) {
  interp.charge_size(obj);
  if (obj.is_string()) return call_str_method(interp, obj.as_string(), name, args);
  if (obj.is_dict()) return call_dict_method(interp, obj, name, args);
  if (obj.is_sequence()) return call_list_method(interp, obj, name, args);
  throw EvalError("'" + type_name(obj) + "' object has no attribute '" + std::string(name) + "'");
}

std::optional<Value> find_global(std::string_view name) {
  const auto& table = global_table();
  const auto it = table.find(name);
  if (it == table.end()) return std::nullopt;
  return it->second;
}

}  // namespace llms::jinja
