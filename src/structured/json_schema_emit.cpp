// structured/json_schema_emit: the grammar text. See json_schema_grammar.h.
//
// Whitespace goes between every two adjacent tokens exactly once (never twice, so no run can
// exceed the bound, and a text has one parse): "{" ws member ws "," ws member ws "}", "{" ws "}".
// The root value has none before or after it.
#include <algorithm>
#include <cstdio>
#include <unordered_set>

#include "json_schema_grammar.h"
#include "util/utf8.h"

namespace llms::structured::jsonschema {

namespace {

// Joins the non-empty parts with spaces.
std::string sequence(std::initializer_list<std::string> parts) {
  std::string out;
  for (const std::string& part : parts) {
    if (part.empty()) continue;
    if (!out.empty()) out += " ";
    out += part;
  }
  return out;
}

// `alternatives` as one expression; an empty alternative makes the group optional.
std::string choice(const std::vector<std::string>& alternatives) {
  std::vector<std::string> kept;
  std::unordered_set<std::string> seen;
  bool has_empty = false;
  for (const std::string& a : alternatives) {
    if (a.empty()) {
      has_empty = true;
    } else if (seen.insert(a).second) {
      kept.push_back(a);
    }
  }
  if (kept.empty()) return "";
  std::string out;
  for (size_t i = 0; i < kept.size(); ++i) out += (i ? " | " : "") + kept[i];
  if (kept.size() > 1 || has_empty) out = "(" + out + ")";
  if (has_empty) out += "?";
  return out;
}

// `unit` repeated lo..hi times (hi kUnbounded: no bound); empty when hi is 0.
std::string repeat(const std::string& unit, int64_t lo, int64_t hi) {
  if (hi == 0) return "";
  const std::string group = "(" + unit + ")";
  if (hi == kUnbounded) {
    if (lo == 0) return group + "*";
    if (lo == 1) return group + "+";
    return group + "{" + std::to_string(lo) + ",}";
  }
  if (lo == 0 && hi == 1) return group + "?";
  if (lo == hi) return lo == 1 ? unit : group + "{" + std::to_string(lo) + "}";
  return group + "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
}

std::string sanitize_hint(const std::string& hint) {
  std::string out;
  for (char c : hint) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    out.push_back(ok ? c : '_');
    if (out.size() >= 40) break;
  }
  if (out.empty() || !((out[0] >= 'a' && out[0] <= 'z') || (out[0] >= 'A' && out[0] <= 'Z'))) {
    out = "s-" + out;
  }
  return out;
}

// A readable hint from where a set's first subschema sits: "/definitions/Person" -> "Person".
std::string set_hint(const SchemaSet& set) {
  if (set.is_any()) return "value";
  if (set.nodes.empty()) return "never";
  const std::string& pointer = set.nodes[0]->pointer;
  if (pointer.empty()) return "schema";
  std::string last = pointer.substr(pointer.rfind('/') + 1);
  if (last == "items" || last == "additionalProperties" ||
      std::isdigit(static_cast<unsigned char>(last[0]))) {
    const std::string before = pointer.substr(0, pointer.rfind('/'));
    last = before.substr(before.rfind('/') + 1) + "-" + last;
  }
  return last;
}

}  // namespace

std::string gbnf_literal(const std::string& text) {
  std::string out = "\"";
  char buffer[16];
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Step step = utf8_step(text, pos);
    char32_t cp = step.kind == Utf8Step::Kind::kValid ? step.code_point : kReplacementChar;
    pos += step.length;
    if (cp == U'"' || cp == U'\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp >= 0x20 && cp < 0x7F) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x80) {
      std::snprintf(buffer, sizeof buffer, "\\x%02X", static_cast<unsigned>(cp));
      out += buffer;
    } else if (cp <= 0xFFFF) {
      std::snprintf(buffer, sizeof buffer, "\\u%04X", static_cast<unsigned>(cp));
      out += buffer;
    } else {
      std::snprintf(buffer, sizeof buffer, "\\U%08X", static_cast<unsigned>(cp));
      out += buffer;
    }
  }
  return out + "\"";
}

std::string GrammarBuilder::ws() const {
  return compiler_.options().whitespace == JsonSchemaOptions::Whitespace::kFlexible ? "ws" : "";
}

std::string GrammarBuilder::add_rule(const std::string& hint, const std::string& body) {
  compiler_.budget().charge(1, "JSON Schema grammar rules");
  std::string name = sanitize_hint(hint);
  int& count = name_counts_[name];
  ++count;
  if (count > 1 || name == "root" || name == "ws") name += "-" + std::to_string(count);
  rule_index_[name] = rules_.size();
  rules_.emplace_back(name, body);
  return name;
}

std::string GrammarBuilder::terminal(const std::string& regex, const std::string& hint) {
  auto it = terminals_.find(regex);
  if (it != terminals_.end()) return it->second;
  const std::string name = add_rule(hint, "/" + regex + "/");
  terminals_.emplace(regex, name);
  return name;
}

std::string GrammarBuilder::set_rule(const SchemaSet& set) {
  SetPlan& plan = sets_.at(set);
  if (plan.rule.empty()) {
    plan.rule = add_rule(set_hint(set), "");  // the body is written when the set is popped
    pending_.push_back(&sets_.find(set)->first);
  }
  return plan.rule;
}

std::string GrammarBuilder::value_literal(const Json& value, int depth) {
  compiler_.budget().charge(1, "JSON Schema enum literals");
  const std::string w = ws();
  switch (value.type()) {
    case Json::value_t::string:
      return gbnf_literal(canonical_json_string(value.get_ref<const std::string&>()));
    case Json::value_t::array: {
      if (value.empty()) return sequence({"\"[\"", w, "\"]\""});
      std::string out = "(\"[\"";
      for (size_t i = 0; i < value.size(); ++i) {
        out += " " + sequence({i ? "\",\"" : "", w, value_literal(value[i], depth + 1), w});
      }
      return out + " \"]\")";
    }
    case Json::value_t::object: {
      if (value.empty()) return sequence({"\"{\"", w, "\"}\""});
      std::string out = "(\"{\"";
      bool first = true;
      for (auto it = value.begin(); it != value.end(); ++it) {
        out +=
            " " + sequence({first ? "" : "\",\"", w, gbnf_literal(canonical_json_string(it.key())),
                            w, "\":\"", w, value_literal(it.value(), depth + 1), w});
        first = false;
      }
      return out + " \"}\")";
    }
    default:
      return gbnf_literal(value.dump());  // null, booleans, numbers: their JSON text
  }
}

std::string GrammarBuilder::array_expression(const ShapePlan& plan, const std::string& rule) {
  const std::string w = ws();
  if (plan.witness_items) return contains_expression(plan);
  const int64_t max_items = writable_items(plan);  // <= plan.max_items; kUnbounded: no bound
  const auto prefix = static_cast<int64_t>(plan.prefix_items.size());
  const int64_t min_items = plan.min_items;
  if (max_items == 0) return sequence({"\"[\"", w, "\"]\""});
  auto item = [&](int64_t i) {
    return set_rule(i < prefix ? plan.prefix_items[static_cast<size_t>(i)] : plan.rest_items);
  };
  // tail: what may follow the first i items (each written with the whitespace after it), built
  // from the last tuple position back to the first, one rule per tuple position.
  const int64_t last_tuple = max_items == kUnbounded ? prefix : std::min(prefix, max_items);
  std::string tail;
  if (max_items == kUnbounded || max_items > prefix) {
    const int64_t from = std::max<int64_t>(prefix, 1);
    const int64_t lo = std::max<int64_t>(0, min_items - from);
    const int64_t hi = max_items == kUnbounded ? kUnbounded : max_items - from;
    tail = repeat(sequence({"\",\"", w, set_rule(plan.rest_items), w}), lo, hi);
  }
  for (int64_t i = last_tuple - 1; i >= 1; --i) {
    const std::string name = add_rule(rule + "-tail", sequence({"\",\"", w, item(i), w, tail}));
    tail = i >= min_items ? name + "?" : name;
  }
  const std::string items = sequence({item(0), w, tail});
  return sequence({"\"[\"", w, min_items == 0 ? "(" + items + ")?" : items, "\"]\""});
}

// An array with a `contains` witness: a items before it, b after it, a + b + 1 within the bounds;
// one alternative per a up to the lower bound (then any a), or per a up to the upper bound.
std::string GrammarBuilder::contains_expression(const ShapePlan& plan) {
  const std::string w = ws();
  const std::string witness = set_rule(*plan.witness_items);
  const int64_t lo = std::max<int64_t>(plan.min_items, 1), hi = plan.max_items;
  if (!satisfiable(plan.rest_items)) return sequence({"\"[\"", w, witness, w, "\"]\""});
  const std::string item = set_rule(plan.rest_items);
  const std::string before = sequence({item, w, "\",\"", w});
  const std::string after = sequence({"\",\"", w, item, w});
  std::vector<std::string> alternatives;
  auto add = [&](int64_t a_lo, int64_t a_hi, int64_t b_lo, int64_t b_hi) {
    alternatives.push_back(
        sequence({repeat(before, a_lo, a_hi), witness, w, repeat(after, b_lo, b_hi)}));
  };
  if (hi == kUnbounded) {
    for (int64_t a = 0; a < lo; ++a) add(a, a, lo - 1 - a, kUnbounded);
    add(lo, kUnbounded, 0, kUnbounded);
  } else {
    for (int64_t a = 0; a < hi; ++a) add(a, a, std::max<int64_t>(0, lo - 1 - a), hi - 1 - a);
  }
  return sequence({"\"[\"", w, choice(alternatives), "\"]\""});
}

std::string GrammarBuilder::object_expression(const ObjectPlan& plan, const std::string& rule) {
  const std::string w = ws();
  std::vector<const ObjectPlan::Property*> properties;
  for (const auto& property : plan.properties) {
    if (satisfiable(property.schema)) properties.push_back(&property);
  }
  std::vector<std::string> extra_alternatives;
  for (const ObjectPlan::Extra& extra : plan.extras) {
    if (!satisfiable(extra.value)) continue;
    extra_alternatives.push_back(
        sequence({terminal(extra.key_regex, "key"), w, "\":\"", w, set_rule(extra.value)}));
  }
  const bool extras = !extra_alternatives.empty();
  std::string extra_member;
  if (extras) extra_member = sequence({choice(extra_alternatives), w});
  const auto n = static_cast<int64_t>(properties.size());
  std::vector<int64_t> required_after(static_cast<size_t>(n) + 1, 0);
  for (int64_t i = n - 1; i >= 0; --i) {
    required_after[static_cast<size_t>(i)] =
        required_after[static_cast<size_t>(i) + 1] + properties[static_cast<size_t>(i)]->required;
  }
  const int64_t min = plan.min_properties;
  int64_t max = plan.max_properties;
  if (max != kUnbounded && max > n + kMaxRepeat) max = n + kMaxRepeat;  // sound: fewer extras
  // Members are counted only for bounds the required ones do not settle already; otherwise
  // the count is 0 or "some" (which decides whether a comma comes first).
  const bool counting = min > required_after[0] || max != kUnbounded;
  const int64_t cap = !counting ? 1 : (max != kUnbounded ? max : std::max<int64_t>(min, 1));
  auto feasible = [&](int64_t i, int64_t c) {
    if (max != kUnbounded && c + required_after[static_cast<size_t>(i)] > max) return false;
    if (!counting || extras) return true;
    return c + (n - i) >= min;
  };
  if (!feasible(0, 0)) return "";
  compiler_.budget().charge((n + 1) * (cap + 1), "JSON Schema object states");
  // State (i, c): the members from property i on, after c members (capped at `cap`).
  const auto width = static_cast<size_t>(cap) + 1;
  std::vector<char> reachable(static_cast<size_t>(n + 1) * width, 0);
  auto at = [&](int64_t i, int64_t c) {
    return static_cast<size_t>(i) * width + static_cast<size_t>(c);
  };
  auto present_next = [&](int64_t i, int64_t c) -> int64_t {
    if (max != kUnbounded && c + 1 > max) return -1;
    const int64_t next = std::min(c + 1, cap);
    return feasible(i + 1, next) ? next : -1;
  };
  auto absent_ok = [&](int64_t i, int64_t c) {
    return !properties[static_cast<size_t>(i)]->required && feasible(i + 1, c);
  };
  reachable[at(0, 0)] = 1;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c <= cap; ++c) {
      if (!reachable[at(i, c)]) continue;
      if (const int64_t next = present_next(i, c); next >= 0) reachable[at(i + 1, next)] = 1;
      if (absent_ok(i, c)) reachable[at(i + 1, c)] = 1;
    }
  }
  std::vector<std::string> expressions(reachable.size());
  for (int64_t c = 0; c <= cap; ++c) {
    if (!reachable[at(n, c)]) continue;
    const int64_t lo = counting ? std::max<int64_t>(0, min - c) : 0;
    const int64_t hi = max == kUnbounded ? kUnbounded : max - c;
    const std::string more = sequence({"\",\"", w, extra_member});
    std::string& expression = expressions[at(n, c)];
    if (!extras || hi == 0) {
      expression = "";
    } else if (c > 0) {
      expression = repeat(more, lo, hi);
    } else {
      const std::string rest =
          repeat(more, lo == 0 ? 0 : lo - 1, hi == kUnbounded ? kUnbounded : hi - 1);
      expression = sequence({extra_member, rest});
      if (lo == 0) expression = "(" + expression + ")?";
    }
  }
  for (int64_t i = n - 1; i >= 0; --i) {
    const ObjectPlan::Property& property = *properties[static_cast<size_t>(i)];
    const std::string member = sequence({gbnf_literal(canonical_json_string(property.name)), w,
                                         "\":\"", w, set_rule(property.schema), w});
    for (int64_t c = 0; c <= cap; ++c) {
      if (!reachable[at(i, c)]) continue;
      std::vector<std::string> alternatives;
      if (const int64_t next = present_next(i, c); next >= 0) {
        alternatives.push_back(
            sequence({c > 0 ? sequence({"\",\"", w}) : "", member, expressions[at(i + 1, next)]}));
      }
      if (absent_ok(i, c)) alternatives.push_back(expressions[at(i + 1, c)]);
      std::string expression = choice(alternatives);
      // Each state of a property gets its own rule, so the grammar grows linearly.
      if (i > 0 && expression.find(' ') != std::string::npos) {
        const bool optional = expression.front() == '(' && expression.back() == '?';
        const std::string body =
            optional ? expression.substr(1, expression.size() - 3) : expression;
        const std::string name = add_rule(rule + "-p" + std::to_string(i), body);
        expression = optional ? name + "?" : name;
      }
      expressions[at(i, c)] = std::move(expression);
    }
  }
  return sequence({"\"{\"", w, expressions[at(0, 0)], "\"}\""});
}

void GrammarBuilder::shape_alternatives(const ShapePlan& plan, const std::string& rule,
                                        std::vector<std::string>& out) {
  if (plan.values) {
    for (const Json& value : *plan.values) out.push_back(value_literal(value, 0));
    return;
  }
  if (plan.types & kNullType) out.push_back("\"null\"");
  if (plan.types & kBooleanType) {
    out.push_back("\"true\"");
    out.push_back("\"false\"");
  }
  if (plan.types & (kIntegerType | kFractionType)) {
    out.push_back(terminal(plan.number_regex, (plan.types & kFractionType) ? "number" : "integer"));
  }
  if (plan.types & kStringType) out.push_back(terminal(plan.string_regex, "string"));
  if ((plan.types & kArrayType) && array_satisfiable(plan)) {
    out.push_back(array_expression(plan, rule));
  }
  if (plan.types & kObjectType) {
    const std::string object = object_expression(plan.object, rule);
    if (!object.empty()) out.push_back(object);
  }
}

std::string GrammarBuilder::write(const SchemaSet& root) {
  SetPlan& root_plan = sets_.at(root);
  root_plan.rule = "root";
  rule_index_["root"] = rules_.size();
  rules_.emplace_back("root", "");
  name_counts_["root"] = 1;
  pending_.push_back(&sets_.find(root)->first);
  while (!pending_.empty()) {
    const SchemaSet& set = *pending_.front();
    pending_.erase(pending_.begin());
    const SetPlan& plan = sets_.at(set);
    std::vector<std::string> alternatives;
    for (size_t i = 0; i < plan.shapes.size(); ++i) {
      if (shape_satisfiable(plan.shapes[i]))
        shape_alternatives(plan.shapes[i], plan.rule, alternatives);
    }
    std::vector<std::string> unique;
    std::unordered_set<std::string> seen;
    for (const std::string& a : alternatives) {
      if (!a.empty() && seen.insert(a).second) unique.push_back(a);
    }
    std::string body;
    for (size_t i = 0; i < unique.size(); ++i) body += (i ? " | " : "") + unique[i];
    rules_[rule_index_.at(plan.rule)].second = std::move(body);
  }
  std::string out;
  for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
  if (!ws().empty()) {
    out += "ws ::= [ \\t\\n\\r]{0," + std::to_string(compiler_.options().max_whitespace) + "}\n";
  }
  return out;
}

std::string GrammarBuilder::build(const SchemaSet& root) {
  discover(root);
  solve_satisfiability();
  if (!satisfiable(root)) SchemaCompiler::refuse("JSON Schema: no value satisfies the schema");
  return write(root);
}

}  // namespace llms::structured::jsonschema
