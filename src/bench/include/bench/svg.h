// bench/svg: small, dependency-free SVG line charts for benchmark results.
//
// The output is a standalone, well-formed SVG 1.1 document: every text is XML-escaped, every
// number finite (non-finite points are dropped), so browsers and XML parsers accept it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "bench/metrics.h"

namespace llms::bench {

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in this order
};

struct LineChart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<Series> series;
  bool log_x = false;            // logarithmic x axis (needs x > 0; other points are dropped)
  bool step = false;             // draw as a staircase (CDFs)
  bool markers = false;          // a dot at every point (sweeps)
  bool x_ticks_at_data = false;  // x ticks at the distinct x values instead of round numbers
  int width = 760;
  int height = 460;
};

std::string render_svg(const LineChart& chart);

// Empirical CDF of a sample as (value, fraction <= value), at most `max_points` points (quantiles
// when the sample is larger), from (min, 1/n) to (max, 1).
std::vector<std::pair<double, double>> cdf_points(std::vector<double> values,
                                                  size_t max_points = 400);

// Round tick values (1, 2 or 5 times a power of ten apart) covering [lo, hi], about `count` of
// them.
std::vector<double> nice_ticks(double lo, double hi, int count);

// "&amp;" and friends for text and attribute values.
std::string xml_escape(const std::string& text);

// Writes ttft_cdf.svg, tpot_cdf.svg, itl_cdf.svg and e2e_cdf.svg (one line per run) and, for more
// than one run, throughput.svg and ttft_p99.svg against concurrency (or rate). Creates `dir`.
// Returns the paths written. Throws llms::Error(kIo) naming the file it cannot write.
std::vector<std::string> write_plots(const std::string& dir, const std::vector<RunResult>& runs,
                                     const std::vector<Summary>& summaries);

}  // namespace llms::bench
