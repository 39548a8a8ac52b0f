#pragma once
// Charts as inline SVG for the self-contained HTML reports (runs/<name>/report.html, stepgraph bench
// --html): no script, no network, nothing but text — the page opens anywhere and diffs in git.
// Line charts (several series, optional log y axis, vertical markers), horizontal bar charts and
// histograms; plus the page skeleton and HTML escaping they share.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace sg::train {

// What a line chart needs to know of the points a SeriesEnvelope left out of a series (ChartSeries::reduced).
struct ReducedSeries {
  size_t points = 0;              // the series' finite points, kept or not
  double bucket_width = 0.0;      // the x buckets whose envelopes were kept (a power of two); 0: one x value each
  double x_lo = 0.0, x_hi = 0.0;  // the least and the greatest x of those points
};

struct ChartSeries {
  std::string name;
  std::vector<double> x, y;  // same length; non-finite points are skipped
  std::string color{};       // CSS color; empty: from the palette
  bool markers = false;      // dots at the points (sparse series such as validation loss)
  bool line = true;
  std::optional<ReducedSeries> reduced{};  // set by SeriesEnvelope::series(): x, y are the points it kept
};

// A line chart draws a series with more finite points than 4 per pixel column of its plot through their envelope:
// x is cut into buckets of the widest power of two not wider than a pixel column (floor(x / width): so one to three
// buckets meet in a column), and of each run of consecutive points in one bucket only the first, the lowest (the
// first of equals), the highest and the last are drawn, in their order; a series that fits is drawn point for
// point. A SeriesEnvelope keeps, while the points are read, what that draws, in memory bounded by the chart's
// width instead of the series' length (report.html over a 10M-step metrics.jsonl): every point while there are at
// most 4 per pixel column, then the same envelope over buckets of a power-of-two width that doubles whenever more
// than 2 x (plot width) + 1 runs are kept. Buckets of a width dividing the chart's merge into the chart's (the
// envelope of a run of runs is the envelope of their envelopes), so for x that never decreases (steps) a line
// chart at most `chart_width` wide drawn from series() is the chart drawn from every point, to the byte; for x
// that goes back the kept buckets may be wider than the chart's, which then draws the envelope of those. It holds
// at most 4 x (plot width) + 1 points of 24 bytes, then 2 x (plot width) + 2 runs of 104 bytes (~0.2 MB for a
// 980-px chart), and series() returns at most 8 x (plot width) + 4 points.
class SeriesEnvelope {
 public:
  explicit SeriesEnvelope(int chart_width = 640);
  void add(double x, double y);  // skipped unless both are finite, as a chart skips it
  ChartSeries series(std::string name) const;
  size_t points() const { return points_; }  // the finite points added

 private:
  struct Point {
    double x, y;
    size_t index;  // among the finite points added
  };
  struct Run {  // consecutive points in one bucket
    double bucket;
    Point first, low, high, last;
  };
  double bucket_of(double x) const;
  void insert(const Point& p);  // into runs_
  void widen(double width);     // buckets of `width` (width_ times a power of two, or the first), runs merged

  size_t point_limit_, run_limit_;
  std::vector<Point> points_kept_;  // every point, until there are more than point_limit_
  std::vector<Run> runs_;           // then runs of points in one bucket, at most run_limit_
  bool merged_ = false;             // runs_ holds the points
  double width_ = 0.0;              // the buckets' width; 0: one x value each
  size_t points_ = 0;
  double x_lo_ = 0.0, x_hi_ = 0.0;
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
