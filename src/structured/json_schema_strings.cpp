// structured/json_schema_strings: a string's constraints -> the regex of its JSON text.
//
// Lengths count code points (an escape is one). A pattern or a format is a language over code
// points (formats are written below as anchored patterns); with minLength/maxLength the length
// bounds are pushed into its repetition counts when the pattern's shape allows it, else the
// schema is refused. Two different patterns/formats on one string would need an intersection
// the grammar cannot write: refused.
//
// Formats (each exactly the strings described; all are also accepted by Python jsonschema's
// checkers, so they are sound for either reading):
//   date       RFC 3339 full-date, days per month and leap years exact, year 0001-9999
//   time       RFC 3339 full-time: hh:mm:ss, optional fraction, Z or +hh:mm (no leap second 60)
//   date-time  date "T" time (t and z accepted in lower case, as RFC 3339 allows)
//   uuid       RFC 4122 text: 8-4-4-4-12 hex digits, either case
//   email      RFC 5321 Mailbox in its common form: a dot-atom local part, '@', a domain of
//              letter-digit-hyphen labels (no quoted local parts, no address literals)
//   ipv4       RFC 2673 dotted-quad: four decimal 0-255 without leading zeros
//   ipv6       RFC 4291 section 2.2 text forms (with ::, with a dotted-quad tail), no zone id
#include <algorithm>

#include "json_schema_compiler.h"
#include "util/error.h"
#include "util/utf8.h"

namespace llms::structured::jsonschema {

namespace {

const char* const kDate =
    "(?:(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])-"
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|"
    "02-(?:0[1-9]|1[0-9]|2[0-8]))|"
    "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)-02-29)";
const char* const kTime =
    "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]+)?"
    "(?:[Zz]|[+\\-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
const char* const kIpv4Octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";

std::string ipv4() {
  const std::string octet = kIpv4Octet;
  return octet + "(?:\\." + octet + "){3}";
}

std::string ipv6() {
  const std::string h = "[0-9A-Fa-f]{1,4}";
  auto groups = [&](int n) {  // n >= 1 groups joined by ':'
    return n == 1 ? h : h + "(?::" + h + "){" + std::to_string(n - 1) + "}";
  };
  std::vector<std::string> forms{groups(8), groups(6) + ":" + ipv4()};
  // With "::" standing for one or more zero groups: l groups before it, up to 7 - l after
  // (up to 5 - l before a dotted-quad tail).
  for (int l = 0; l <= 7; ++l) {
    const std::string left = l == 0 ? "" : groups(l);
    if (l <= 6) {
      forms.push_back(left + "::(?:" + h + "(?::" + h + "){0," + std::to_string(6 - l) + "})?");
    } else {
      forms.push_back(left + "::");
    }
    if (l <= 5) {
      forms.push_back(left + "::(?:" + h + ":){0," + std::to_string(5 - l) + "}" + ipv4());
    }
  }
  std::string out = "(?:";
  for (size_t i = 0; i < forms.size(); ++i) out += (i ? "|" : "") + forms[i];
  return out + ")";
}

// The language of a known format as an anchored pattern, or empty when unknown.
std::string format_source(const std::string& name) {
  if (name == "date") return std::string("^") + kDate + "$";
  if (name == "time") return std::string("^") + kTime + "$";
  if (name == "date-time") return std::string("^") + kDate + "[Tt]" + kTime + "$";
  if (name == "uuid") {
    return "^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$";
  }
  if (name == "email") {
    const std::string atext = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~\\-]+";
    const std::string label = "[A-Za-z0-9](?:[A-Za-z0-9\\-]{0,61}[A-Za-z0-9])?";
    return "^" + atext + "(?:\\." + atext + ")*@" + label + "(?:\\." + label + ")*$";
  }
  if (name == "ipv4") return "^" + ipv4() + "$";
  if (name == "ipv6") return "^" + ipv6() + "$";
  return {};
}

}  // namespace

const PatternNode& SchemaCompiler::pattern(const Sourced& source) {
  auto found = patterns_.find(source.text);
  if (found != patterns_.end()) return *found->second;
  PatternNode node;
  try {
    node = simplify_pattern(parse_pattern(source.text, budget_));
  } catch (const Error& e) {
    refuse_keyword(source.keyword, source.pointer,
                   "the pattern '" + source.text + "' uses what is not supported: " + e.what());
  }
  return *patterns_.emplace(source.text, std::make_unique<PatternNode>(std::move(node)))
              .first->second;
}

const PatternNode* SchemaCompiler::format_pattern(const Sourced& format) {
  auto found = formats_.find(format.text);
  if (found != formats_.end()) return found->second.get();
  const std::string source = format_source(format.text);
  if (source.empty()) {
    if (options_.ignore_unknown_formats) return nullptr;
    refuse_keyword("format", format.pointer,
                   "the format '" + format.text +
                       "' is not supported (date, time, date-time, uuid, email, ipv4, ipv6 are)");
  }
  auto node = std::make_unique<PatternNode>(simplify_pattern(parse_pattern(source, budget_)));
  return formats_.emplace(format.text, std::move(node)).first->second.get();
}

namespace {

struct TrieNode {
  std::vector<std::pair<char32_t, std::unique_ptr<TrieNode>>> children;  // sorted by code point
  bool terminal = false;
};

constexpr size_t kMaxExcludedLength = 1000;

// JSON string contents whose decoded value is none of the trie's strings (from `node` on).
std::string strings_except(const TrieNode& node, StringSpelling spelling, CompileBudget& budget) {
  budget.charge(1, "excluded string alternatives");
  const std::string any = json_char_regex(CodePointSet::all(), spelling);
  CodePointSet used;
  std::vector<std::string> alternatives;
  for (const auto& [cp, child] : node.children) {
    used.add(cp, cp);
    alternatives.push_back(json_char_regex(CodePointSet::of(cp), spelling) +
                           strings_except(*child, spelling, budget));
  }
  const std::string other = json_char_regex(used.complement(), spelling);
  if (!other.empty()) alternatives.push_back(other + any + "*");
  std::string out = "(?:";
  for (size_t i = 0; i < alternatives.size(); ++i) out += (i ? "|" : "") + alternatives[i];
  out += ")";
  if (!node.terminal) out += "?";  // the string may end here
  return out;
}

}  // namespace

std::string strings_except_regex(const std::vector<std::string>& excluded, StringSpelling spelling,
                                 CompileBudget& budget) {
  TrieNode root;
  for (const std::string& text : excluded) {
    TrieNode* node = &root;
    size_t length = 0;
    for (size_t pos = 0; pos < text.size();) {
      const Utf8Step step = utf8_step(text, pos);
      if (step.kind != Utf8Step::Kind::kValid) {
        SchemaCompiler::refuse("JSON Schema: a property name or value is not valid UTF-8");
      }
      pos += step.length;
      if (++length > kMaxExcludedLength) {
        SchemaCompiler::refuse("JSON Schema: a property name or excluded value is longer than " +
                               std::to_string(kMaxExcludedLength) + " characters");
      }
      auto it = std::lower_bound(node->children.begin(), node->children.end(), step.code_point,
                                 [](const auto& entry, char32_t cp) { return entry.first < cp; });
      if (it == node->children.end() || it->first != step.code_point) {
        budget.charge(1, "excluded string alternatives");
        it = node->children.insert(it, {step.code_point, std::make_unique<TrieNode>()});
      }
      node = it->second.get();
    }
    node->terminal = true;
  }
  return strings_except(root, spelling, budget);
}

std::optional<std::string> SchemaCompiler::string_regex(const StringShape& shape,
                                                        StringSpelling spelling) {
  int64_t min_length = shape.min_length;
  int64_t max_length = shape.max_length;
  const int64_t limit = options_.max_string_length;
  if (min_length > limit) {
    refuse("JSON Schema: minLength " + std::to_string(min_length) +
           " is above the supported maximum of " + std::to_string(limit));
  }
  if (max_length != kUnbounded && max_length > limit) max_length = limit;  // sound: shorter
  if (max_length != kUnbounded && min_length > max_length) return std::nullopt;

  std::vector<std::pair<const PatternNode*, const Sourced*>> languages;
  for (const Sourced& p : shape.patterns) languages.emplace_back(&pattern(p), &p);
  for (const Sourced& f : shape.formats) {
    if (const PatternNode* node = format_pattern(f)) languages.emplace_back(node, &f);
  }
  if (languages.size() > 1) {
    const Sourced& second = *languages[1].second;
    refuse_keyword(second.keyword, second.pointer,
                   "a string with two different patterns or formats ('" +
                       languages[0].second->text + "' and '" + second.text +
                       "') would need their intersection, which is not supported");
  }
  if (!shape.excluded.empty()) {
    if (!languages.empty() || min_length > 0 || max_length != kUnbounded) {
      refuse_keyword("not", "",
                     "excluding string values from a pattern, format or length "
                     "bound is not supported");
    }
    return "\"" + strings_except_regex(shape.excluded, spelling, budget_) + "\"";
  }
  if (languages.empty()) {
    const std::string any = json_char_regex(CodePointSet::all(), spelling);
    std::string body = "(?:" + any + ")";
    if (max_length == kUnbounded) {
      body += min_length == 0   ? "*"
              : min_length == 1 ? "+"
                                : "{" + std::to_string(min_length) + ",}";
    } else if (max_length == 0) {
      body.clear();
    } else if (min_length == max_length) {
      body += "{" + std::to_string(min_length) + "}";
    } else {
      body += "{" + std::to_string(min_length) + "," + std::to_string(max_length) + "}";
    }
    return "\"" + body + "\"";
  }
  const PatternNode& language = *languages[0].first;
  if (is_empty_language(language)) return std::nullopt;
  auto constrained = constrain_pattern_length(language, min_length, max_length, budget_);
  if (!constrained) {
    const Sourced& source = *languages[0].second;
    refuse_keyword(source.keyword, source.pointer,
                   "'" + source.text + "' together with minLength/maxLength (" +
                       std::to_string(min_length) + ".." +
                       (max_length == kUnbounded ? std::string("") : std::to_string(max_length)) +
                       ") cannot be combined (the length would have to be counted across the "
                       "pattern's parts)");
  }
  if (is_empty_language(*constrained)) return std::nullopt;
  return "\"" + pattern_to_json_regex(*constrained, spelling, budget_) + "\"";
}

}  // namespace llms::structured::jsonschema
