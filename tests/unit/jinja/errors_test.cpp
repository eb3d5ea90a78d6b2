// Failure behaviour: syntax errors name line and column, runtime errors name the line,
// undefined values fail where jinja2's default Undefined fails, raise_exception surfaces its
// message, the sandbox refuses mutation, and every budget (steps, output, depth) is enforced.
#include <gtest/gtest.h>

#include "render_util.h"

namespace llms::jinja::testing {
namespace {

std::string parse_error(std::string_view tmpl, const ParseOptions& options = {}) {
  try {
    Template::parse(tmpl, options);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument);
    return e.what();
  }
  return "";
}

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(JinjaErrors, SyntaxErrorsNameLineAndColumn) {
  const std::string e1 = parse_error("line one\n{{ 1 + }}");
  EXPECT_TRUE(contains(e1, "line 2, column 8")) << e1;
  const std::string e2 = parse_error("a\nb\n  {% if x %}unclosed");
  EXPECT_TRUE(contains(e2, "line 3")) << e2;
  EXPECT_TRUE(contains(e2, "'endif'")) << e2;
  const std::string e3 = parse_error("{{ (1 }}");
  EXPECT_TRUE(contains(e3, "line 1, column 7")) << e3;
  EXPECT_TRUE(contains(e3, "expected ')'")) << e3;
  EXPECT_TRUE(contains(parse_error("{% frobnicate %}"), "unknown tag 'frobnicate'"));
  EXPECT_TRUE(contains(parse_error("{% include 'x' %}"), "not supported"));
  EXPECT_TRUE(contains(parse_error("{# never closed"), "Missing end of comment tag"));
  EXPECT_TRUE(contains(parse_error("{% raw %}never closed"), "Missing end of raw directive"));
  EXPECT_TRUE(contains(parse_error("{{ 'unterminated }}"), "unexpected char"));
  EXPECT_TRUE(contains(parse_error("{% break %}"), "outside of a loop"));
  EXPECT_TRUE(contains(parse_error("{% macro m(a=1, b) %}{% endmacro %}"), "non-default argument"));
  EXPECT_TRUE(contains(parse_error("{{ x is defined is defined }}"), "cannot chain"));
  EXPECT_TRUE(contains(parse_error("{{ 99999999999999999999 }}"), "too large"));
  EXPECT_TRUE(contains(parse_error("{% for %}"), "line 1"));
  EXPECT_TRUE(contains(parse_error("{{ 1 }"), "line 1"));
}

TEST(JinjaErrors, RuntimeErrorsNameTheLine) {
  const std::string e = render_error("ok\n\n{{ 'a' + 1 }}");
  EXPECT_TRUE(contains(e, "line 3")) << e;
  EXPECT_TRUE(contains(e, "can only concatenate str")) << e;
  EXPECT_TRUE(contains(render_error("{{ 1 / 0 }}"), "division by zero"));
  EXPECT_TRUE(contains(render_error("{{ 1 < 'a' }}"), "not supported between"));
  EXPECT_TRUE(contains(render_error("{{ x|nosuchfilter }}"), "No filter named 'nosuchfilter'"));
  EXPECT_TRUE(contains(render_error("{{ 1 is nosuchtest }}"), "No test named"));
  EXPECT_TRUE(contains(render_error("{% for a, b in [[1]] %}{% endfor %}"), "not enough values"));
  EXPECT_TRUE(contains(render_error("{% for x in none %}{% endfor %}"), "not iterable"));
  EXPECT_TRUE(contains(render_error("{{ 9223372036854775807 + 1 }}"), "64 bits"));
}

TEST(JinjaErrors, UndefinedFollowsJinja2DefaultUndefined) {
  // Printing, testing, iterating, len() and default() are fine on undefined values.
  EXPECT_EQ(render("[{{ x }}][{{ d.nope }}][{{ x|length }}][{{ x|default('d') }}][{{ 'a' ~ x }}]",
                   R"({"d": {}})"),
            "[][][0][d][a]");
  // Attribute access on an undefined value, arithmetic and calls fail, naming it.
  EXPECT_TRUE(contains(render_error("{{ x.y }}"), "'x' is undefined"));
  EXPECT_TRUE(
      contains(render_error("{{ d.a.b }}", R"({"d": {}})"), "'dict object' has no attribute 'a'"));
  EXPECT_TRUE(contains(render_error("{{ x + 1 }}"), "'x' is undefined"));
  EXPECT_TRUE(contains(render_error("{{ x() }}"), "'x' is undefined"));
  EXPECT_TRUE(contains(render_error("{{ x < 1 }}"), "'x' is undefined"));
}

TEST(JinjaErrors, RaiseExceptionCarriesExactlyTheMessage) {
  try {
    render("{% if true %}{{ raise_exception('Only user and assistant roles!') }}{% endif %}");
    FAIL() << "expected TemplateRaised";
  } catch (const TemplateRaised& e) {
    EXPECT_STREQ(e.what(), "Only user and assistant roles!");
    EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument);
  }
  EXPECT_EQ(render_error("{{ raise_exception('n=' ~ 3) }}"), "n=3");
}

TEST(JinjaErrors, SandboxRefusesMutationAndPrivateNamespaceAttributes) {
  EXPECT_TRUE(contains(render_error("{% set l = [1] %}{% set _ = l.append(2) %}"),
                       "access to attribute 'append' of 'list' object is unsafe"));
  EXPECT_TRUE(contains(render_error("{% set d = {} %}{{ d.update({'a': 1}) }}"), "unsafe"));
  EXPECT_TRUE(contains(render_error("{% set ns = namespace(_x=1) %}"), "underscore-prefixed"));
  EXPECT_TRUE(contains(render_error("{% set ns = namespace() %}{% set ns._y = 1 %}"),
                       "underscore-prefixed"));
  EXPECT_TRUE(contains(render_error("{% set s = 'x' %}{% set s.attr = 1 %}"), "non-namespace"));
}

TEST(JinjaErrors, StepBudgetStopsRunawayLoops) {
  RenderOptions options;
  options.max_steps = 100000;
  const std::string e =
      render_error("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}",
                   "{}", options);
  EXPECT_TRUE(contains(e, "step budget")) << e;
  EXPECT_TRUE(
      contains(render_error("{{ range(100000000)|length }}", "{}", options), "step budget"));
  // The same loops fit the default budget.
  EXPECT_EQ(render("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}ok"),
            "ok");
}

TEST(JinjaErrors, OutputAndStringSizeAreCapped) {
  RenderOptions options;
  options.max_output_bytes = 1000;
  EXPECT_TRUE(contains(render_error("{% for i in range(200) %}abcdefgh{% endfor %}", "{}", options),
                       "output exceeds"));
  EXPECT_TRUE(contains(render_error("{% set s = 'x' * 5000 %}", "{}", options), "output limit"));
  EXPECT_TRUE(contains(render_error("{% set ns = namespace(s='ab') %}{% for i in range(20) %}"
                                    "{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                                    "{}", options),
                       "output limit"));
  EXPECT_TRUE(contains(render_error("{{ 'ab'|replace('a', 'x' * 900) * 2 }}", "{}", options),
                       "output limit"));
  EXPECT_EQ(render("{{ 'x' * 1000 }}", "{}", options), std::string(1000, 'x'));
}

TEST(JinjaErrors, NestingDepthIsBoundedWhenParsingAndRendering) {
  const std::string deep_parens = std::string(5000, '(') + "1" + std::string(5000, ')');
  EXPECT_TRUE(contains(parse_error("{{ " + deep_parens + " }}"), "depth limit"));
  std::string deep_ifs;
  for (int k = 0; k < 1000; ++k) deep_ifs += "{% if true %}";
  EXPECT_TRUE(contains(parse_error(deep_ifs), "depth limit"));
  std::string nots = "{{ ";
  for (int k = 0; k < 5000; ++k) nots += "not ";
  EXPECT_TRUE(contains(parse_error(nots + "x }}"), "depth limit"));
  // A long flat chain parses (iteratively) but is too deep to evaluate: an error, not a crash.
  std::string chain = "{{ 1";
  for (int k = 0; k < 20000; ++k) chain += " + 1";
  EXPECT_TRUE(contains(render_error(chain + " }}"), "depth limit"));
  // Unbounded macro recursion.
  EXPECT_TRUE(contains(render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
                       "depth limit"));
  // Modest nesting is fine.
  EXPECT_EQ(render("{{ ((((((1)))))) }}"), "1");
}

TEST(JinjaErrors, SelfReferencingNamespaceFailsCleanly) {
  const std::string e = render_error("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}");
  EXPECT_TRUE(contains(e, "too deep")) << e;
  // Deeply nested lists are refused when built.
  EXPECT_TRUE(contains(render_error("{% set ns = namespace(l=[]) %}{% for i in range(1000) %}"
                                    "{% set ns.l = [ns.l] %}{% endfor %}"),
                       "nesting exceeds"));
}

TEST(JinjaErrors, ContextMustBeAnObject) {
  const Template t = Template::parse("x");
  EXPECT_THROW(t.render(nlohmann::ordered_json::array()), Error);
  std::string deep = "{\"a\":";
  for (int k = 0; k < 400; ++k) deep += "[";
  deep += "1";
  for (int k = 0; k < 400; ++k) deep += "]";
  deep += "}";
  EXPECT_THROW(t.render(nlohmann::ordered_json::parse(deep)), Error);
}

}  // namespace
}  // namespace llms::jinja::testing
