// bench/svg: line charts written by hand (see svg.h).
#include "bench/svg.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "bench/report.h"
#include "bench/stats.h"
#include "util/error.h"

namespace llms::bench {

namespace {

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                   "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
constexpr int kLeft = 80;
constexpr int kTop = 46;
constexpr int kBottom = 58;
constexpr int kLegend = 200;

std::string fmt_num(double v) {
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (a >= 1e6 || a < 1e-3) return fmt::format("{:.3g}", v);
  return fmt::format("{:.6g}", v);
}

struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  double px0 = 0, px1 = 1;  // pixel positions of lo and hi
  double map(double v) const {
    const double a = log ? std::log10(lo) : lo;
    const double b = log ? std::log10(hi) : hi;
    const double t = ((log ? std::log10(v) : v) - a) / (b - a);
    return px0 + t * (px1 - px0);
  }
};

std::vector<double> log_ticks(double lo, double hi) {
  std::vector<double> ticks;
  for (double decade = std::pow(10.0, std::floor(std::log10(lo))); decade <= hi * 1.0001;
       decade *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double t = decade * m;
      if (t >= lo * 0.9999 && t <= hi * 1.0001) ticks.push_back(t);
    }
  }
  return ticks;
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // Control characters are not allowed in XML 1.0 text.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') {
          out += ' ';
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int count) {
  std::vector<double> ticks;
  if (!std::isfinite(lo) || !std::isfinite(hi) || count < 1) return ticks;
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) return {lo};
  const double raw = (hi - lo) / count;
  const int exponent = static_cast<int>(std::floor(std::log10(raw)));
  const double mag = std::pow(10.0, exponent);
  double m = 1;
  for (double candidate : {1.0, 2.0, 5.0, 10.0}) {
    m = candidate;
    if (candidate * mag >= raw) break;
  }
  // Tick k is k * m * 10^exponent; dividing by 10^-exponent for small steps keeps 0.6 as 0.6
  // (3 * 0.2 would be 0.6000000000000001).
  auto value = [&](double k) {
    return exponent < 0 ? k * m / std::pow(10.0, -exponent) : k * m * mag;
  };
  const double step = m * mag;
  for (double k = std::ceil(lo / step - 1e-9); value(k) <= hi + step * 1e-9; k += 1) {
    ticks.push_back(value(k) == 0 ? 0.0 : value(k));
    if (ticks.size() > 100) break;
  }
  return ticks;
}

std::vector<std::pair<double, double>> cdf_points(std::vector<double> values, size_t max_points) {
  values.erase(
      std::remove_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); }),
      values.end());
  std::vector<std::pair<double, double>> pts;
  if (values.empty()) return pts;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  if (n <= max_points || max_points < 2) {
    for (size_t i = 0; i < n; ++i) {
      pts.emplace_back(values[i], static_cast<double>(i + 1) / static_cast<double>(n));
    }
    return pts;
  }
  for (size_t k = 0; k < max_points; ++k) {
    const size_t i = (n - 1) * k / (max_points - 1);
    pts.emplace_back(values[i], static_cast<double>(i + 1) / static_cast<double>(n));
  }
  return pts;
}

std::string render_svg(const LineChart& chart) {
  const int w = std::max(chart.width, 320);
  const int h = std::max(chart.height, 200);
  // Keep only drawable points.
  std::vector<Series> series;
  double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo, ylo = xlo, yhi = -xlo;
  for (const auto& s : chart.series) {
    Series kept{s.name, {}};
    for (auto [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y) || (chart.log_x && !(x > 0))) continue;
      kept.points.emplace_back(x, y);
      xlo = std::min(xlo, x);
      xhi = std::max(xhi, x);
      ylo = std::min(ylo, y);
      yhi = std::max(yhi, y);
    }
    series.push_back(std::move(kept));
  }
  const bool empty = !std::isfinite(xlo);
  if (empty) {
    xlo = chart.log_x ? 1 : 0;
    xhi = chart.log_x ? 10 : 1;
    ylo = 0;
    yhi = 1;
  }
  ylo = std::min(ylo, 0.0);  // y axes start at zero: latency and throughput are never negative
  if (yhi <= ylo) yhi = ylo + 1;
  if (xhi <= xlo) {
    xhi = chart.log_x ? xlo * 10 : xlo + 1;
    if (!chart.log_x && xlo > 0) xlo = std::max(0.0, xlo - 1);
  }
  std::vector<double> yticks = nice_ticks(ylo, yhi, 6);
  if (yticks.size() >= 2 && yticks.back() < yhi) {
    // Close the y axis on a round tick above the highest point.
    yticks.push_back(yticks.back() + (yticks[1] - yticks[0]));
  }
  if (!yticks.empty()) yhi = std::max(yhi, yticks.back());
  std::vector<double> xticks;
  if (chart.x_ticks_at_data) {
    for (const auto& s : series)
      for (auto [x, y] : s.points) xticks.push_back(x);
    std::sort(xticks.begin(), xticks.end());
    xticks.erase(std::unique(xticks.begin(), xticks.end()), xticks.end());
  } else {
    xticks = chart.log_x ? log_ticks(xlo, xhi) : nice_ticks(xlo, xhi, 7);
  }

  Axis xa{xlo, xhi, chart.log_x, static_cast<double>(kLeft), static_cast<double>(w - kLegend)};
  Axis ya{ylo, yhi, false, static_cast<double>(h - kBottom), static_cast<double>(kTop)};
  std::string o;
  o += fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n",
      w, h);
  o += fmt::format("<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"white\"/>\n", w, h);
  o += fmt::format("<text x=\"{}\" y=\"24\" font-size=\"16\" text-anchor=\"middle\">{}</text>\n",
                   (kLeft + w - kLegend) / 2, xml_escape(chart.title));
  // Grid and tick labels.
  for (double t : yticks) {
    const double y = ya.map(t);
    o += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e0e0e0\"/>\n",
        xa.px0, y, xa.px1, y);
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", xa.px0 - 6,
                     y + 4, xml_escape(fmt_num(t)));
  }
  for (double t : xticks) {
    if (t < xlo || t > xhi) continue;
    const double x = xa.map(t);
    o += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e0e0e0\"/>\n", x,
        ya.px0, x, ya.px1);
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x,
                     ya.px0 + 18, xml_escape(fmt_num(t)));
  }
  o += fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" "
      "stroke=\"#333333\"/>\n",
      xa.px0, ya.px1, xa.px1 - xa.px0, ya.px0 - ya.px1);
  o += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                   (xa.px0 + xa.px1) / 2, h - 14, xml_escape(chart.x_label));
  o += fmt::format(
      "<text x=\"18\" y=\"{0:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {0:.1f})\">"
      "{1}</text>\n",
      (ya.px0 + ya.px1) / 2, xml_escape(chart.y_label));
  if (empty) {
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">no data</text>\n",
                     (xa.px0 + xa.px1) / 2, (ya.px0 + ya.px1) / 2);
  }
  // Series and legend.
  for (size_t i = 0; i < series.size(); ++i) {
    const char* color = kColors[i % (sizeof kColors / sizeof kColors[0])];
    const auto& pts = series[i].points;
    if (!pts.empty()) {
      std::string path;
      double prev_y = 0;
      for (size_t k = 0; k < pts.size(); ++k) {
        const double x = xa.map(pts[k].first);
        const double y = ya.map(pts[k].second);
        if (chart.step && k > 0) path += fmt::format(" {:.2f},{:.2f}", x, prev_y);
        path += fmt::format("{}{:.2f},{:.2f}", path.empty() ? "" : " ", x, y);
        prev_y = y;
      }
      o += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n",
                       color, path);
      if (chart.markers) {
        for (auto [x, y] : pts) {
          o += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"3.5\" fill=\"{}\"/>\n",
                           xa.map(x), ya.map(y), color);
        }
      }
    }
    const double ly = kTop + 8 + 20.0 * static_cast<double>(i);
    o += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"{3}\" "
        "stroke-width=\"3\"/>\n",
        w - kLegend + 16, ly, w - kLegend + 40, color);
    o += fmt::format("<text x=\"{}\" y=\"{:.1f}\">{}</text>\n", w - kLegend + 46, ly + 4,
                     xml_escape(series[i].name));
  }
  o += "</svg>\n";
  return o;
}

std::vector<std::string> write_plots(const std::string& dir, const std::vector<RunResult>& runs,
                                     const std::vector<Summary>& summaries) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw Error(Error::Kind::kIo, dir + ": cannot create the plot directory: " + ec.message());
  std::vector<std::string> written;
  auto save = [&](const std::string& name, const LineChart& chart) {
    const std::string path = (fs::path(dir) / name).string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << render_svg(chart);
    out.close();
    if (!out) throw Error(Error::Kind::kIo, path + ": cannot write the chart");
    written.push_back(path);
  };
  struct Metric {
    const char* file;
    const char* title;
    std::vector<double> (*values)(const RunResult&);
  };
  const Metric metrics[] = {
      {"ttft_cdf.svg", "Time to first token (CDF)",
       [](const RunResult& run) {
         std::vector<double> v;
         for (const auto& r : run.records)
           if (!r.warmup && r.ok && r.ttft_ms) v.push_back(*r.ttft_ms);
         return v;
       }},
      {"tpot_cdf.svg", "Time per output token (CDF)",
       [](const RunResult& run) {
         std::vector<double> v;
         for (const auto& r : run.records)
           if (auto t = r.tpot_ms(); !r.warmup && r.ok && t) v.push_back(*t);
         return v;
       }},
      {"itl_cdf.svg", "Inter-token latency (CDF)",
       [](const RunResult& run) {
         std::vector<double> v;
         for (const auto& r : run.records)
           if (!r.warmup && r.ok) v.insert(v.end(), r.itl_ms.begin(), r.itl_ms.end());
         return v;
       }},
      {"e2e_cdf.svg", "End-to-end latency (CDF)",
       [](const RunResult& run) {
         std::vector<double> v;
         for (const auto& r : run.records)
           if (!r.warmup && r.ok) v.push_back(r.e2e_ms);
         return v;
       }},
  };
  for (const auto& m : metrics) {
    LineChart chart;
    chart.title = m.title;
    chart.x_label = "milliseconds";
    chart.y_label = "fraction of requests";
    if (std::string(m.file) == "itl_cdf.svg") chart.y_label = "fraction of gaps";
    chart.step = true;
    for (const auto& run : runs)
      chart.series.push_back({describe_level(run.level), cdf_points(m.values(run))});
    save(m.file, chart);
  }
  if (runs.size() > 1) {
    // The x axis is whatever the sweep varied: the rate when it differs between runs.
    const bool by_rate = std::any_of(runs.begin(), runs.end(), [&](const RunResult& r) {
      return r.level.rate != runs.front().level.rate;
    });
    auto x_of = [&](const RunResult& r) {
      return by_rate ? r.level.rate : static_cast<double>(r.level.concurrency);
    };
    const char* x_label = by_rate ? "request rate (req/s)" : "concurrency";
    LineChart tput;
    tput.title = "Throughput";
    tput.x_label = x_label;
    tput.y_label = "output tokens / s";
    tput.markers = true;
    tput.x_ticks_at_data = true;
    LineChart ttft = tput;
    ttft.title = "P99 time to first token";
    ttft.y_label = "milliseconds";
    Series out_tok{"output tok/s", {}};
    Series p99{"TTFT p99", {}};
    Series p50{"TTFT median", {}};
    for (size_t i = 0; i < runs.size() && i < summaries.size(); ++i) {
      out_tok.points.emplace_back(x_of(runs[i]), summaries[i].output_token_throughput);
      p99.points.emplace_back(x_of(runs[i]), summaries[i].ttft.p99);
      p50.points.emplace_back(x_of(runs[i]), summaries[i].ttft.median);
    }
    double xmin = std::numeric_limits<double>::infinity(), xmax = 0;
    for (const auto& r : runs) {
      xmin = std::min(xmin, x_of(r));
      xmax = std::max(xmax, x_of(r));
    }
    tput.log_x = ttft.log_x = xmin > 0 && xmax / xmin >= 8;
    tput.series.push_back(std::move(out_tok));
    ttft.series.push_back(std::move(p99));
    ttft.series.push_back(std::move(p50));
    save("throughput.svg", tput);
    save("ttft_p99.svg", ttft);
  }
  return written;
}

}  // namespace llms::bench
