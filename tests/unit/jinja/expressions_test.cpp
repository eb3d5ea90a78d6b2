// Expression semantics: literals, precedence, arithmetic, comparisons, tests, lookups, slicing,
// printing of Python values. Expected strings come from jinja2 3.1.6 (transformers' settings).
#include <gtest/gtest.h>

#include "render_util.h"

namespace llms::jinja::testing {
namespace {

const Case kLiterals[] = {
    {R"({{ 1 }}|{{ -2 }}|{{ 1.5 }}|{{ 1_000 }}|{{ 0x1F }}|{{ 0o17 }}|{{ 0b101 }}|{{ 1.5e3 }}|{{ 1e-2 }})",
     "", "1|-2|1.5|1000|31|15|5|1500.0|0.01"},
    {R"({{ 'single' }}|{{ "double" }}|{{ 'a' 'b' "c" }}|{{ 'it\'s' }}|{{ "tab\there" }}|{{ '\u00e9\x41' }})",
     "",
     "single|double|abc|it's|tab\there|\xc3\xa9"
     "A"},
    {R"({{ true }}|{{ True }}|{{ false }}|{{ none }}|{{ None }})", "", "True|True|False|None|None"},
    {R"({{ [1, 'a', none, true, 1.5, {'k': 'v'}] }})", "", "[1, 'a', None, True, 1.5, {'k': 'v'}]"},
    {R"({{ (1, 2) }}|{{ () }}|{{ (1,) }}|{{ [] }}|{{ {} }}|{{ [[]] }})", "",
     "(1, 2)|()|(1,)|[]|{}|[[]]"},
    {R"({{ ["it's", 'a"b', 'both\'"'] }})", "", R"(["it's", 'a"b', 'both\'"'])"},
    {R"({{ ['\n', '\t', '\\', '\x01', '\x7f'] }})", "", R"(['\n', '\t', '\\', '\x01', '\x7f'])"},
};

const Case kFloats[] = {
    {R"({{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 1/3 }} {{ 10/2 }})", "",
     "1e+16 1000000000000000.0 0.0001 1e-05 0.3333333333333333 5.0"},
    {R"({{ 1.0 }} {{ 100.0 }} {{ -0.0 }} {{ 1e-7 }} {{ 123456789012345678.0 }} {{ 1.5e300*1e10 }})",
     "", "1.0 100.0 -0.0 1e-07 1.2345678901234568e+17 inf"},
    {R"({{ 1.1 + 2.2 }} {{ 0.1 * 3 }} {{ 100.0 / 3 }} {{ 123456.789 }} {{ 1.0e10 }})", "",
     "3.3000000000000003 0.30000000000000004 33.333333333333336 123456.789 10000000000.0"},
};

const Case kOperators[] = {
    {R"({{ 1 + 2 * 3 - 4 / 2 }}|{{ 2 ** 3 ** 2 }}|{{ -2 ** 2 }}|{{ 2 * 3 ** 2 }})", "",
     "5.0|64|4|18"},
    {R"({{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** -1 }} {{ 'ab' * 3 }} {{ [1] * 2 }} {{ 3 * 'x' }})",
     "", "-4 2 -2 0.5 ababab [1, 1] xxx"},
    {R"({{ 7.5 // 2 }} {{ -7.5 // 2 }} {{ 7.5 % -2 }} {{ 10.5 % 3 }} {{ 10 / 4 }})", "",
     "3.0 -4.0 -0.5 1.5 2.5"},
    {R"({{ 5 // 2 * 2 }} {{ 10 - 2 - 3 }} {{ 7 % 3 ~ 'x' }} {{ 'a' ~ 1 ~ none ~ true ~ 1.0 }})", "",
     "4 5 1x a1NoneTrue1.0"},
    {R"({{ [1, 2] + [3] }}|{{ 'ab' + 'c' }}|{{ 1 + 1.5 }}|{{ true + 1 }}|{{ 'x' * 0 }}|)", "",
     "[1, 2, 3]|abc|2.5|2||"},
    {R"({{ 1 and 2 }}|{{ 0 or 'x' }}|{{ none or none }}|{{ not 1 }}|{{ u and 1 }}|{{ '' or 'c' }})",
     "", "2|x|None|False||c"},
    {R"({{ not true or true }} {{ not (true or true) }} {{ 1 if true else 2 if false else 3 }} {{ 'a' if false }}|)",
     "", "True False 1 |"},
    {R"({{ -3|abs }} {{ -(3)|abs }} {{ (-3)|abs }} {{ 'ab' in 'xaby' and 1 < 2 }})", "",
     "3 3 3 True"},
    {R"({{ '%s is %d' % ('Bob', 42) }}|{{ '%.2f' % 3.14159 }}|{{ '%5s|%-5s' % ('a', 'b') }}|{{ '%(n)s' % {'n': 1} }}|{{ '%d%%' % 5 }})",
     "", "Bob is 42|3.14|    a|b    |1|5%"},
};

const Case kComparisons[] = {
    {R"({{ 1 == 1.0 }} {{ true == 1 }} {{ [1, 2] == [1, 2] }} {{ [1] == (1,) }} {{ {'a': 1} == {'a': 1} }})",
     "", "True True True False True"},
    {R"({{ 'a' != 'b' }} {{ 1 < 2 }} {{ 2 <= 2 }} {{ 3 > 4 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 < 2 < 3 }} {{ 3 > 2 == 2 }})",
     "", "True True True False True True True True"},
    {R"({{ 'a' in 'cat' }} {{ 'k' in {'k': 1} }} {{ 1 not in [1] }} {{ 'x' in u }} {{ 1 in (1, 2) }})",
     "", "True True False False True"},
    {R"({{ u == u2 }} {{ u == none }} {{ none == none }})", "", "True False True"},
};

const Case kTests[] = {
    {R"({{ x is defined }}{{ none is none }}{{ 1 is number }}{{ true is number }}{{ true is integer }}{{ 'a' is iterable }}{{ {} is sequence }})",
     "", "FalseTrueTrueTrueFalseTrueTrue"},
    {R"({{ 'a' is string }}{{ 1 is string }}{{ {} is mapping }}{{ [] is mapping }}{{ none is mapping }}{{ 3 is divisibleby 3 }}{{ 3 is divisibleby(2) }})",
     "", "TrueFalseTrueFalseFalseTrueFalse"},
    {R"({{ 'a' is in ['a'] }}{{ 1 is eq 1 }}{{ 1.0 is integer }}{{ 1.0 is float }}{{ true is boolean }}{{ 1 is true }}{{ true is true }}{{ false is false }})",
     "", "TrueTrueFalseTrueTrueFalseTrueTrue"},
    {R"({{ 4 is even }}{{ 3 is odd }}{{ 1 is ne 2 }}{{ 2 is gt 1 }}{{ 2 is ge 2 }}{{ 1 is lt 2 }}{{ 2 is le 2 }}{{ 'abc' is lower }}{{ 'A' is upper }})",
     "", "TrueTrueTrueTrueTrueTrueTrueTrueTrue"},
    {R"({{ [] is iterable }}{{ 1 is iterable }}{{ x is undefined }}{{ range is callable }}{{ 1 is sameas 1 }})",
     "", "TrueFalseTrueTrueTrue"},
    {R"({% if x is not defined %}nd{% endif %}{% if not x is defined %}nd2{% endif %}{{ d.x is defined }}{{ d.missing is undefined }})",
     R"({"d": {"x": 1}})", "ndnd2TrueTrue"},
};

const Case kLookups[] = {
    {R"({{ d.a }}{{ d['b'] }}{{ d.missing }}|{{ l[0] }}{{ l[-1] }}{{ l.1 }}{{ l[5] }}|)",
     R"({"d": {"a": 1, "b": 2}, "l": [10, 20, 30]})", "12|103020|"},
    {R"({{ m[0]['role'] }}{{ m[-1].role }}{{ m|length }}{{ m[0].get('role') }}{{ m[0].get('x', 'dflt') }}{{ m[0].get('x') }})",
     R"({"m": [{"role": "user"}, {"role": "assistant"}]})", "userassistant2userdfltNone"},
    {R"({{ 'abc'[1] }}{{ 'abc'[-1] }}{{ 'abc'[10] }}|{{ 'h\u00e9llo'[1:3] }}|{{ 'h\u00e9llo'|length }})",
     "", "bc|\xc3\xa9l|5"},
    {R"({{ [1,2,3,4,5][1:4:2] }}{{ [1,2,3][5:] }}{{ 'abc'[-2:] }}{{ 'abc'[::-1] }}{{ [1,2,3][::-2] }}{{ [1,2,3][-5:10] }}{{ [1,2,3][:-1] }})",
     "", "[2, 4][]bccba[3, 1][1, 2, 3][1, 2]"},
    {R"({{ {'x': {'y': [1, {'z': 'deep'}]}}.x.y[1].z }})", "", "deep"},
    {R"({{ d['items'] }}|{{ none.x }}|{{ (1, 2)[0] }}|{{ d.items()|list }})",
     R"({"d": {"items": 5}})", "5||1|[('items', 5)]"},
};

const Case kStringMethods[] = {
    {R"({{ '  a b  '.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a b c'.split(' ', 1) }} {{ 'xxaxx'.strip('x') }})",
     "", "['a', 'b'] ['a', 'b', '', 'c'] ['a', 'b c'] a"},
    {R"({{ 'x</think>y'.split('</think>')[-1] }}|{{ '  \n hi \t'.strip() }}|{{ 'abc'.lstrip('a') }}|{{ 'abc'.rstrip('c') }})",
     "", "y|hi|bc|ab"},
    {R"({{ 'abc'.startswith(('x', 'a')) }}{{ 'abc'.endswith('c') }}{{ 'a-b-c'.rsplit('-', 1) }}{{ 'abc'.find('c') }}{{ 'aXbX'.replace('X', 'y', 1) }})",
     "", "TrueTrue['a-b', 'c']2aybX"},
    {R"({{ 'hello wORLD'.title() }}|{{ "they're bill's".title() }}|{{ 'hELLO'.capitalize() }}|{{ 'aBc'.swapcase() }}|{{ 'aXb'.lower() }}{{ 'ab'.upper() }})",
     "", "Hello World|They'Re Bill'S|Hello|AbC|axbAB"},
    {R"({{ '{} and {}'.format(1, 'x') }}|{{ '{0}{name}'.format(1, name=2) }}|{{ 'a'.join(['x', 'y']) }}|{{ 'abcabc'.count('b') }}|{{ 'a-b'.partition('-') }})",
     "", "1 and x|12|xay|2|('a', '-', 'b')"},
    {R"({{ '12'.isdigit() }}{{ 'ab'.isalpha() }}{{ ' '.isspace() }}{{ 'ab'.islower() }}{{ 'AB'.isupper() }}{{ ''.isdigit() }})",
     "", "TrueTrueTrueTrueTrueFalse"},
    {R"({{ 'aaa'.rsplit('aa') }}{{ 'aaa'.split('aa') }}{{ 'aaaa'.count('aa') }}{{ 'abcabc'.rfind('bc') }}{{ 'a--b'.replace('-', '') }}{{ 'x'.find('') }}{{ 'xy'.rfind('') }})",
     "", "['a', '']['', 'a']24ab02"},
    {R"({{ 'a\nb\r\nc'.splitlines() }}{{ ' a  b '.rsplit(None, 1) }}{{ 'a.b.c'.rsplit('.', 1) }})",
     "", "['a', 'b', 'c'][' a', 'b']['a.b', 'c']"},
    {R"({% for k, v in {'b': 1, 'a': 2}.items() %}{{ k }}={{ v }};{% endfor %}{{ {'b': 1}.keys()|list }}{{ {'b': 1}.values()|list }})",
     "", "b=1;a=2;['b'][1]"},
};

void run(const Case* begin, const Case* end) {
  for (const Case* c = begin; c != end; ++c) {
    SCOPED_TRACE(c->tmpl);
    EXPECT_EQ(render(c->tmpl, c->context), c->expected);
  }
}

TEST(JinjaExpressions, Literals) { run(std::begin(kLiterals), std::end(kLiterals)); }
TEST(JinjaExpressions, FloatsPrintLikePythonRepr) { run(std::begin(kFloats), std::end(kFloats)); }
TEST(JinjaExpressions, OperatorsAndPrecedence) {
  run(std::begin(kOperators), std::end(kOperators));
}
TEST(JinjaExpressions, Comparisons) { run(std::begin(kComparisons), std::end(kComparisons)); }
TEST(JinjaExpressions, Tests) { run(std::begin(kTests), std::end(kTests)); }
TEST(JinjaExpressions, AttributeItemAndSliceLookups) {
  run(std::begin(kLookups), std::end(kLookups));
}
TEST(JinjaExpressions, StringAndDictMethods) {
  run(std::begin(kStringMethods), std::end(kStringMethods));
}

TEST(JinjaExpressions, SubstringSearchIsLinearOnHostileInput) {
  // A naive search would compare ~50000 bytes at each of ~50000 offsets.
  EXPECT_EQ(render("{{ ('a' * 50000 ~ 'b') in ('a' * 100000 ~ 'b') }}|"
                   "{{ ('a' * 100000 ~ 'b').split('a' * 50000 ~ 'b')|length }}|"
                   "{{ ('a' * 100000).count('a' * 40000 ~ 'b') }}"),
            "True|2|0");
}

TEST(JinjaExpressions, ConcatBindsTighterThanPlus) {
  // 'a' ~ 1 + 2 is ('a' ~ 1) + 2 in jinja2: a str + int error, not "a3".
  EXPECT_NE(render_error("{{ 'a' ~ 1 + 2 }}"), "");
  EXPECT_EQ(render("{{ 'a' ~ (1 + 2) }}"), "a3");
}

TEST(JinjaExpressions, FiltersBindTighterThanBinaryOperators) {
  EXPECT_EQ(render("{{ 1 + [1, 2]|length }}"), "3");
  EXPECT_EQ(render("{{ -5|abs }}"), "5");  // unary minus applies first: abs(-5)
  EXPECT_EQ(render("{{ not [] | length }}"), "True");
}

}  // namespace
}  // namespace llms::jinja::testing
