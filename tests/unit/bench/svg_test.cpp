// SVG charts: well-formed XML (checked by a tiny parser here), escaping, ticks and CDFs.
#include "bench/svg.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace llms::bench {
namespace {

// A deliberately small XML well-formedness check: one root element, properly nested and closed
// tags, quoted attributes, only the five predefined entities (or numeric ones), no '<' or bare
// '&' in text. Returns "" when well-formed, else what is wrong. Counts elements by name.
std::string check_xml(const std::string& doc, std::map<std::string, int>* counts = nullptr) {
  size_t i = 0;
  std::vector<std::string> stack;
  int roots = 0;
  auto check_entities = [](const std::string& text) -> bool {
    for (size_t k = text.find('&'); k != std::string::npos; k = text.find('&', k + 1)) {
      const size_t semi = text.find(';', k);
      if (semi == std::string::npos) return false;
      const std::string name = text.substr(k + 1, semi - k - 1);
      if (name != "amp" && name != "lt" && name != "gt" && name != "quot" && name != "apos" &&
          !(name.size() > 1 && name[0] == '#')) {
        return false;
      }
    }
    return true;
  };
  if (doc.rfind("<?xml", 0) == 0) {
    i = doc.find("?>");
    if (i == std::string::npos) return "unterminated declaration";
    i += 2;
  }
  while (i < doc.size()) {
    const size_t lt = doc.find('<', i);
    const std::string text = doc.substr(i, lt == std::string::npos ? std::string::npos : lt - i);
    if (!check_entities(text)) return "bad entity in text: " + text;
    if (text.find('>') != std::string::npos) return "stray '>' in text";
    if (lt == std::string::npos) break;
    if (stack.empty() && text.find_first_not_of(" \n\r\t") != std::string::npos) {
      return "text outside the root";
    }
    const size_t gt = doc.find('>', lt);
    if (gt == std::string::npos) return "unterminated tag";
    std::string tag = doc.substr(lt + 1, gt - lt - 1);
    i = gt + 1;
    if (!tag.empty() && tag[0] == '/') {
      if (stack.empty() || stack.back() != tag.substr(1))
        return "mismatched </" + tag.substr(1) + ">";
      stack.pop_back();
      continue;
    }
    const bool self_closing = !tag.empty() && tag.back() == '/';
    if (self_closing) tag.pop_back();
    const size_t name_end = tag.find_first_of(" \n\t");
    const std::string name = tag.substr(0, name_end);
    if (name.empty()) return "empty tag name";
    if (counts) ++(*counts)[name];
    // Attributes: name="value" pairs.
    size_t k = name_end;
    while (k != std::string::npos && k < tag.size()) {
      k = tag.find_first_not_of(" \n\t", k);
      if (k == std::string::npos) break;
      const size_t eq = tag.find('=', k);
      if (eq == std::string::npos || eq + 1 >= tag.size() || tag[eq + 1] != '"') {
        return "unquoted attribute in <" + name + ">";
      }
      const size_t close = tag.find('"', eq + 2);
      if (close == std::string::npos) return "unterminated attribute in <" + name + ">";
      const std::string value = tag.substr(eq + 2, close - eq - 2);
      if (value.find('<') != std::string::npos || !check_entities(value)) {
        return "bad attribute value in <" + name + ">";
      }
      k = close + 1;
    }
    if (stack.empty()) ++roots;
    if (!self_closing) stack.push_back(name);
  }
  if (!stack.empty()) return "unclosed <" + stack.back() + ">";
  if (roots != 1) return "expected one root element, found " + std::to_string(roots);
  return "";
}

TEST(XmlChecker, CatchesBrokenDocuments) {
  EXPECT_EQ(check_xml("<a><b/></a>"), "");
  EXPECT_NE(check_xml("<a><b></a>"), "");
  EXPECT_NE(check_xml("<a x=1/>"), "");
  EXPECT_NE(check_xml("<a>1 & 2</a>"), "");
  EXPECT_NE(check_xml("<a/><b/>"), "");
  EXPECT_NE(check_xml("<a>"), "");
}

TEST(Svg, WellFormedWithEscapedTextAndOnePolylinePerSeries) {
  LineChart c;
  c.title = "Latency <p99> & \"friends\"";
  c.x_label = "ms";
  c.y_label = "fraction";
  c.series.push_back({"a<b", {{1, 0.1}, {2, 0.5}, {3, 1}}});
  c.series.push_back({"c&d", {{1, 0.2}, {NAN, 0.3}, {4, INFINITY}, {5, 1}}});
  c.step = true;
  std::map<std::string, int> counts;
  const std::string svg = render_svg(c);
  EXPECT_EQ(check_xml(svg, &counts), "") << svg;
  EXPECT_EQ(counts["svg"], 1);
  EXPECT_EQ(counts["polyline"], 2);
  EXPECT_NE(svg.find("Latency &lt;p99&gt; &amp; &quot;friends&quot;"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(Svg, EmptyAndLogChartsAreStillWellFormed) {
  LineChart empty;
  empty.title = "nothing";
  empty.series.push_back({"none", {}});
  EXPECT_EQ(check_xml(render_svg(empty)), "");
  LineChart log;
  log.log_x = true;
  log.markers = true;
  log.x_ticks_at_data = true;
  log.series.push_back({"tput", {{1, 10}, {4, 35}, {16, 90}, {64, 120}, {0, 5}}});
  std::map<std::string, int> counts;
  const std::string svg = render_svg(log);
  EXPECT_EQ(check_xml(svg, &counts), "");
  EXPECT_EQ(counts["circle"], 4);  // x = 0 cannot sit on a log axis
}

TEST(Svg, NiceTicks) {
  EXPECT_EQ(nice_ticks(0, 100, 5), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_EQ(nice_ticks(0, 1, 5), (std::vector<double>{0, 0.2, 0.4, 0.6, 0.8, 1}));
  auto t = nice_ticks(3, 47, 6);
  ASSERT_FALSE(t.empty());
  EXPECT_GE(t.front(), 3);
  EXPECT_LE(t.back(), 47);
  EXPECT_DOUBLE_EQ(t[1] - t[0], 10);
  EXPECT_EQ(nice_ticks(5, 5, 4), (std::vector<double>{5}));
}

TEST(Svg, CdfPoints) {
  auto pts = cdf_points({3, 1, 2, NAN});
  ASSERT_EQ(pts.size(), 3u);
  EXPECT_EQ(pts[0], (std::pair<double, double>{1, 1.0 / 3}));
  EXPECT_EQ(pts[2], (std::pair<double, double>{3, 1.0}));
  std::vector<double> many(10000);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<double>(i);
  auto few = cdf_points(many, 100);
  ASSERT_EQ(few.size(), 100u);
  EXPECT_EQ(few.front().first, 0);
  EXPECT_EQ(few.back(), (std::pair<double, double>{9999, 1.0}));
}

TEST(Svg, WritePlotsForASweep) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("llms_bench_plots_" + std::to_string(::getpid()));
  std::vector<RunResult> runs;
  std::vector<Summary> sums;
  for (size_t c : {1, 4, 16}) {
    RunResult run;
    run.level.concurrency = c;
    run.duration_s = 1;
    for (int i = 0; i < 5; ++i) {
      RequestRecord r;
      r.ok = true;
      r.ttft_ms = 10.0 * static_cast<double>(c) + i;
      r.itl_ms = {5, 6};
      r.e2e_ms = *r.ttft_ms + 11;
      r.output_tokens = 3;
      run.records.push_back(r);
    }
    sums.push_back(summarize_run(run, Slo{}));
    runs.push_back(std::move(run));
  }
  auto files = write_plots(dir.string(), runs, sums);
  EXPECT_EQ(files.size(), 6u);
  for (const auto& f : files) {
    std::ifstream in(f);
    std::stringstream buf;
    buf << in.rdbuf();
    std::map<std::string, int> counts;
    EXPECT_EQ(check_xml(buf.str(), &counts), "") << f;
    EXPECT_GE(counts["polyline"], 1) << f;
  }
  EXPECT_TRUE(std::filesystem::exists(dir / "throughput.svg"));
  EXPECT_TRUE(std::filesystem::exists(dir / "ttft_p99.svg"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace llms::bench
