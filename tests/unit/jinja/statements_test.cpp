// Statements: for (loop variables, else, filters, unpacking, break/continue), if/elif/else, set
// and block set, scoping, namespace(), macros (defaults, caller, recursion), call blocks, with,
// filter blocks. Expected strings come from jinja2 3.1.6 (transformers' settings).
#include <gtest/gtest.h>

#include "render_util.h"

namespace llms::jinja::testing {
namespace {

const Case kLoops[] = {
    {"{% for i in range(3) %}{{ i }}{% if not loop.last %}, {% endif %}{% endfor %}", "",
     "0, 1, 2"},
    {"{% for m in msgs %}{% if loop.first %}F{% endif %}{{ loop.index }}{{ loop.index0 }}{{ "
     "loop.revindex }}"
     "{{ loop.revindex0 }}{{ loop.length }}{% if loop.last %}L{% endif %};{% endfor %}",
     R"({"msgs": ["a", "b"]})", "F10212;21102L;"},
    {"{% for i in 'abc' %}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('x', 'y') }}|{% "
     "endfor %}",
     "", "bx|acy|bx|"},
    {"{% for i in [1, 2, 3, 4] if i is even %}{{ loop.index }}/{{ loop.length }}/{{ loop.revindex "
     "}}/{{ loop.last }};{% endfor %}",
     "", "1/2/2/False;2/2/1/True;"},
    {"{% for i in [1, 2] if i > 5 %}x{% else %}none{% endfor %}|{% for i in range(0) %}x{% else "
     "%}empty{% endfor %}",
     "", "none|empty"},
    {"{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% "
     "endif %}{{ i }}{% endfor %}",
     "", "0134"},
    {"{% for k in d %}{{ k }}{% endfor %}|{% for k, v in d|dictsort %}{{ k }}{{ v }}{% endfor "
     "%}|{% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %}",
     R"({"d": {"b": 1, "a": 2}})", "ba|a2b1|b1a2"},
    {"{% for a, b in [[1, 2], [3, 4]] %}{{ a }}{{ b }}{% endfor %}|{% for i in range(5, 0, -2) "
     "%}{{ i }}{% endfor %}",
     "", "1234|531"},
    {"{% for i in [1] %}{% for j in [2] %}{{ loop.index }}{{ j }}{% endfor %}{{ loop.index }}{% "
     "endfor %}",
     "", "121"},
    {"{% for x in u %}a{% else %}undefined iterates as empty{% endfor %}", "",
     "undefined iterates as empty"},
};

const Case kConditionals[] = {
    {"{% if x %}a{% elif msgs %}b{% else %}c{% endif %}", R"({"msgs": [1]})", "b"},
    {"{% if x %}a{% elif y %}b{% else %}c{% endif %}", "", "c"},
    {"{% if 0 %}a{% elif [] %}b{% elif 'x' %}c{% endif %}", "", "c"},
};

const Case kScoping[] = {
    // Each loop iteration starts from the outer value; sets do not leak out of loops.
    {"{% set x = 0 %}{% for i in range(3) %}{{ x }}{% set x = i %}{% endfor %}{{ x }}", "", "0000"},
    {"{% for i in [1, 2] %}{% if true %}{% set y = i %}{% endif %}{{ y }}{% endfor %}[{{ y }}]", "",
     "12[]"},
    {"{% set found = false %}{% for m in [1] %}{% set found = true %}{% endfor %}{{ found }}", "",
     "False"},
    {"{% set a = 'x' %}{% for a in [1] %}{{ a }}{% endfor %}{{ a }}", "", "1x"},
    // namespace() carries state out of loops.
    {"{% set ns = namespace(c=0) %}{% for i in range(3) %}{% set ns.c = ns.c + i %}{% endfor %}{{ "
     "ns.c }}",
     "", "3"},
    {"{% set ns = namespace(found=false, items=[]) %}{% for m in msgs %}{% if m.role == 'user' "
     "%}{% set ns.found = true %}"
     "{% set ns.items = ns.items + [m.content] %}{% endif %}{% endfor %}{{ ns.found }}{{ ns.items "
     "}}",
     R"({"msgs": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})",
     "True['hi']"},
    {"{% set ns = namespace(a=1) %}{{ ns }}{{ ns.a }}{{ ns.b }}|{% set n = namespace() %}{% set "
     "n.x = 5 %}{{ n.x }}",
     "", "<Namespace {'a': 1}>1|5"},
    {"{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set a, b = b, a %}{{ a }}{{ b }}", "", "1221"},
    {"{% set x = 5 %}{% with x = 1, y = x %}{{ x }}{{ y }}{% endwith %}{{ x }}", "", "155"},
    {"{% set x %}a{{ 1 }}b{% endset %}[{{ x }}]{% set y | upper %}q{% endset %}{{ y }}", "",
     "[a1b]Q"},
    {"{% set messages = messages[1:] %}{{ messages|length }}", R"({"messages": [1, 2, 3]})", "2"},
};

const Case kMacros[] = {
    {"{% macro m(a, b='x') %}[{{ a }}{{ b }}{{ varargs }}{{ kwargs }}]{% endmacro %}{{ m(1) }}{{ "
     "m(1, 2) }}{{ m(b=3, a=4) }}",
     "", "[1x(){}][12(){}][43(){}]"},
    {"{% macro m() %}{{ x }}{% endmacro %}{% set x = 1 %}{{ m() }}{% set x = 2 %}{{ m() }}", "",
     "12"},
    {"{% for i in [1, 2] %}{% macro m() %}{{ i }}{% endmacro %}{{ m() }}{% endfor %}", "", "12"},
    {"{% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}in{% endcall %}", "", "<in>"},
    {"{% macro list_items(items) %}{% for i in items %}<{{ caller(i) }}>{% endfor %}{% endmacro %}"
     "{% call(item) list_items([1, 2]) %}#{{ item }}{% endcall %}",
     "", "<#1><#2>"},
    {"{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro "
     "%}{{ fact(5) }}",
     "", "120"},
    {"{% macro d(a, b=a ~ '!') %}{{ b }}{% endmacro %}{{ d('hi') }}", "", "hi!"},
};

const Case kOtherTags[] = {
    {"{% filter upper %}hello {{ 'x' }}{% endfilter %}", "", "HELLO X"},
    {"{% with a = 1 %}{{ a }}{% endwith %}{{ a }}", "", "1"},
    {"{% generation %}gen {{ 1 }}{% endgeneration %}", "", "gen 1"},
    {"{% print 1, 'a' %}", "", "1a"},
};

void run(const Case* begin, const Case* end) {
  for (const Case* c = begin; c != end; ++c) {
    SCOPED_TRACE(c->tmpl);
    EXPECT_EQ(render(c->tmpl, c->context), c->expected);
  }
}

TEST(JinjaStatements, ForLoops) { run(std::begin(kLoops), std::end(kLoops)); }
TEST(JinjaStatements, Conditionals) { run(std::begin(kConditionals), std::end(kConditionals)); }
TEST(JinjaStatements, ScopingAndAssignment) { run(std::begin(kScoping), std::end(kScoping)); }
TEST(JinjaStatements, Macros) { run(std::begin(kMacros), std::end(kMacros)); }
TEST(JinjaStatements, FilterWithGenerationPrint) {
  run(std::begin(kOtherTags), std::end(kOtherTags));
}

TEST(JinjaStatements, StrftimeNowUsesTheConfiguredClock) {
  RenderOptions options;
  options.now_unix_seconds = 86400 * 365;  // 1971-01-01 (local time may shift the day)
  const std::string year = render("{{ strftime_now('%Y') }}", "{}", options);
  EXPECT_TRUE(year == "1971" || year == "1970") << year;
  EXPECT_EQ(render("{{ strftime_now('') }}|{{ strftime_now('%%') }}", "{}", options), "|%");
}

}  // namespace
}  // namespace llms::jinja::testing
