// Whitespace control as transformers configures jinja2: trim_blocks and lstrip_blocks on, "-"
// strips all whitespace on its side, "+" opts out of lstrip, one trailing newline of the template
// is dropped, CR/CRLF become LF. Expected strings come from jinja2 3.1.6.
#include <gtest/gtest.h>

#include "render_util.h"

namespace llms::jinja::testing {
namespace {

const Case kWhitespace[] = {
    // trim_blocks removes the newline after a block tag; lstrip_blocks the indentation before it.
    {"a\n  {% if true %}\n    b\n  {% endif %}\nc\n", "", "a\n    b\nc"},
    {"a\n  {%- if true %}\n    b\n  {% endif -%}\nc", "", "a    b\nc"},
    {"  {% if true %}x{% endif %}  \n  y", "", "x  \n  y"},
    {"{% if true %}  \n{% endif %}", "", "  \n"},
    {"x {% if true %}y{% endif %} z", "", "x y z"},
    {"\t{% for i in [1,2] %}\n\t{{ i }}\n\t{% endfor %}\n", "", "\t1\n\t2\n"},
    // Variables are never lstripped or trimmed, only by "-".
    {"{{ 'a' }}\n{{ 'b' }}\n", "", "a\nb"},
    {"{{- 'a' -}}  \n  {{- 'b' }}  \n\n", "", "ab  \n"},
    // Comments behave like blocks.
    {"a {# comment #}\nb\n  {# c2 #}\nd", "", "a b\nd"},
    {"a {#- comment -#} b", "", "ab"},
    // Raw blocks.
    {"{% raw %}{{ not rendered }}{% endraw %}\n after", "", "{{ not rendered }} after"},
    {"  {% raw %}  x {% endraw %}  \n", "", "  x   "},
    {"{%- raw -%}  x  {%- endraw -%}  y", "", "xy"},
    // "+" disables lstrip_blocks for that tag.
    {"{%+ if true %}x{% endif +%}\ny", "", "x\ny"},
    {"  {%+ if true %}x{% endif %}", "", "  x"},
    // Newline normalization.
    {"line1\r\nline2\r{% if true %}\r\nyes{% endif %}\r\n", "", "line1\nline2\nyes"},
    {"{%- for m in msgs -%}\n{{ m }}: x\n{% endfor -%}", R"({"msgs": ["u", "a"]})", "u: x\na: x\n"},
    {"{% macro greet(name, greeting='Hello') -%}\n{{ greeting }}, {{ name }}!\n{%- endmacro %}"
     "{{ greet('Bob') }}|{{ greet('A', greeting='Hi') }}",
     "", "Hello, Bob!|Hi, A!"},
    {"{% set s %}  inner {{ 1 + 1 }}  {% endset %}[{{ s }}][{{ s|trim }}]", "",
     "[  inner 2  ][inner 2]"},
    // A tag that ends with a kept newline starts a new line for the next lstrip.
    {"{% if true %}\n  {% if true %}x{% endif %}\n{% endif %}", "", "x"},
    {"{{ 'v' }}  {% if true %}x{% endif %}", "", "v  x"},
};

TEST(JinjaWhitespace, MatchesJinja2WithTransformersSettings) {
  for (const Case& c : kWhitespace) {
    SCOPED_TRACE(c.tmpl);
    EXPECT_EQ(render(c.tmpl, c.context), c.expected);
  }
}

}  // namespace
}  // namespace llms::jinja::testing
