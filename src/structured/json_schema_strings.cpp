// structured/json_schema_strings: a string's constraints -> the regex of its JSON text.
//
// Lengths count code points (an escape is one). A pattern or a format is a language over code
// points (formats are written below as anchored patterns); with minLength/maxLength the length
// bounds are pushed into its repetition counts when the pattern's shape allows it; else, with a
// maxLength, every open-ended repetition is capped at the largest common count (8 or more) that
// keeps the whole within it (a sound restriction: fewer strings); else the schema is refused. Two
// different patterns/formats on one string would need an intersection the grammar cannot write:
// refused.
//
// Formats (each exactly the strings described; all are also accepted by Python jsonschema's
// checkers, so they are sound for either reading):
//   date       RFC 3339 full-date, days per month and leap years exact, year 0001-9999
//   time       RFC 3339 full-time: hh:mm:ss, optional fraction, Z or +hh:mm (no leap second 60)
//   date-time  date "T" time (t and z accepted in lower case, as RFC 3339 allows)
//   uuid       RFC 4122 text: 8-4-4-4-12 hex digits, either case
//   email      RFC 5321 Mailbox in its common form: a dot-atom local part, '@', a domain of
//              letter-digit-hyphen labels (no quoted local parts, no address literals)
//   idn-email  the same with RFC 6531 non-ASCII characters in the local part
//   ipv4       RFC 2673 dotted-quad: four decimal 0-255 without leading zeros
//   ipv6       RFC 4291 section 2.2 text forms (with ::, with a dotted-quad tail), no zone id
//   uri, uri-reference      RFC 3986 URI and URI-reference
//   iri, iri-reference      RFC 3987 IRI and IRI-reference
//   hostname   RFC 1123 names, labels of letters, digits and inner hyphens, the last one
//              beginning with a letter (RFC 1123 2.1), at most 253 characters: kept by bounding
//              labels and their count together (up to 4 labels of 62 characters, 8 of 30 or 16
//              of 14), a sound restriction
//   duration   RFC 3339 appendix A (P1Y2M3DT4H5M6S, P3W)
//   json-pointer, relative-json-pointer   RFC 6901 and its relative form
#include <algorithm>
#include <string>
#include <unordered_map>

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

// RFC 3986 URIs and relative references; with `international`, RFC 3987 IRIs (ucschar allowed
// where unreserved characters are, iprivate in queries).
std::string uri(bool international, bool reference) {
  const std::string ucs = international
                              ? "\\u00A0-\\uD7FF\\uF900-\\uFDCF\\uFDF0-\\uFFEF\\u{10000}-\\u{1FFFD}"
                                "\\u{20000}-\\u{2FFFD}\\u{30000}-\\u{3FFFD}\\u{40000}-\\u{4FFFD}"
                                "\\u{50000}-\\u{5FFFD}\\u{60000}-\\u{6FFFD}\\u{70000}-\\u{7FFFD}"
                                "\\u{80000}-\\u{8FFFD}\\u{90000}-\\u{9FFFD}\\u{A0000}-\\u{AFFFD}"
                                "\\u{B0000}-\\u{BFFFD}\\u{C0000}-\\u{CFFFD}\\u{D0000}-\\u{DFFFD}"
                                "\\u{E1000}-\\u{EFFFD}"
                              : "";
  const std::string pct = "%[0-9A-Fa-f]{2}";
  const std::string unreserved_subs = "A-Za-z0-9\\-._~!$&'()*+,;=" + ucs;
  auto chars = [&](const std::string& extra) {
    return "(?:[" + unreserved_subs + extra + "]|" + pct + ")";
  };
  const std::string pchar = chars(":@");
  const std::string segment = pchar + "*", segment_nz = pchar + "+";
  const std::string ipv6_literal =
      "\\[(?:" + ipv6() + "|v[0-9A-Fa-f]+\\.[A-Za-z0-9\\-._~!$&'()*+,;=:]+)\\]";
  const std::string authority =
      "(?:" + chars(":") + "*@)?(?:" + ipv6_literal + "|" + chars("") + "*)(?::[0-9]*)?";
  const std::string path_abempty = "(?:/" + segment + ")*";
  const std::string query_chars =
      international ? "/?\\uE000-\\uF8FF\\u{F0000}-\\u{FFFFD}\\u{100000}-\\u{10FFFD}" : "/?";
  const std::string query = "(?:\\?(?:" + pchar + "|[" + query_chars + "])*)?";
  const std::string fragment = "(?:#(?:" + pchar + "|[/?])*)?";
  const std::string scheme = "[A-Za-z][A-Za-z0-9+\\-.]*";
  const std::string hier = "(?://" + authority + path_abempty + "|/(?:" + segment_nz + "(?:/" +
                           segment + ")*)?|" + segment_nz + "(?:/" + segment + ")*)?";
  const std::string absolute = scheme + ":" + hier + query + fragment;
  if (!reference) return absolute;
  // A relative reference: its first segment has no ':' (else it would read as a scheme).
  const std::string segment_nc = chars("@") + "+";
  const std::string relative = "(?://" + authority + path_abempty + "|/(?:" + segment_nz + "(?:/" +
                               segment + ")*)?|" + segment_nc + "(?:/" + segment + ")*)?" + query +
                               fragment;
  return "(?:" + absolute + "|" + relative + ")";
}

// RFC 1123 host names of at most 253 characters. The total length is kept by bounding labels
// and their count together (4 labels of up to 62 characters, 8 of up to 30, or 16 of up to 14):
// a sound restriction, since longer names are rare and a count across labels has no regex.
std::string hostname() {
  std::string out = "(?:";
  const std::pair<int, int> tiers[] = {{4, 62}, {8, 30}, {16, 14}};
  for (size_t i = 0; i < std::size(tiers); ++i) {
    const auto [count, length] = tiers[i];
    const std::string inner =
        "(?:[A-Za-z0-9\\-]{0," + std::to_string(length - 2) + "}[A-Za-z0-9])?";
    // The last label begins with a letter (RFC 1123 2.1: the top-level label is alphabetic), so
    // that no host name reads as an IPv4 address.
    out += std::string(i ? "|" : "") + "(?:[A-Za-z0-9]" + inner + "\\.){0," +
           std::to_string(count - 1) + "}[A-Za-z]" + inner;
  }
  return out + ")";
}

// RFC 3339 appendix A durations.
std::string duration() {
  const std::string second = "[0-9]+S", minute = "[0-9]+M(?:" + second + ")?",
                    hour = "[0-9]+H(?:" + minute + ")?";
  const std::string time = "T(?:" + hour + "|" + minute + "|" + second + ")";
  const std::string day = "[0-9]+D", month = "[0-9]+M(?:" + day + ")?",
                    year = "[0-9]+Y(?:" + month + ")?";
  const std::string date = "(?:" + day + "|" + month + "|" + year + ")(?:" + time + ")?";
  return "P(?:" + date + "|" + time + "|[0-9]+W)";
}

// The language of a known format as an anchored pattern, or empty when unknown.
std::string format_source(const std::string& name) {
  if (name == "date") return std::string("^") + kDate + "$";
  if (name == "time") return std::string("^") + kTime + "$";
  if (name == "date-time") return std::string("^") + kDate + "[Tt]" + kTime + "$";
  if (name == "uuid") {
    return "^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$";
  }
  if (name == "email" || name == "idn-email") {
    // idn-email (RFC 6531): non-ASCII characters in the local part too; the domain stays in
    // its ASCII form (a subset of internationalized domains).
    const std::string atext = name == "email"
                                  ? "[A-Za-z0-9!#$%&'*+/=?^_`{|}~\\-]+"
                                  : "[A-Za-z0-9!#$%&'*+/=?^_`{|}~\\-\\u0080-\\u{10FFFF}]+";
    const std::string label = "[A-Za-z0-9](?:[A-Za-z0-9\\-]{0,61}[A-Za-z0-9])?";
    return "^" + atext + "(?:\\." + atext + ")*@" + label + "(?:\\." + label + ")*$";
  }
  if (name == "ipv4") return "^" + ipv4() + "$";
  if (name == "ipv6") return "^" + ipv6() + "$";
  if (name == "uri") return "^" + uri(false, false) + "$";
  if (name == "uri-reference") return "^" + uri(false, true) + "$";
  if (name == "iri") return "^" + uri(true, false) + "$";
  if (name == "iri-reference") return "^" + uri(true, true) + "$";
  if (name == "hostname") return "^" + hostname() + "$";
  if (name == "duration") return "^" + duration() + "$";
  if (name == "json-pointer") return "^(?:/(?:[^~/]|~[01])*)*$";
  if (name == "relative-json-pointer") {
    return "^(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^~/]|~[01])*)*)$";
  }
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
    refuse_keyword(
        "format", format.pointer,
        "the format '" + format.text +
            "' is not supported (date, time, date-time, duration, uuid, email, idn-email, "
            "ipv4, ipv6, hostname, uri, uri-reference, iri, iri-reference, json-pointer and "
            "relative-json-pointer are)");
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

// The regex of the characters other than `used` (its code points in order), written once per
// set: a trie's nodes continue with a few letters each, the same few again and again.
using OtherCharacters = std::unordered_map<std::u32string, std::string>;

// A string outside the trie either leaves it (a path of the trie, then a character no name
// continues with, then anything: `diverging` appends the part up to that character, the
// "anything" is written once after it), or stops inside it where no name ends (`unfinished`).
// Appended in place: a large schema's tries are thousands of nodes deep in total, and building
// each subtree's text apart copied it once per level.
void diverging(const TrieNode& node, StringSpelling spelling, CompileBudget& budget,
               OtherCharacters& others, std::string& out) {
  budget.charge(1, "excluded string alternatives");
  std::u32string used;
  out += "(?:";
  bool first = true;
  for (const auto& [cp, child] : node.children) {
    used.push_back(cp);
    const std::string atom = json_char_regex(CodePointSet::of(cp), spelling);
    if (atom.empty()) continue;  // a character this spelling cannot write
    if (!first) out.push_back('|');
    first = false;
    out += atom;
    diverging(*child, spelling, budget, others, out);
  }
  // `used` holds one character per name at most, so some character always remains.
  if (!first) out.push_back('|');
  auto [it, inserted] = others.try_emplace(used);
  if (inserted) {
    CodePointSet set;
    for (char32_t cp : used) set.add(cp, cp);
    it->second = json_char_regex(set.complement(), spelling);
  }
  out += it->second;
  out.push_back(')');
}

// The trie's paths on which no name ends; nullopt when there is none.
std::optional<std::string> unfinished(const TrieNode& node, StringSpelling spelling,
                                      CompileBudget& budget) {
  budget.charge(1, "excluded string alternatives");
  std::vector<std::string> alternatives;
  for (const auto& [cp, child] : node.children) {
    const std::string atom = json_char_regex(CodePointSet::of(cp), spelling);
    if (atom.empty()) continue;
    if (auto rest = unfinished(*child, spelling, budget)) alternatives.push_back(atom + *rest);
  }
  if (alternatives.empty()) {
    if (node.terminal) return std::nullopt;
    return std::string();
  }
  std::string out = "(?:";
  for (size_t i = 0; i < alternatives.size(); ++i) out += (i ? "|" : "") + alternatives[i];
  out += ")";
  if (!node.terminal) out += "?";
  return out;
}

std::string strings_except(const TrieNode& root, StringSpelling spelling, CompileBudget& budget) {
  const std::string any = json_char_regex(CodePointSet::all(), spelling);
  std::string out = "(?:";
  OtherCharacters others;
  diverging(root, spelling, budget, others, out);
  out += any + "*";
  if (auto rest = unfinished(root, spelling, budget)) {
    if (rest->empty()) return out + ")?";
    out += "|" + *rest;
  }
  return out + ")";
}

}  // namespace

const std::string& SchemaCompiler::strings_except(const std::vector<std::string>& excluded,
                                                  StringSpelling spelling) {
  auto key = std::make_pair(spelling, excluded);
  auto it = strings_except_.find(key);
  if (it == strings_except_.end()) {
    std::string regex = strings_except_regex(excluded, spelling, budget_);
    it = strings_except_.emplace(std::move(key), std::move(regex)).first;
  }
  return it->second;
}

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

namespace {

// A capped repetition below this many iterations would change the language too much: refuse.
constexpr int64_t kMinCap = 8;

// `node` with every open-ended repetition allowed at most max(min, cap) iterations.
PatternNode cap_repetitions(const PatternNode& node, int64_t cap) {
  PatternNode out = node;
  for (PatternNode& child : out.children) child = cap_repetitions(child, cap);
  if (out.kind == PatternNode::Kind::kRepeat && out.max == kUnbounded) {
    out.max = std::max(out.min, cap);
  }
  return out;
}

}  // namespace

std::optional<std::string> SchemaCompiler::string_regex(const StringShape& shape,
                                                        StringSpelling spelling) {
  // What the regex depends on: texts by length, so that no two lists spell the same key.
  std::string key = std::to_string(static_cast<int>(spelling)) + ',' +
                    std::to_string(shape.min_length) + ',' + std::to_string(shape.max_length);
  auto add = [&](char tag, const std::string& text) {
    key += tag + std::to_string(text.size()) + ':' + text;
  };
  for (const Sourced& p : shape.patterns) add('p', p.text);
  for (const Sourced& f : shape.formats) add('f', f.text);
  for (const std::string& e : shape.excluded) add('x', e);
  if (auto it = string_regexes_.find(key); it != string_regexes_.end()) return it->second;
  std::optional<std::string> regex = compute_string_regex(shape, spelling);  // may refuse
  string_regexes_.emplace(std::move(key), regex);
  return regex;
}

std::optional<std::string> SchemaCompiler::compute_string_regex(const StringShape& shape,
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
    // One spelling per value, so that excluding a value's text excludes the value.
    return "\"" + strings_except(shape.excluded, StringSpelling::kCanonical) + "\"";
  }
  if (languages.empty()) {
    // A counted string costs the grammar engine one automaton state per count and character
    // state; the canonical spelling has about half the character states of "any escape".
    const StringSpelling counted_spelling =
        max_length == kUnbounded && min_length <= 1 ? spelling : StringSpelling::kCanonical;
    const std::string any = json_char_regex(CodePointSet::all(), counted_spelling);
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
  if (!constrained && max_length != kUnbounded) {
    // The bound cannot go into one repetition: cap every open-ended repetition at the largest
    // common count (at least kMinCap) that keeps the whole within maxLength. A sound restriction.
    int64_t lo = kMinCap, hi = max_length, best = -1;
    while (lo <= hi) {
      const int64_t cap = lo + (hi - lo) / 2;
      budget_.charge(1, "pattern length caps");
      const LengthRange length = pattern_length(simplify_pattern(cap_repetitions(language, cap)));
      if (length.max != kUnbounded && length.max <= max_length) {
        best = cap, lo = cap + 1;
      } else {
        hi = cap - 1;
      }
    }
    if (best >= 0) {
      constrained = constrain_pattern_length(simplify_pattern(cap_repetitions(language, best)),
                                             min_length, max_length, budget_);
    }
  }
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
