#pragma once
// Charts as inline SVG for the self-contained HTML reports (runs/<name>/report.html, stepgraph bench
// --html): no script, no network, nothing but text — the page opens anywhere and diffs in git.
// Line charts (several series, optional log y axis, vertical markers), horizontal bar charts and
// histograms; plus the page skeleton and HTML escaping they share.
#include <string>
#include <vector>

namespace sg::train {

struct ChartSeries {
  std::string name;
  std::vector<double> x, y;  // same length; non-finite points are skipped
  std::string color{};       // CSS color; empty: from the palette
  bool markers = false;      // dots at the points (sparse series such as validation loss)
  bool line = true;
};

struct ChartMarker {
  double x = 0.0;
  std::string label;  // "capture"
};

struct LineChart {
  std::string title;
  std::string x_label, y_label;
  std::vector<ChartSeries> series;
  std::vector<ChartMarker> markers;  // vertical dashed lines
  bool log_y = false;                // when every y is positive
};

struct ChartBar {
  std::string label;
  double value = 0.0;
  std::string text;  // printed after the bar ("12.3 ms"); empty: the value
};

// Each returns one <figure> with an <svg> inside; an empty chart says "no data".
std::string render_line_chart(const LineChart& chart, int width = 640, int height = 260);
std::string render_bar_chart(const std::string& title, const std::string& unit, const std::vector<ChartBar>& bars,
                             int width = 640);
// Histogram of `samples` over [lo, hi] (both 0: the samples' range) in `bins` bins.
std::string render_histogram(const std::string& title, const std::string& x_label, const std::vector<double>& samples,
                             int bins = 30, double lo = 0.0, double hi = 0.0, int width = 640, int height = 200);

std::string html_escape(const std::string& text);
// A complete page: <head> with the shared inline style, `body` as given.
std::string html_page(const std::string& title, const std::string& body);
// A two-column table of key/value rows (escaped).
std::string html_table(const std::vector<std::pair<std::string, std::string>>& rows);

}  // namespace sg::train
