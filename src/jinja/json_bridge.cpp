// jinja/json_bridge: conversions between nlohmann JSON and Values (see json_bridge.h).
#include "json_bridge.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "merge_sort.h"
#include "pystr.h"
#include "util/error.h"

namespace llms::jinja {

namespace {

template <typename Json>
Value convert(const Json& j, uint32_t depth) {
  if (depth > kMaxValueDepth) {
    throw Error(Error::Kind::kInvalidArgument,
                "template input: JSON nesting deeper than " + std::to_string(kMaxValueDepth));
  }
  switch (j.type()) {
    case nlohmann::detail::value_t::null:
      return Value::none();
    case nlohmann::detail::value_t::boolean:
      return Value::boolean(j.template get<bool>());
    case nlohmann::detail::value_t::number_integer:
      return Value::integer(j.template get<int64_t>());
    case nlohmann::detail::value_t::number_unsigned: {
      const uint64_t u = j.template get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Value::integer(static_cast<int64_t>(u));
      }
      return Value::number(static_cast<double>(u));
    }
    case nlohmann::detail::value_t::number_float:
      return Value::number(j.template get<double>());
    case nlohmann::detail::value_t::string:
      return Value::string(j.template get_ref<const std::string&>());
    case nlohmann::detail::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(convert(item, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::detail::value_t::object: {
      DictObj d;
      for (auto it = j.begin(); it != j.end(); ++it) {
        d.set(Value::string(it.key()), convert(it.value(), depth + 1));
      }
      return Value::dict(std::move(d));
    }
    default:
      throw Error(Error::Kind::kInvalidArgument, "template input: unsupported JSON value type");
  }
}

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const uint32_t cp = pystr::decode(s, i);
    char buf[16];
    switch (cp) {
      case '"':
        out.append("\\\"");
        continue;
      case '\\':
        out.append("\\\\");
        continue;
      case '\n':
        out.append("\\n");
        continue;
      case '\r':
        out.append("\\r");
        continue;
      case '\t':
        out.append("\\t");
        continue;
      case '\b':
        out.append("\\b");
        continue;
      case '\f':
        out.append("\\f");
        continue;
      default:
        break;
    }
    if (cp < 0x20 || (ensure_ascii && cp >= 0x7F)) {
      if (cp >= 0x10000) {
        const uint32_t v = cp - 0x10000;
        std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
      }
      out.append(buf);
    } else {
      out.append(s.substr(start, i - start));
    }
  }
  out.push_back('"');
}

std::string float_json(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return format_float(d);
}

// A dict key as json.dumps coerces it.
std::string key_text(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::kString:
      return k.as_string();
    case Value::Kind::kInt:
      return std::to_string(k.as_int());
    case Value::Kind::kFloat:
      return float_json(k.as_double());
    case Value::Kind::kBool:
      return k.as_bool() ? "true" : "false";
    case Value::Kind::kNone:
      return "null";
    default:
      throw EvalError("keys must be str, int, float, bool or None, not " + type_name(k));
  }
}

class Writer {
 public:
  explicit Writer(const JsonStyle& style) : style_(style) {}

  void write(const Value& v, uint32_t level) {
    if (level > 2 * kMaxValueDepth) throw EvalError("value nesting too deep for tojson");
    if (out_.size() > StringLimitScope::current()) {
      throw EvalError("tojson output exceeds the output limit of " +
                      std::to_string(StringLimitScope::current()) + " bytes");
    }
    switch (v.kind()) {
      case Value::Kind::kNone:
        out_.append("null");
        return;
      case Value::Kind::kBool:
        out_.append(v.as_bool() ? "true" : "false");
        return;
      case Value::Kind::kInt:
        out_.append(std::to_string(v.as_int()));
        return;
      case Value::Kind::kFloat:
        out_.append(float_json(v.as_double()));
        return;
      case Value::Kind::kString:
        json_string(out_, v.as_string(), style_.ensure_ascii);
        return;
      case Value::Kind::kList:
        if (!v.is_sequence()) {
          throw EvalError("Object of type " + type_name(v) + " is not JSON serializable");
        }
        write_list(v.items(), level);
        return;
      case Value::Kind::kDict:
        write_dict(v.dict_obj(), level);
        return;
      default:
        throw EvalError("Object of type " + type_name(v) + " is not JSON serializable");
    }
  }

  std::string take() { return std::move(out_); }

 private:
  void newline(uint32_t level) {
    if (out_.size() > StringLimitScope::current()) {
      throw EvalError("tojson output exceeds the output limit of " +
                      std::to_string(StringLimitScope::current()) + " bytes");
    }
    if (!style_.indent) return;
    out_.push_back('\n');
    for (uint32_t k = 0; k < level; ++k) out_.append(*style_.indent);
  }

  void write_list(const std::vector<Value>& items, uint32_t level) {
    if (items.empty()) {
      out_.append("[]");
      return;
    }
    out_.push_back('[');
    for (size_t k = 0; k < items.size(); ++k) {
      if (k) out_.append(style_.item_separator);
      newline(level + 1);
      write(items[k], level + 1);
    }
    newline(level);
    out_.push_back(']');
  }

  void write_dict(const DictObj& d, uint32_t level) {
    if (d.size() == 0) {
      out_.append("{}");
      return;
    }
    std::vector<const std::pair<Value, Value>*> entries;
    entries.reserve(d.size());
    for (const auto& e : d.entries()) entries.push_back(&e);
    if (style_.sort_keys) {
      merge_sort(entries, [](const auto* a, const auto* b) {
        return compare(a->first, b->first, "<") == -1;
      });
    }
    out_.push_back('{');
    bool first = true;
    for (const auto* e : entries) {
      if (!first) out_.append(style_.item_separator);
      first = false;
      newline(level + 1);
      json_string(out_, key_text(e->first), style_.ensure_ascii);
      out_.append(style_.key_separator);
      write(e->second, level + 1);
    }
    newline(level);
    out_.push_back('}');
  }

  const JsonStyle& style_;
  std::string out_;
};

}  // namespace

Value from_json(const nlohmann::json& j) { return convert(j, 0); }
Value from_json(const nlohmann::ordered_json& j) { return convert(j, 0); }

std::string to_json(const Value& v, const JsonStyle& style) {
  Writer w(style);
  w.write(v, 0);
  return w.take();
}

}  // namespace llms::jinja
