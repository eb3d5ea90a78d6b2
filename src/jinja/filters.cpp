// jinja/filters: jinja2's built-in filters and tests as transformers' environment has them.
//
// Filters that jinja2 implements as generators (map, select, reverse, ...) return lists here; a
// template only sees the difference if it prints the generator object itself.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "builtins.h"
#include "interpreter.h"
#include "json_bridge.h"
#include "merge_sort.h"
#include "ops.h"
#include "pystr.h"

namespace llms::jinja {

// ---- ArgReader ----

ArgReader::ArgReader(std::string_view function, CallArgs& args,
                     std::initializer_list<const char*> names)
    : function_(function), names_(names), bound_(names.size(), nullptr) {
  if (args.positional.size() > names_.size()) {
    throw EvalError(function_ + "() takes at most " + std::to_string(names_.size()) +
                    " argument(s) (" + std::to_string(args.positional.size()) + " given)");
  }
  for (size_t k = 0; k < args.positional.size(); ++k) bound_[k] = &args.positional[k];
  for (auto& [key, value] : args.keyword) {
    size_t k = 0;
    while (k < names_.size() && key != names_[k]) ++k;
    if (k == names_.size()) {
      throw EvalError(function_ + "() got an unexpected keyword argument '" + key + "'");
    }
    if (bound_[k]) {
      throw EvalError(function_ + "() got multiple values for argument '" + key + "'");
    }
    bound_[k] = &value;
  }
}

const Value& ArgReader::required(size_t index) const {
  if (!bound_[index]) {
    throw EvalError(function_ + "() missing required argument '" + names_[index] + "'");
  }
  return *bound_[index];
}

int64_t ArgReader::get_int(size_t index, int64_t fallback) const {
  const Value* v = bound_[index];
  if (!v || v->is_none()) return fallback;
  if (!v->is_intlike()) {
    throw EvalError(function_ + "() argument '" + names_[index] + "' must be an integer");
  }
  return v->as_int();
}

bool ArgReader::get_bool(size_t index, bool fallback) const {
  const Value* v = bound_[index];
  return v ? truthy(*v) : fallback;
}

std::optional<std::string> ArgReader::get_string(size_t index) const {
  const Value* v = bound_[index];
  if (!v || v->is_none() || v->is_undefined()) return std::nullopt;
  return to_str(*v);
}

std::string str_arg(const Value& v) { return to_str(v); }

namespace {

// Rest-arguments after `skip` positional ones, as a fresh CallArgs (for map/select).
CallArgs rest_args(const CallArgs& args, size_t skip) {
  CallArgs out;
  for (size_t k = skip; k < args.positional.size(); ++k)
    out.positional.push_back(args.positional[k]);
  out.keyword = args.keyword;
  return out;
}

// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0.
Value get_path(Interpreter& interp, const Value& item, const Value& attribute) {
  if (!attribute.is_string()) return interp.getitem(item, attribute);
  Value v = item;
  const std::string& path = attribute.as_string();
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? dot : dot - start);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                                     [](char c) { return c >= '0' && c <= '9'; });
    if (digits && part.size() < 18) {
      v = interp.getitem(v, Value::integer(std::stoll(part)));
    } else {
      v = interp.getitem(v, Value::string(part));
    }
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

Value lower_if_string(const Value& v) {
  return v.is_string() ? Value::string(pystr::lower(v.as_string())) : v;
}

// Sort key for sort/dictsort/min/max/unique.
Value sort_key(Interpreter& interp, const Value& item, const Value* attribute,
               bool case_sensitive) {
  Value key = attribute ? get_path(interp, item, *attribute) : item;
  return case_sensitive ? key : lower_if_string(key);
}

Value f_abs(Interpreter&, const Value& in, CallArgs& args) {
  ArgReader(" abs", args, {});
  if (in.is_intlike()) {
    if (in.as_int() == INT64_MIN) throw EvalError("integer result does not fit in 64 bits");
    return Value::integer(std::llabs(in.as_int()));
  }
  if (in.is_float()) return Value::number(std::fabs(in.as_double()));
  throw EvalError("bad operand type for abs(): '" + type_name(in) + "'");
}

Value f_attr(Interpreter& interp, const Value& in, CallArgs& args) {
  ArgReader r("attr", args, {"name"});
  return interp.getattr(in, to_str(r.required(0)));
}

Value f_batch(Interpreter& interp, const Value& in, CallArgs& args) {
  ArgReader r("batch", args, {"linecount", "fill_with"});
  const int64_t size = r.get_int(0, 0);
  if (size <= 0) throw EvalError("batch size must be positive");
  std::vector<Value> out;
  std::vector<Value> cur;
  for (Value& item : interp.iterate(in)) {
    cur.push_back(std::move(item));
    if (static_cast<int64_t>(cur.size()) == size)
      out.push_back(Value::list(std::move(cur))), cur.clear();
  }
  if (!cur.empty()) {
    if (r.has(1)) {
      interp.charge(static_cast<uint64_t>(size) - cur.size());
      while (static_cast<int64_t>(cur.size()) < size) cur.push_back(*r.get(1));
    }
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::sequence(std::move(out), SeqFlavor::kIterator);
}

Value f_capitalize(Interpreter&, const Value& in, CallArgs& args) {
  ArgReader("capitalize", args, {});
  return Value::string(pystr::capitalize(to_str(in)));
}

Value f_default(Interpreter&, const Value& in, CallArgs& args) {
  ArgReader r("default", args, {"default_value", "boolean"});
  const bool boolean = r.get_bool(1, false);
  if (in.is_undefined() || (boolean && !truthy(in))) {
    return r.has(0) ? *r.get(0) : Value::string("");
  }
  return in;
}

Value f_dictsort(Interpreter& interp, const Value& in, CallArgs& args) {
  ArgReader r("dictsort", args, {"case_sensitive", "by", "reverse"});
  if (!in.is_dict()) throw EvalError("You can only sort by either dictionaries");
  const bool case_sensitive = r.get_bool(0, false);
  const std::string by = r.get_string(1).value_or("key");
  if (by != "key" && by != "value") throw EvalError("You can only sort by either 'key' or 'value'");
  const bool reverse = r.get_bool(2, false);
  std::vector<Value> items;
  for (const auto& [k, v] : in.dict_obj().entries()) items.push_back(Value::list({k, v}, true));
  interp.charge(items.size() * 4);
  const size_t pos = by == "key" ? 0 : 1;
  merge_sort(items, [&](const Value& a, const Value& b) {
    const Value ka = case_sensitive ? a.items()[pos] : lower_if_string(a.items()[pos]);
    const Value kb = case_sensitive ? b.items()[pos] : lower_if_string(b.items()[pos]);
    return reverse ? compare(kb, ka, "<") == -1 : compare(ka, kb, "<") == -1;
  });
  return Value::list(std::move(items));
}

Value f_escape(Interpreter& interp, const Value& in, CallArgs& args) {
  ArgReader("escape", args, {});
  std::string s = pystr::html_escape(to_str(in));
  interp.check_size(s.size());
  return Value::string(std::move(s));
}

Value f_first(Interpreter& interp, const Value& in, CallArgs& args) {
  ArgReader("first", args, {});
  if (in.is_iterator()) {  // takes one item from the generator
    const ListObj& gen = in.list_obj();
    if (gen.pending_error) throw EvalError(*gen.pending_error);
    if (gen.cursor >= gen.items.size())
      return Value::undefined("No first item, sequence was empty.");
    return gen.items[gen.cursor++];
  }
  if (in.is_list()) {
    if (in.items().empty()) return Value::undefined("No first item, sequence was empty.");
    return in.items().front();
  }
  std::vector<Value> items = interp.iterate(in);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Interpreter& interp, const Value& in, CallArgs& args) {
  ArgReader("last", args, {});
  if (in.is_iterator()) throw EvalError("'generator' object is not reversible");
  std::vector<Value> items = interp.iterate(in);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

bool parse_python_float(std::string s, double& out) {
  s = pystr::strip(s, std::nullopt, true, true);
  std::string clean;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == '_' && k > 0 && k + 1 < s.size() && isdigit(static_cast<unsigned char>(s[k - 1])) &&
        isdigit(static_cast<unsigned char>(s[k + 1]))) {
      continue;
    }
    clean.push_back(s[k]);
  }
  if (clean.empty()) return false;
  std::string lowered = pystr::lower(clean);
  const std::string_view body = lowered[0] == '+' || lowered[0] == '-'
                                    ? std::string_view(lowered).substr(1)
                                    : std::string_view(lowered);
  if (body == "inf" || body == "infinity" || body == "nan") {
    const double v = body == "nan" ? NAN : INFINITY;
    out = lowered[0] == '-' ? -v : v;
    return true;
  }
  if (body.empty() || !(isdigit(static_cast<unsigned char>(body[0])) || body[0] == '.'))
    return false;
  if (body.find_first_of("xp") != std::string_view::npos) return false;  // no hex floats
  char* end = nullptr;
  out = std::strtod(clean.c_str(), &end);
  return end == clean.c_str() + clean.size();
}

bool parse_python_int(const std::string& text, int64_t base, int64_t& out) {
  std::string s = pystr::strip(text, std::nullopt, true, true);
  std::string clean;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == '_' && k > 0 && k + 1 < s.size()) continue;
    clean.push_back(s[k]);
  }
  if (clean.empty() || base < 2 || base > 36) return false;
  const size_t digits_at = (clean[0] == '+' || clean[0] == '-') ? 1 : 0;
  if (digits_at >= clean.size() || !isalnum(static_cast<unsigned char>(clean[digits_at])))
    return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(clean.c_str(), &end, static_cast<int>(base));
  if (errno == ERANGE || end != clean.c_str() + clean.size()) return false;
  out = v;
  return true;
}

Value f_float(Interpreter&, const Value& in, CallArgs& args) {
  ArgReader r("float", args, {"default"});
  const Value fallback = r.has(0) ? *r.get(0) : Value::number(0.0);
  if (in.is_undefined()) fail_undefined(in);  // float(Undefined) raises
  if (in.is_numeric()) return Value::number(in.as_double());
  double d;
  if (in.is_string() && parse_python_float(in.as_string(), d)) return Value::number(d);
  return fallback;
}

Value f_int(Interpreter&, const Value& in, CallArgs& args) {
  ArgReader r("int", args, {"default", "base"});
  const Value fallback = r.has(0) ? *r.get(0) : Value::integer(0);
  const int64_t base = r.get_int(1, 10);
  if (in.is_undefined()) fail_undefined(in);  // int(Undefined) raises
  if (in.is_intlike()) return Value::integer(in.as_int());
  const auto from_double = [&](double d) {
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
    return Value::integer(static_cast<int64_t>(std::trunc(d)));
  };
  if (in.is_float()) return from_double(in.as_double());
  if (in.is_string()) {
    int64_t i;
    if (parse_python_int(in.as_string(), base, i)) return Value::integer(i);
    double d;
    if (parse_python_float(in.as_string(), d)) return from_double(d);
  }
  return fallback;
}

Value f_format(Interpreter& interp, const Value& in, CallArgs& args) {
  if (!args.positional.empty() && !args.keyword.empty()) {
    throw EvalError("can't handle positional and keyword arguments at the same time");
  }
  if (!args.keyword.empty()) {
    DictObj d;
    for (auto& [k, v] : args.keyword) d.set(Value::string(k), v);
    return Value::string(percent_format(interp, to_str(in), Value::dict(std::move(d))));
  }
  return Value::string(percent_format(interp, to_str(in), Value::list(args.positional, true)));
}

Value f_indent(Interpreter& interp, const Value& in, CallArgs& args) {
  ArgReader r("indent", args, {"width", "first", "blank"});
  if (in.is_undefined()) fail_undefined(in);  // jinja2 appends "\n" to it, which fails
  if (!in.is_string()) {
    throw EvalError("unsupported operand type(s) for +=: '" + type_name(in) + "' and 'str'");
  }
  std::string indention;
  if (r.has(0) && r.get(0)->is_string()) {
    indention = r.get(0)->as_string();
  } else {
    const int64_t width = r.get_int(0, 4);
    interp.check_size(static_cast<size_t>(std::max<int64_t>(width, 0)));
    indention.assign(static_cast<size_t>(std::max<int64_t>(width, 0)), ' ');
  }
  const bool first = r.get_bool(1, false);
  const bool blank = r.get_bool(2, false);
  const std::string s = to_str(in) + "\n";
  const std::vector<std::string> lines = pystr::splitlines(s);
  interp.check_size(s.size() + lines.size() * indention.size());
  interp.charge_bytes(s.size() + lines.size() * indention.size());
  std::string out;
  if (blank) {
    for (size_t k = 0; k < lines.size(); ++k) {
      if (k) out += "\n" + indention;
      out += lines[k];
    }
  } else if (!lines.empty()) {
    out = lines[0];
    for (size_t k = 1; k < lines.size(); ++k) {
      out += "\n";
      if (!lines[k].empty()) out += indention;
      out += lines[k];
    }
  }
  if (first) out = indention + out;
  return Value::string(std::move(out));
}

Value f_items(Interpreter& interp, const Value& in, CallArgs& args) {
  ArgReader("items", args, {});
  if (in.is_undefined()) return Value::sequence({}, SeqFlavor::kIterator);
  if (!in.is_dict()) throw EvalError("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, v] : in.dict_obj().entries()) out.push_back(Value::list({k, v}, true));
  interp.charge(out.size());
  return Value::sequence(std::move(out), SeqFlavor::kIterator);
}

Value f_join(Interpreter& interp, const Value& in, CallArgs& args) {
  ArgReader r("join", args, {"d", "attribute"});
  const std::string sep = r.has(0) ? to_str(*r.get(0)) : "";
  std::string out;
  bool first = true;
  for (const Value& item : interp.iterate(in)) {
    if (!first) out += sep;
    first = false;
    out += to_str(r.has(1) ? get_path(interp, item, *r.get(1)) : item);
    interp.check_size(out.size());
  }
  interp.charge_bytes(out.size());
  return Value::string(std::move(out));
}

Value f_length(Interpreter&, const Value& in, CallArgs& args) {
  ArgReader("length", args, {});
  switch (in.kind()) {
    case Value::Kind::kUndefined:
      return Value::integer(0);
    case Value::Kind::kString:
      return Value::integer(static_cast<int64_t>(pystr::length(in.as_string())));
    case Value::Kind::kList:
      if (in.is_iterator()) throw EvalError("object of type 'generator' has no len()");
      return Value::integer(static_cast<int64_t>(in.items().size()));
    case Value::Kind::kDict:
      return Value::integer(static_cast<int64_t>(in.dict_obj().size()));
    default:
      throw EvalError("object of type '" + type_name(in) + "' has no len()");
  }
}

Value f_list(Interpreter& interp, const Value& in, CallArgs& args) {
  ArgReader("list", args, {});
  return Value::list(interp.iterate(in));
}

Value f_lower(Interpreter&, const Value& in, CallArgs& args) {
  ArgReader("lower", args, {});
  return Value::string(pystr::lower(to_str(in)));
}

Value f_upper(Interpreter&, const Value& in, CallArgs& args) {
  ArgReader("upper", args, {});
  return Value::string(pystr::upper(to_str(in)));
}

Value f_title(Interpreter&, const Value& in, CallArgs& args) {
  ArgReader("title", args, {});
  return Value::string(pystr::title_filter(to_str(in)));
}

Value f_map(Interpreter& interp, const Value& in, CallArgs& args) {
  std::vector<Value> out;
  if (!truthy(in)) return Value::sequence({}, SeqFlavor::kIterator);  // jinja2: "if value:"
  const std::vector<Value> items = interp.iterate(in);
  if (args.positional.empty()) {
    ArgReader r("map", args, {"attribute", "default"});
    if (!r.has(0)) return Value::list(items);
    for (const Value& item : items) {
      Value v = get_path(interp, item, *r.get(0));
      if (v.is_undefined() && r.has(1)) v = *r.get(1);
      out.push_back(std::move(v));
    }
    return Value::sequence(std::move(out), SeqFlavor::kIterator);
  }
  const std::string name = to_str(args.positional[0]);
  for (const Value& item : items) {
    CallArgs rest = rest_args(args, 1);
    out.push_back(interp.apply_filter(name, item, rest));
  }
  return Value::sequence(std::move(out), SeqFlavor::kIterator);
}

Value select_impl(Interpreter& interp, const Value& in, CallArgs& args, bool by_attr,
                  bool keep_matching) {
  if (!truthy(in)) return Value::sequence({}, SeqFlavor::kIterator);  // jinja2: "if value:"
  const std::vector<Value> items = interp.iterate(in);
  size_t skip = 0;
  Value attribute;
  if (by_attr) {
    if (args.positional.empty()) throw EvalError("Missing parameter for attribute name");
    attribute = args.positional[0];
    skip = 1;
  }
  std::string test;
  if (args.positional.size() > skip) test = to_str(args.positional[skip]);
  std::vector<Value> out;
  for (const Value& item : items) {
    const Value subject = by_attr ? get_path(interp, item, attribute) : item;
    bool ok;
    if (test.empty()) {
      ok = truthy(subject);
    } else {
      CallArgs rest = rest_args(args, skip + 1);
      ok = interp.apply_test(test, subject, rest);
    }
    if (ok == keep_matching) out.push_back(item);
  }
  return Value::sequence(std::move(out), SeqFlavor::kIterator);
}

Value f_select(Interpreter& i, const Value& in, CallArgs& a) {
  return select_impl(i, in, a, false, true);
}
Value f_reject(Interpreter& i, const Value& in, CallArgs& a) {
  return select_impl(i, in, a, false, false);
}
Value f_selectattr(Interpreter& i, const Value& in, CallArgs& a) {
  return select_impl(i, in, a, true, true);
}
Value f_rejectattr(Interpreter& i, const Value& in, CallArgs& a) {
  return select_impl(i, in, a, true, false);
}

Value minmax(Interpreter& interp, const Value& in, CallArgs& args, bool want_max) {
  ArgReader r(want_max ? "max" : "min", args, {"case_sensitive", "attribute"});
  const bool case_sensitive = r.get_bool(0, false);
  const std::vector<Value> items = interp.iterate(in);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = sort_key(interp, items[0], r.get(1), case_sensitive);
  for (size_t k = 1; k < items.size(); ++k) {
    Value key = sort_key(interp, items[k], r.get(1), case_sensitive);
    if (compare(key, best_key, want_max ? ">" : "<") == (want_max ? 1 : -1)) {
      best = k;
      best_key = std::move(key);
    }
  }
  return items[best];
}

Value f_max(Interpreter& i, const Value& in, CallArgs& a) { return minmax(i, in, a, true); }
Value f_min(Interpreter& i, const Value& in, CallArgs& a) { return minmax(i, in, a, false); }

Value f_replace(Interpreter& interp, const Value& in, CallArgs& args) {
  ArgReader r("replace", args, {"old", "new", "count"});
  const std::string s = to_str(in);
  const std::string old_s = to_str(r.required(0));
  const std::string new_s = to_str(r.required(1));
  const int64_t count = r.get_int(2, -1);
  // Bound the result before building it: every match (or code point, for an empty `old`) may
  // grow the string by new_s.size() bytes.
  const uint64_t matches =
      old_s.empty() ? pystr::length(s) + 1 : static_cast<uint64_t>(pystr::count(s, old_s));
  interp.check_size(s.size() + matches * new_s.size());
  std::string out = pystr::replace(s, old_s, new_s, count);
  interp.charge_bytes(out.size());
  return Value::string(std::move(out));
}

Value f_reverse(Interpreter& interp, const Value& in, CallArgs& args) {
  ArgReader("reverse", args, {});
  if (in.is_string()) {
    const std::vector<size_t> off = pystr::offsets(in.as_string());
    std::string out;
    out.reserve(in.as_string().size());
    for (size_t k = off.size() - 1; k > 0; --k) {
      out.append(in.as_string(), off[k - 1], off[k] - off[k - 1]);
    }
    return Value::string(std::move(out));
  }
  // reversed() gives an iterator; a generator cannot be reversed, so jinja2 builds a list.
  const bool was_iterator = in.is_iterator();
  std::vector<Value> items = interp.iterate(in);
  std::reverse(items.begin(), items.end());
  return Value::sequence(std::move(items), was_iterator ? SeqFlavor::kList : SeqFlavor::kIterator);
}

double round_half_even(double x, int64_t digits) {
  if (!std::isfinite(x)) return x;
  if (digits >= 0 && digits <= 300) {
    char buf[700];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(digits), x);
    return std::strtod(buf, nullptr);
  }
  if (digits > 300) return x;
  const double scale = std::pow(10.0, static_cast<double>(-digits));
  return std::nearbyint(x / scale) * scale;
}

// Python round(int, ndigits): ties to even at the 10^-ndigits place; exact in integers.
int64_t round_int(int64_t x, int64_t digits) {
  if (digits >= 0) return x;
  if (digits < -18) return 0;
  int64_t m = 1;
  for (int64_t k = 0; k < -digits; ++k) m *= 10;
  int64_t r = x % m;
  if (r < 0) r += m;
  const int64_t q = (x - r) / m;  // floor(x / m)
  const bool up = 2 * r > m || (2 * r == m && (q % 2 != 0));
  int64_t result;
  if (__builtin_mul_overflow(q + (up ? 1 : 0), m, &result)) {
    throw EvalError("integer result does not fit in 64 bits");
  }
  return result;
}

Value f_round(Interpreter&, const Value& in, CallArgs& args) {
  ArgReader r("round", args, {"precision", "method"});
  const int64_t precision = r.get_int(0, 0);
  const std::string method = r.get_string(1).value_or("common");
  if (method != "common" && method != "ceil" && method != "floor") {
    throw EvalError("method must be common, ceil or floor");
  }
  if (!in.is_numeric())
    throw EvalError("type " + type_name(in) + " doesn't define __round__ method");
  if (method == "common") {
    if (in.is_intlike()) return Value::integer(round_int(in.as_int(), precision));
    return Value::number(round_half_even(in.as_double(), precision));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double v = in.as_double() * scale;
  return Value::number((method == "ceil" ? std::ceil(v) : std::floor(v)) / scale);
}

Value f_safe(Interpreter&, const Value& in, CallArgs& args) {
  ArgReader("safe", args, {});
  return in;
}

Value f_sort(Interpreter& interp, const Value& in, CallArgs& args) {
  ArgReader r("sort", args, {"reverse", "case_sensitive", "attribute"});
  const bool reverse = r.get_bool(0, false);
  const bool case_sensitive = r.get_bool(1, false);
  std::vector<Value> items = interp.iterate(in);
  std::vector<std::pair<Value, Value>> keyed;
  keyed.reserve(items.size());
  for (Value& item : items) {
    Value key = sort_key(interp, item, r.get(2), case_sensitive);
    keyed.emplace_back(std::move(key), std::move(item));
  }
  interp.charge(keyed.size() * 4);
  merge_sort(keyed, [&](const auto& a, const auto& b) {
    return reverse ? compare(b.first, a.first, "<") == -1 : compare(a.first, b.first, "<") == -1;
  });
  items.clear();
  for (auto& kv : keyed) items.push_back(std::move(kv.second));
  return Value::list(std::move(items));
}

Value f_string(Interpreter&, const Value& in, CallArgs& args) {
  ArgReader("string", args, {});
  return in.is_string() ? in : Value::string(to_str(in));
}

Value f_sum(Interpreter& interp, const Value& in, CallArgs& args) {
  ArgReader r("sum", args, {"attribute", "start"});
  Value total = r.has(1) ? *r.get(1) : Value::integer(0);
  for (const Value& item : interp.iterate(in)) {
    total =
        binary_op(interp, BinOp::kAdd, total, r.has(0) ? get_path(interp, item, *r.get(0)) : item);
  }
  return total;
}

Value f_tojson(Interpreter& interp, const Value& in, CallArgs& args) {
  ArgReader r("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonStyle style;
  style.ensure_ascii = r.get_bool(0, false);
  if (r.has(1) && !r.get(1)->is_none()) {
    const Value& indent = *r.get(1);
    if (indent.is_string()) {
      style.indent = indent.as_string();
    } else if (indent.is_intlike()) {
      const int64_t n = indent.as_int();
      interp.check_size(static_cast<size_t>(std::max<int64_t>(n, 0)));
      style.indent = std::string(static_cast<size_t>(std::max<int64_t>(n, 0)), ' ');
    } else {
      throw EvalError("tojson indent must be an integer or a string");
    }
    style.item_separator = ",";
  }
  if (r.has(2) && !r.get(2)->is_none()) {
    const Value& sep = *r.get(2);
    if (!sep.is_list() || sep.items().size() != 2 || !sep.items()[0].is_string() ||
        !sep.items()[1].is_string()) {
      throw EvalError("tojson separators must be a pair of strings");
    }
    style.item_separator = sep.items()[0].as_string();
    style.key_separator = sep.items()[1].as_string();
  }
  style.sort_keys = r.get_bool(3, false);
  std::string out = to_json(in, style);
  interp.check_size(out.size());
  interp.charge_bytes(out.size());
  return Value::string(std::move(out));
}

Value f_trim(Interpreter&, const Value& in, CallArgs& args) {
  ArgReader r("trim", args, {"chars"});
  return Value::string(pystr::strip(to_str(in), r.get_string(0), true, true));
}

Value f_unique(Interpreter& interp, const Value& in, CallArgs& args) {
  ArgReader r("unique", args, {"case_sensitive", "attribute"});
  const bool case_sensitive = r.get_bool(0, false);
  std::vector<Value> out;
  std::vector<Value> seen;
  for (const Value& item : interp.iterate(in)) {
    Value key = sort_key(interp, item, r.get(1), case_sensitive);
    if (key.is_list() && !key.is_tuple()) {
      throw EvalError("unhashable type: '" + type_name(key) + "'");
    }
    if (key.is_dict()) throw EvalError("unhashable type: 'dict'");
    interp.charge(seen.size());
    bool dup = false;
    for (const Value& s : seen) {
      if (equals(s, key)) {
        dup = true;
        break;
      }
    }
    if (dup) continue;
    seen.push_back(std::move(key));
    out.push_back(item);
  }
  return Value::sequence(std::move(out), SeqFlavor::kIterator);
}

Value f_wordcount(Interpreter&, const Value& in, CallArgs& args) {
  ArgReader("wordcount", args, {});
  const std::string s = to_str(in);
  int64_t n = 0;
  bool in_word = false;
  for (size_t i = 0; i < s.size();) {
    const uint32_t cp = pystr::decode(s, i);
    const bool word = (cp < 0x80 && (isalnum(static_cast<int>(cp)) || cp == '_')) ||
                      (cp >= 0x80 && !pystr::is_space(cp));
    if (word && !in_word) ++n;
    in_word = word;
  }
  return Value::integer(n);
}

// jinja2 implements these filters as generators: their errors surface only when the result is
// consumed, and an unconsumed result is simply truthy.
template <FilterFn F>
Value generator_filter(Interpreter& interp, const Value& in, CallArgs& args) {
  try {
    return F(interp, in, args);
  } catch (const EvalError& e) {
    return Value::failed_generator(e.what());
  }
}

const std::unordered_map<std::string_view, FilterFn>& filter_table() {
  static const std::unordered_map<std::string_view, FilterFn> table = {
      {"abs", f_abs},
      {"attr", f_attr},
      {"batch", generator_filter<f_batch>},
      {"capitalize", f_capitalize},
      {"count", f_length},
      {"d", f_default},
      {"default", f_default},
      {"dictsort", f_dictsort},
      {"e", f_escape},
      {"escape", f_escape},
      {"first", f_first},
      {"float", f_float},
      {"forceescape", f_escape},
      {"format", f_format},
      {"indent", f_indent},
      {"int", f_int},
      {"items", generator_filter<f_items>},
      {"join", f_join},
      {"last", f_last},
      {"length", f_length},
      {"list", f_list},
      {"lower", f_lower},
      {"map", generator_filter<f_map>},
      {"max", f_max},
      {"min", f_min},
      {"reject", generator_filter<f_reject>},
      {"rejectattr", generator_filter<f_rejectattr>},
      {"replace", f_replace},
      {"reverse", f_reverse},
      {"round", f_round},
      {"safe", f_safe},
      {"select", generator_filter<f_select>},
      {"selectattr", generator_filter<f_selectattr>},
      {"sort", f_sort},
      {"string", f_string},
      {"sum", f_sum},
      {"title", f_title},
      {"tojson", f_tojson},
      {"trim", f_trim},
      {"unique", generator_filter<f_unique>},
      {"upper", f_upper},
      {"wordcount", f_wordcount},
  };
  return table;
}

}  // namespace

FilterFn find_filter(std::string_view name) {
  const auto& table = filter_table();
  const auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

}  // namespace llms::jinja
