// jinja/ops: Python arithmetic, slicing and %-formatting (see ops.h).
#include "ops.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "interpreter.h"
#include "pystr.h"
#include "util/utf8.h"

namespace llms::jinja {

namespace {

[[noreturn]] void unsupported(const char* op, const Value& a, const Value& b) {
  throw EvalError(std::string("unsupported operand type(s) for ") + op + ": '" + type_name(a) +
                  "' and '" + type_name(b) + "'");
}

[[noreturn]] void overflow() { throw EvalError("integer result does not fit in 64 bits"); }

int64_t add_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}

int64_t sub_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) overflow();
  return r;
}

int64_t mul_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}

Value repeat(Interpreter& interp, const Value& seq, int64_t n) {
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (n <= 0 || s.empty()) return Value::string("");
    const auto count = static_cast<uint64_t>(n);
    if (count > interp.options().max_output_bytes / s.size() + 1) {
      interp.check_size(interp.options().max_output_bytes + 1);
    }
    interp.check_size(s.size() * count);
    interp.charge_bytes(s.size() * count);
    std::string out;
    out.reserve(s.size() * count);
    for (uint64_t k = 0; k < count; ++k) out += s;
    return Value::string(std::move(out));
  }
  const auto& items = seq.items();
  if (n <= 0 || items.empty()) return Value::list({}, seq.is_tuple());
  const auto count = static_cast<uint64_t>(n);
  if (count > interp.options().max_steps / items.size() + 1) {
    interp.charge(interp.options().max_steps + 1);
  }
  interp.charge(items.size() * count);
  std::vector<Value> out;
  out.reserve(items.size() * count);
  for (uint64_t k = 0; k < count; ++k) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out), seq.is_tuple());
}

double float_floordiv(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0 && ((b < 0) != (mod < 0))) div -= 1.0;
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return div == 0.0 ? std::copysign(0.0, a / b) : floordiv;
}

double float_mod(double a, double b) {
  double mod = std::fmod(a, b);
  if (mod != 0.0) {
    if ((b < 0) != (mod < 0)) mod += b;
  } else {
    mod = std::copysign(0.0, b);
  }
  return mod;
}

Value int_pow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 0) throw EvalError("0.0 cannot be raised to a negative power");
    return Value::number(std::pow(static_cast<double>(base), static_cast<double>(exp)));
  }
  int64_t result = 1;
  int64_t b = base;
  while (exp > 0) {
    if (exp & 1) result = mul_checked(result, b);
    exp >>= 1;
    if (exp > 0) b = mul_checked(b, b);
  }
  return Value::integer(result);
}

}  // namespace

Value binary_op(Interpreter& interp, BinOp op, const Value& a, const Value& b) {
  if (op == BinOp::kMod && a.is_string())
    return Value::string(percent_format(interp, a.as_string(), b));
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  const bool ints = a.is_intlike() && b.is_intlike();
  const bool nums = a.is_numeric() && b.is_numeric();
  switch (op) {
    case BinOp::kAdd: {
      if (ints) return Value::integer(add_checked(a.as_int(), b.as_int()));
      if (nums) return Value::number(a.as_double() + b.as_double());
      if (a.is_string() && b.is_string()) {
        interp.check_size(a.as_string().size() + b.as_string().size());
        interp.charge_bytes(a.as_string().size() + b.as_string().size());
        return Value::string(a.as_string() + b.as_string());
      }
      if (a.is_sequence() && b.is_sequence() && a.is_tuple() == b.is_tuple()) {
        interp.charge(a.items().size() + b.items().size());
        std::vector<Value> items = a.items();
        items.insert(items.end(), b.items().begin(), b.items().end());
        return Value::list(std::move(items), a.is_tuple());
      }
      if (a.is_string() || a.is_sequence()) {
        throw EvalError("can only concatenate " + type_name(a) + " (not \"" + type_name(b) +
                        "\") to " + type_name(a));
      }
      unsupported("+", a, b);
    }
    case BinOp::kSub: {
      if (ints) return Value::integer(sub_checked(a.as_int(), b.as_int()));
      if (nums) return Value::number(a.as_double() - b.as_double());
      unsupported("-", a, b);
    }
    case BinOp::kMul: {
      if (ints) return Value::integer(mul_checked(a.as_int(), b.as_int()));
      if (nums) return Value::number(a.as_double() * b.as_double());
      if ((a.is_string() || a.is_sequence()) && b.is_intlike())
        return repeat(interp, a, b.as_int());
      if ((b.is_string() || b.is_sequence()) && a.is_intlike())
        return repeat(interp, b, a.as_int());
      unsupported("*", a, b);
    }
    case BinOp::kDiv: {
      if (!nums) unsupported("/", a, b);
      if (b.as_double() == 0.0) throw EvalError("division by zero");
      return Value::number(a.as_double() / b.as_double());
    }
    case BinOp::kFloorDiv: {
      if (ints) {
        const int64_t x = a.as_int();
        const int64_t y = b.as_int();
        if (y == 0) throw EvalError("integer division or modulo by zero");
        if (x == std::numeric_limits<int64_t>::min() && y == -1) overflow();
        int64_t q = x / y;
        if (x % y != 0 && ((x < 0) != (y < 0))) --q;
        return Value::integer(q);
      }
      if (!nums) unsupported("//", a, b);
      if (b.as_double() == 0.0) throw EvalError("float floor division by zero");
      return Value::number(float_floordiv(a.as_double(), b.as_double()));
    }
    case BinOp::kMod: {
      if (a.is_string()) return Value::string(percent_format(interp, a.as_string(), b));
      if (ints) {
        const int64_t x = a.as_int();
        const int64_t y = b.as_int();
        if (y == 0) throw EvalError("integer division or modulo by zero");
        if (y == -1) return Value::integer(0);
        int64_t r = x % y;
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
        return Value::integer(r);
      }
      if (!nums) unsupported("%", a, b);
      if (b.as_double() == 0.0) throw EvalError("float modulo");
      return Value::number(float_mod(a.as_double(), b.as_double()));
    }
    case BinOp::kPow: {
      if (ints) return int_pow(a.as_int(), b.as_int());
      if (!nums) unsupported("** or pow()", a, b);
      const double x = a.as_double();
      const double y = b.as_double();
      if (x == 0.0 && y < 0) throw EvalError("0.0 cannot be raised to a negative power");
      if (x < 0 && std::trunc(y) != y) {
        throw EvalError("negative number cannot be raised to a fractional power");
      }
      const double r = std::pow(x, y);
      if (std::isinf(r) && std::isfinite(x) && std::isfinite(y)) {
        throw EvalError("(34, 'Numerical result out of range')");
      }
      return Value::number(r);
    }
  }
  return Value();
}

Value negate(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_intlike()) {
    if (v.as_int() == std::numeric_limits<int64_t>::min()) overflow();
    return Value::integer(-v.as_int());
  }
  if (v.is_float()) return Value::number(-v.as_double());
  throw EvalError("bad operand type for unary -: '" + type_name(v) + "'");
}

Value positive(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_intlike()) return Value::integer(v.as_int());
  if (v.is_float()) return v;
  throw EvalError("bad operand type for unary +: '" + type_name(v) + "'");
}

Value slice_value(Interpreter& interp, const Value& obj, const Value& start_v, const Value& stop_v,
                  const Value& step_v) {
  if (!obj.is_sequence() && !obj.is_string()) {
    throw EvalError("'" + type_name(obj) + "' object is not subscriptable");
  }
  const auto bound = [](const Value& v) -> std::optional<int64_t> {
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    if (!v.is_intlike()) {
      throw EvalError("slice indices must be integers or None or have an __index__ method");
    }
    return v.as_int();
  };
  const std::optional<int64_t> start_o = bound(start_v);
  const std::optional<int64_t> stop_o = bound(stop_v);
  const int64_t step = bound(step_v).value_or(1);
  if (step == 0) throw EvalError("slice step cannot be zero");

  std::vector<size_t> off;
  int64_t n;
  interp.charge_size(obj);
  if (obj.is_string()) {
    off = pystr::offsets(obj.as_string());
    n = static_cast<int64_t>(off.size() - 1);
  } else {
    n = static_cast<int64_t>(obj.items().size());
  }
  const auto adjust = [&](std::optional<int64_t> v, int64_t fallback, int64_t lo, int64_t hi) {
    if (!v) return fallback;
    int64_t x = *v;
    if (x < 0) {
      x = x < -n ? lo : x + n;
      if (x < lo) x = lo;
    } else if (x > hi) {
      x = hi;
    }
    return x;
  };
  int64_t start, stop;
  if (step > 0) {
    start = adjust(start_o, 0, 0, n);
    stop = adjust(stop_o, n, 0, n);
  } else {
    start = adjust(start_o, n - 1, -1, n - 1);
    stop = adjust(stop_o, -1, -1, n - 1);
  }
  int64_t count = 0;
  if (step > 0 && start < stop) count = (stop - start - 1) / step + 1;
  if (step < 0 && start > stop) count = (start - stop - 1) / (-step) + 1;
  interp.charge(static_cast<uint64_t>(count));

  if (obj.is_string()) {
    const std::string& s = obj.as_string();
    std::string out;
    if (step == 1) {
      if (count > 0) {
        out = s.substr(off[static_cast<size_t>(start)],
                       off[static_cast<size_t>(stop)] - off[static_cast<size_t>(start)]);
      }
    } else {
      for (int64_t k = 0; k < count; ++k) {
        const auto i = static_cast<size_t>(start + k * step);
        out.append(s, off[i], off[i + 1] - off[i]);
      }
    }
    return Value::string(std::move(out));
  }
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) {
    items.push_back(obj.items()[static_cast<size_t>(start + k * step)]);
  }
  return Value::list(std::move(items), obj.is_tuple());
}

std::string percent_format(Interpreter& interp, const std::string& format, const Value& args) {
  std::vector<Value> values;
  const DictObj* mapping = nullptr;
  if (args.is_tuple()) {
    values = args.items();
  } else if (args.is_dict()) {
    mapping = &args.dict_obj();
    values.push_back(args);
  } else {
    values.push_back(args);
  }
  size_t next = 0;
  bool used_mapping = false;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    interp.check_size(out.size());
    if (format[i] != '%') {
      out.push_back(format[i]);
      continue;
    }
    if (++i >= format.size()) throw EvalError("incomplete format");
    const Value* arg = nullptr;
    if (format[i] == '(') {
      const size_t close = format.find(')', i);
      if (close == std::string::npos) throw EvalError("incomplete format key");
      if (!mapping) throw EvalError("format requires a mapping");
      arg = mapping->find(std::string_view(format).substr(i + 1, close - i - 1));
      if (!arg) throw EvalError("format key not found");
      used_mapping = true;
      i = close + 1;
    }
    std::string flags;
    while (i < format.size() && std::string_view("-+ #0").find(format[i]) != std::string::npos) {
      flags.push_back(format[i++]);
    }
    const auto number = [&]() -> int {
      int v = 0;
      while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
        v = v * 10 + (format[i++] - '0');
        if (v > 1000) throw EvalError("format width or precision too large");
      }
      return v;
    };
    const int width = number();
    int precision = -1;
    if (i < format.size() && format[i] == '.') {
      ++i;
      precision = number();
    }
    if (i >= format.size()) throw EvalError("incomplete format");
    const char type = format[i];
    if (type == '%') {
      out.push_back('%');
      continue;
    }
    if (!arg) {
      if (next >= values.size()) throw EvalError("not enough arguments for format string");
      arg = &values[next++];
    }
    std::string spec = "%" + flags + std::to_string(width);
    if (precision >= 0) spec += "." + std::to_string(precision);
    char buf[2200];
    switch (type) {
      case 's':
      case 'r': {
        std::string text = type == 's' ? to_str(*arg) : repr(*arg);
        if (precision >= 0) {
          const std::vector<size_t> off = pystr::offsets(text);
          if (static_cast<size_t>(precision) + 1 < off.size()) {
            text.resize(off[static_cast<size_t>(precision)]);
          }
        }
        const size_t len = pystr::length(text);
        const size_t pad = static_cast<size_t>(width) > len ? static_cast<size_t>(width) - len : 0;
        if (flags.find('-') != std::string::npos) {
          out += text;
          out.append(pad, ' ');
        } else {
          out.append(pad, ' ');
          out += text;
        }
        break;
      }
      case 'd':
      case 'i':
      case 'u':
      case 'x':
      case 'X':
      case 'o': {
        if (!arg->is_numeric()) {
          throw EvalError(std::string("%") + type + " format: a real number is required, not " +
                          type_name(*arg));
        }
        const auto v = arg->is_float() ? static_cast<long long>(std::trunc(arg->as_double()))
                                       : static_cast<long long>(arg->as_int());
        spec += "ll";
        spec.push_back(type == 'i' || type == 'u' ? 'd' : type);
        std::snprintf(buf, sizeof(buf), spec.c_str(), v);
        out += buf;
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G': {
        if (!arg->is_numeric()) {
          throw EvalError(std::string("must be real number, not ") + type_name(*arg));
        }
        spec.push_back(type);
        const double d = arg->as_double();
        if (std::fabs(d) > 1e300 && (type == 'f' || type == 'F')) {
          throw EvalError("number too large for %f formatting");
        }
        std::snprintf(buf, sizeof(buf), spec.c_str(), d);
        out += buf;
        break;
      }
      case 'c': {
        if (arg->is_string() && pystr::length(arg->as_string()) == 1) {
          out += arg->as_string();
        } else if (arg->is_intlike() && arg->as_int() >= 0 && arg->as_int() <= 0x10FFFF) {
          append_utf8(static_cast<uint32_t>(arg->as_int()), out);
        } else {
          throw EvalError("%c requires an int or a unicode character");
        }
        break;
      }
      default:
        throw EvalError(std::string("unsupported format character '") + type + "'");
    }
  }
  // Python only complains about unused arguments when they cannot be a mapping (objects with
  // __getitem__, like lists and jinja2's Undefined, are taken as one).
  const bool mapping_like = args.is_list() || args.is_dict() || args.is_undefined();
  if (!used_mapping && !(mapping_like && !args.is_tuple()) && next < values.size()) {
    throw EvalError("not all arguments converted during string formatting");
  }
  interp.check_size(out.size());
  interp.charge_bytes(out.size());
  return out;
}

}  // namespace llms::jinja
