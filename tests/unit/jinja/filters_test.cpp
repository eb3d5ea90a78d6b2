// Filters, including transformers' tojson (json.dumps with ensure_ascii=False, key order kept).
// Expected strings come from jinja2 3.1.6 (transformers' settings).
#include <gtest/gtest.h>

#include "render_util.h"

namespace llms::jinja::testing {
namespace {

const Case kFilters[] = {
    {"{{ 'Hello World-foo(bar' | title }} {{ 'hELLO' | capitalize }} {{ 'Hello World'|lower|upper "
     "}}",
     "", "Hello World-Foo(Bar Hello HELLO WORLD"},
    {"{{ '  x  '|trim }}|{{ 'xxyxx'|trim('x') }}|{{ 'Hello'|replace('l', 'L') }}|{{ "
     "'aaa'|replace('a', 'b', 2) }}|{{ 'abc'|replace('', '-') }}",
     "", "x|y|HeLLo|bba|-a-b-c-"},
    {"{{ [3, 1, 2]|length }}{{ 'h\u00e9'|length }}{{ {'a': 1}|length }}{{ u|length }}{{ "
     "'abc'|count }}",
     "", "32103"},
    {"{{ [1, 2]|first }}{{ [1, 2]|last }}{{ 'ab'|first }}{{ []|first }}|{{ {'k': 1}|first }}", "",
     "12a|k"},
    {"{{ ''|default('a', true) }}{{ u|default('b') }}{{ none|default('c') }}{{ 0|default(5) }}{{ "
     "u|d('d') }}",
     "", "abNone0d"},
    {"{{ [1, 2]|join('-') }}|{{ ['a', 'b']|join }}|{{ msgs|join(',', attribute='role') }}",
     R"({"msgs": [{"role": "user"}, {"role": "assistant"}]})", "1-2|ab|user,assistant"},
    {"{{ 'abc'|list }}{{ d|list }}{{ u|list }}{{ range(3)|list }}{{ range(1, 10, 3)|list }}",
     R"({"d": {"b": 1, "a": 2}})", "['a', 'b', 'c']['b', 'a'][][0, 1, 2][1, 4, 7]"},
    {"{{ 3.7|int }} {{ '3.7'|int }} {{ 'x'|int }} {{ '42'|int }} {{ ' 42 '|int }} {{ '0x1A'|int }} "
     "{{ '0x1A'|int(base=16) }} {{ true|int }} {{ -1.5|int }}",
     "", "3 3 0 42 42 0 26 1 -1"},
    {"{{ 5|float }} {{ '1.5'|float }} {{ 'abc'|float }} {{ ' inf '|float }} {{ '1e3'|float }}", "",
     "5.0 1.5 0.0 inf 1000.0"},
    {"{{ 2.5|round }} {{ 3.14159|round(2) }} {{ 2.675|round(2) }} {{ 2|round }} {{ -2.5|round }} "
     "{{ 1.5|round }} {{ 7|round(-1) }}",
     "", "2.0 3.14 2.67 2 -2.0 2.0 10"},
    {"{{ 2.567|round(1, 'floor') }} {{ 2.5|round(0, 'ceil') }} {{ 1234.5|round(-2) }}", "",
     "2.5 3.0 1200.0"},
    {"{{ 5|string }}{{ none|string }}{{ [1]|string }}{{ u|string }}|", "", "5None[1]|"},
    {"{{ ['b', 'A', 'a', 'C']|sort }} {{ ['b', 'A', 'a', 'C']|unique|list }} {{ [3, 1, "
     "2]|sort(reverse=true) }} {{ ['a', 'B']|sort(case_sensitive=true) }}",
     "", "['A', 'a', 'b', 'C'] ['b', 'A', 'C'] [3, 2, 1] ['B', 'a']"},
    {"{{ [{'n': 2}, {'n': 1}]|sort(attribute='n') }} {{ [[2, 'b'], [1, 'a']]|sort }} {{ [1, 2, "
     "1]|unique|list }}",
     "", "[{'n': 1}, {'n': 2}] [[1, 'a'], [2, 'b']] [1, 2]"},
    {"{{ {'b': 1, 'A': 2, 'a': 3}|dictsort }}{{ {'b': 1, 'a': 3}|dictsort(by='value', "
     "reverse=true) }}",
     "", "[('A', 2), ('a', 3), ('b', 1)][('a', 3), ('b', 1)]"},
    {"{{ 'abc'|reverse }}{{ [1, 2]|reverse|list }}", "", "cba[2, 1]"},
    {"{{ [3, 1, 2]|max }}{{ [3, 1, 2]|min }}{{ [3, 1, 2]|sum }}{{ [1, 2]|sum(start=10) }}{{ ['b', "
     "'A']|min }}{{ [-5]|first|abs }}",
     "", "31613A5"},
    {"{{ msgs|map(attribute='role')|list }} {{ msgs|selectattr('role', 'equalto', "
     "'user')|list|length }} {{ msgs|rejectattr('content')|list }}",
     R"({"msgs": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}]})",
     "['user', 'assistant'] 1 [{'role': 'assistant', 'content': ''}]"},
    {"{{ msgs|map(attribute='x', default='z')|join(',') }} {{ "
     "msgs|selectattr('content')|map(attribute='content')|first }}",
     R"({"msgs": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}]})",
     "z,z hi"},
    {"{{ [1, 2, 3]|select('odd')|list }} {{ ['a', 'b']|map('upper')|join }} {{ [1, 2, "
     "3]|reject('odd')|list }} {{ [1, 2, 3, 4]|select('divisibleby', 2)|list }}",
     "", "[1, 3] AB [2] [2, 4]"},
    {"{{ [{'a': {'b': 'deep'}}]|map(attribute='a.b')|first }}{{ [[1, 2]]|map(attribute='1')|list "
     "}}{{ [1, 2, 3]|map('string')|join(',') }}",
     "", "deep[2]1,2,3"},
    {"{{ {'a': 1}|items|list }}{{ u|items|list }}{{ [1, 2, 3]|batch(2)|list }}{{ 'a b c'|wordcount "
     "}}",
     "", "[('a', 1)][][[1, 2], [3]]3"},
    {"{{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb\n'|indent(2, blank=true) "
     "}}|{{ 'a\n\nb'|indent(width='> ') }}",
     "", "a\n  b\n\n  c|  a\n  b|a\n  \n  b\n  |a\n\n> b"},
    {"{{ 'x'|e }}{{ '<a&\"\\'>'|e }}{{ '<'|safe }}{{ '<b>'|escape }}", "",
     "x&lt;a&amp;&#34;&#39;&gt;<&lt;b&gt;"},
    {"{{ '%s-%s'|format('a', 1) }}", "", "a-1"},
};

const Case kToJson[] = {
    {"{{ {'b': 1, 'a': 2}|tojson }} {{ 'é<>'|tojson }} {{ d|tojson(sort_keys=true) }}",
     R"({"d": {"b": 1, "a": 2}})", "{\"b\": 1, \"a\": 2} \"é<>\" {\"a\": 2, \"b\": 1}"},
    {"{{ {'b': 1, 'a': [1, 2]}|tojson(indent=2) }}", "",
     "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    2\n  ]\n}"},
    {"{{ {'a': []}|tojson(indent=2) }}{{ {}|tojson(indent=2) }}{{ [1, 2]|tojson(indent='\t') }}",
     "", "{\n  \"a\": []\n}{}[\n\t1,\n\t2\n]"},
    {"{{ {'a': {'b': 1}}|tojson(separators=(',', ':')) }} {{ [1, 'é', none, true, 1.5]|tojson }}",
     "", "{\"a\":{\"b\":1}} [1, \"é\", null, true, 1.5]"},
    {"{{ 'a\"b\\\\c\nd\te\x01'|tojson }}", "", "\"a\\\"b\\\\c\\nd\\te\\u0001\""},
    {"{{ 3.0|tojson }} {{ 1e20|tojson }} {{ 0.1|tojson }} {{ -0.0|tojson }} {{ "
     "'é'|tojson(ensure_ascii=true) }}",
     "", "3.0 1e+20 0.1 -0.0 \"\\u00e9\""},
    {"{{ t|tojson }}", R"({"t": {"z": [1, {"y": null}], "x": "\u65e5\ud83c\udf89", "w": 1.25e-7}})",
     "{\"z\": [1, {\"y\": null}], \"x\": \"日🎉\", \"w\": 1.25e-07}"},
};

TEST(JinjaFilters, BuiltinFilters) {
  for (const Case& c : kFilters) {
    SCOPED_TRACE(c.tmpl);
    EXPECT_EQ(render(c.tmpl, c.context), c.expected);
  }
}

TEST(JinjaFilters, ToJsonIsTransformersJsonDumps) {
  for (const Case& c : kToJson) {
    SCOPED_TRACE(c.tmpl);
    EXPECT_EQ(render(c.tmpl, c.context), c.expected);
  }
}

TEST(JinjaFilters, ToJsonOfUndefinedFails) {
  EXPECT_NE(render_error("{{ nothing|tojson }}").find("not JSON serializable"), std::string::npos);
}

TEST(JinjaFilters, PlainJsonContextSortsKeysWhileOrderedJsonKeepsThem) {
  const auto tmpl = Template::parse("{{ d|tojson }}");
  const std::string text = R"({"d": {"b": 1, "a": 2}})";
  EXPECT_EQ(tmpl.render(nlohmann::ordered_json::parse(text)), R"({"b": 1, "a": 2})");
  EXPECT_EQ(tmpl.render(nlohmann::json::parse(text)), R"({"a": 2, "b": 1})");
}

}  // namespace
}  // namespace llms::jinja::testing
