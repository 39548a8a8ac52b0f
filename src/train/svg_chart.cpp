#include "train/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "core/strings.h"

namespace sg::train {
namespace {

const char* const kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"};

// Tick spacing 1, 2 or 5 x 10^k giving about `count` ticks over `span`.
double nice_step(double span, int count) {
  if (!(span > 0.0)) return 1.0;
  const double raw = span / std::max(count, 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / magnitude;
  return (f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0) * magnitude;
}

std::string format_tick(double v) {
  const double a = std::fabs(v);
  if (a == 0.0) return "0";
  if (a >= 1e9) return strprintf("%.3gG", v / 1e9);
  if (a >= 1e6) return strprintf("%.3gM", v / 1e6);
  if (a >= 1e4) return strprintf("%.3gk", v / 1e3);
  if (a >= 1.0) return strprintf("%.4g", v);
  return strprintf("%.3g", v);
}

struct Range {
  double lo = INFINITY, hi = -INFINITY;
  void add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return !(lo <= hi); }
  void pad() {
    if (empty()) {
      lo = 0.0;
      hi = 1.0;
    } else if (lo == hi) {
      const double d = lo == 0.0 ? 1.0 : std::fabs(lo) * 0.1;
      lo -= d;
      hi += d;
    }
  }
};

// An axis gets about 5 ticks (nice_step); this bounds the loops that draw them whatever the values.
constexpr int kMaxTicks = 50;

// A series with more drawable points than this many per pixel column of the plot is decimated (drawn_points).
constexpr double kMaxPointsPerColumn = 4.0;

// A line chart's plot: its margins, left (the y ticks) and right.
constexpr double kPlotLeft = 64.0, kPlotRight = 16.0;
double plot_width(int chart_width) {
  return chart_width - kPlotLeft - kPlotRight;
}

// The envelope's bucket width for `column` x per pixel column (> 0): the widest power of two not wider.
double bucket_width_for(double column) {
  return std::ldexp(1.0, std::ilogb(column));
}

// The indices of the points of `s` a chart draws (finite, and positive on a log axis), in order. Past
// kMaxPointsPerColumn per pixel column of the plot (`column`: x per pixel column), each run of consecutive points in
// one bucket of x (bucket_width_for(column) wide, or the series' own when SeriesEnvelope kept wider ones) keeps its
// first, lowest, highest and last point, in their order: the same line to the eye (a bucket is at most a pixel
// column wide; the SVG has 0.1 px resolution), with its spikes, while a run's report keeps every one of its steps
// only in metrics.jsonl (six charts of a 10M-step run would otherwise write 60M points, ~700 MB of SVG, into
// report.html). Buckets, not the pixel columns themselves: their edges do not move with the axis's range, so
// SeriesEnvelope can keep the same envelope while it reads the points (svg_chart.h).
std::vector<size_t> drawn_points(const ChartSeries& s, bool log_y, double plot_width, double column) {
  std::vector<size_t> all;
  for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
    if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i]) || (log_y && s.y[i] <= 0.0)) continue;
    all.push_back(i);
  }
  const size_t count = s.reduced ? s.reduced->points : all.size();
  if (static_cast<double>(count) <= kMaxPointsPerColumn * std::max(plot_width, 1.0)) return all;
  const double width = std::max(bucket_width_for(column), s.reduced ? s.reduced->bucket_width : 0.0);
  std::vector<size_t> kept;
  size_t first = 0, low = 0, high = 0, last = 0;
  bool open = false;
  double current = 0.0;
  const auto close = [&] {
    size_t run[4] = {first, low, high, last};
    std::sort(std::begin(run), std::end(run));
    for (size_t k = 0; k < 4; ++k) {
      if (k == 0 || run[k] != run[k - 1]) kept.push_back(run[k]);
    }
  };
  for (const size_t i : all) {
    const double c = std::floor(s.x[i] / width);
    if (open && c == current) {
      if (s.y[i] < s.y[low]) low = i;
      if (s.y[i] > s.y[high]) high = i;
      last = i;
      continue;
    }
    if (open) close();
    first = low = high = last = i;
    current = c;
    open = true;
  }
  if (open) close();
  return kept;
}

std::string figure(const std::string& title, const std::string& svg) {
  return "<figure><figcaption>" + html_escape(title) + "</figcaption>" + svg + "</figure>\n";
}

std::string no_data(const std::string& title) {
  return figure(title, "<p class=\"nodata\">no data</p>");
}

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string render_line_chart(const LineChart& chart, int width, int height) {
  Range xr, yr;
  bool all_positive = true;
  for (const ChartSeries& s : chart.series) {
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      xr.add(s.x[i]);
      yr.add(s.y[i]);
      all_positive = all_positive && s.y[i] > 0.0;
    }
    // A reduced series kept its lowest and highest y (each bucket's), not necessarily its least and greatest x.
    if (s.reduced && s.reduced->points > 0) {
      xr.add(s.reduced->x_lo);
      xr.add(s.reduced->x_hi);
    }
  }
  if (xr.empty()) return no_data(chart.title);
  for (const ChartMarker& m : chart.markers) xr.add(m.x);
  const bool log_y = chart.log_y && all_positive && yr.hi / yr.lo > 10.0;
  const auto ty = [log_y](double v) { return log_y ? std::log10(v) : v; };
  Range yt;
  yt.lo = ty(yr.lo);
  yt.hi = ty(yr.hi);
  xr.pad();
  yt.pad();
  const double ystep = log_y ? 1.0 : nice_step(yt.hi - yt.lo, 5);
  if (!log_y) {
    yt.lo = std::floor(yt.lo / ystep) * ystep;
    yt.hi = std::ceil(yt.hi / ystep) * ystep;
  } else {
    yt.lo = std::floor(yt.lo);
    yt.hi = std::ceil(yt.hi);
  }
  const double left = kPlotLeft, top = 12, bottom = 40;
  const double pw = plot_width(width), ph = height - top - bottom;
  const auto px = [&](double x) { return left + (x - xr.lo) / (xr.hi - xr.lo) * pw; };
  const auto py = [&](double y) { return top + (1.0 - (ty(y) - yt.lo) / (yt.hi - yt.lo)) * ph; };
  const auto pyt = [&](double t) { return top + (1.0 - (t - yt.lo) / (yt.hi - yt.lo)) * ph; };

  std::string svg = strprintf("<svg viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\">", width, height,
                              width, height);
  svg += strprintf("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" class=\"plot\"/>", left, top, pw, ph);
  // Ticks by index, at most kMaxTicks: a step below the values' resolution (steps 1e17 and 1e17 + 16 in a damaged
  // metrics.jsonl: t += 5 leaves t where it is) would otherwise never reach the end.
  for (int k = 0; k <= kMaxTicks; ++k) {
    const double t = yt.lo + k * ystep;
    if (!(t <= yt.hi + 1e-9 * (yt.hi - yt.lo))) break;
    const double y = pyt(t);
    svg += strprintf("<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>", left, left + pw, y, y);
    svg += strprintf("<text x=\"%.1f\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">%s</text>", left - 6, y + 4,
                     html_escape(format_tick(log_y ? std::pow(10.0, t) : t)).c_str());
  }
  const double xstep = nice_step(xr.hi - xr.lo, 6);
  const double xfirst = std::ceil(xr.lo / xstep) * xstep;
  for (int k = 0; k <= kMaxTicks; ++k) {
    const double t = xfirst + k * xstep;
    if (!(t <= xr.hi + 1e-9)) break;
    const double x = px(t);
    svg += strprintf("<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>", x, x, top, top + ph);
    svg += strprintf("<text x=\"%.1f\" y=\"%.1f\" class=\"tick\" text-anchor=\"middle\">%s</text>", x, top + ph + 16,
                     html_escape(format_tick(t)).c_str());
  }
  for (const ChartMarker& m : chart.markers) {
    const double x = px(m.x);
    svg += strprintf("<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" class=\"marker\"/>", x, x, top, top + ph);
    svg += strprintf("<text x=\"%.1f\" y=\"%.1f\" class=\"markerlabel\">%s</text>", x + 3, top + 12,
                     html_escape(m.label).c_str());
  }
  int legend = 0;
  for (size_t k = 0; k < chart.series.size(); ++k) {
    const ChartSeries& s = chart.series[k];
    const std::string color = s.color.empty() ? kPalette[k % std::size(kPalette)] : s.color;
    std::string points;
    size_t n = 0;
    for (const size_t i : drawn_points(s, log_y, pw, (xr.hi - xr.lo) / std::max(pw, 1.0))) {
      points += strprintf("%.1f,%.1f ", px(s.x[i]), py(s.y[i]));
      if (s.markers) {
        svg += strprintf("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>", px(s.x[i]), py(s.y[i]),
                         color.c_str());
      }
      ++n;
    }
    if (n == 0) continue;
    if (s.line && n > 1) {
      svg += strprintf("<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"%s\"/>", color.c_str(),
                       points.c_str());
    }
    if (!s.name.empty()) {
      const double lx = left + 8 + 150.0 * legend++;
      svg += strprintf("<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"%s\"/>", lx, top + ph + 26,
                       color.c_str());
      svg += strprintf("<text x=\"%.1f\" y=\"%.1f\" class=\"legend\">%s</text>", lx + 14, top + ph + 35,
                       html_escape(s.name).c_str());
    }
  }
  if (!chart.x_label.empty()) {
    svg += strprintf("<text x=\"%.1f\" y=\"%.1f\" class=\"axis\" text-anchor=\"end\">%s</text>", left + pw,
                     top + ph + 35, html_escape(chart.x_label).c_str());
  }
  if (!chart.y_label.empty()) {
    svg += strprintf("<text x=\"12\" y=\"%.1f\" class=\"axis\" transform=\"rotate(-90 12 %.1f)\" "
                     "text-anchor=\"middle\">%s</text>",
                     top + ph / 2, top + ph / 2, html_escape(chart.y_label + (log_y ? " (log)" : "")).c_str());
  }
  svg += "</svg>";
  return figure(chart.title, svg);
}

SeriesEnvelope::SeriesEnvelope(int chart_width) {
  const double pw = std::max(plot_width(chart_width), 1.0);
  point_limit_ = static_cast<size_t>(kMaxPointsPerColumn * pw);  // what render_line_chart draws point for point
  run_limit_ = static_cast<size_t>(2.0 * pw) + 1;  // so the buckets are never wider than the chart's (svg_chart.h)
}

double SeriesEnvelope::bucket_of(double x) const {
  return width_ > 0.0 ? std::floor(x / width_) : x;
}

void SeriesEnvelope::add(double x, double y) {
  if (!std::isfinite(x) || !std::isfinite(y)) return;
  const Point p{x, y, points_++};
  x_lo_ = p.index == 0 ? x : std::min(x_lo_, x);
  x_hi_ = p.index == 0 ? x : std::max(x_hi_, x);
  if (merged_) return insert(p);
  points_kept_.push_back(p);
  if (points_kept_.size() <= point_limit_) return;
  // More points than a chart of the planned width draws one by one: from here on, their envelope, at the width of
  // the span so far (one x value each while they all have one).
  merged_ = true;
  const double span = x_hi_ - x_lo_;
  width_ = span > 0.0 ? bucket_width_for(span / static_cast<double>(run_limit_)) : 0.0;
  runs_.reserve(run_limit_ + 1);
  for (const Point& q : points_kept_) insert(q);
  std::vector<Point>().swap(points_kept_);
}

void SeriesEnvelope::insert(const Point& p) {
  const double bucket = bucket_of(p.x);
  if (!runs_.empty() && runs_.back().bucket == bucket) {
    Run& run = runs_.back();
    if (p.y < run.low.y) run.low = p;  // the first of equals, as drawn_points keeps it
    if (p.y > run.high.y) run.high = p;
    run.last = p;
    return;
  }
  runs_.push_back({bucket, p, p, p, p});
  // More runs than the limit hold more than one x value: the span is positive. Each widening doubles a width at
  // which the runs did not fit, so for x that never decreases the width stays below 2 x span / (run limit - 1),
  // at most the width a chart of the planned width cuts its envelope at (a power of two above span / (2 x plot
  // width)). For x that goes back and forth the width may grow to infinity: one bucket, one run.
  while (runs_.size() > run_limit_) {
    const double span = x_hi_ - x_lo_;
    widen(width_ > 0.0 ? 2.0 * width_ : bucket_width_for(span > 0.0 ? span / static_cast<double>(run_limit_) : 1.0));
  }
}

void SeriesEnvelope::widen(double width) {
  width_ = width;
  size_t kept = 0;
  for (Run& run : runs_) {
    // Every point of a run is in one bucket of the old width, so in one of the new (a multiple of it).
    run.bucket = bucket_of(run.first.x);
    if (kept > 0 && runs_[kept - 1].bucket == run.bucket) {
      Run& into = runs_[kept - 1];
      if (run.low.y < into.low.y) into.low = run.low;
      if (run.high.y > into.high.y) into.high = run.high;
      into.last = run.last;
    } else {
      runs_[kept++] = run;
    }
  }
  runs_.resize(kept);
}

ChartSeries SeriesEnvelope::series(std::string name) const {
  ChartSeries s;
  s.name = std::move(name);
  s.reduced = ReducedSeries{.points = points_, .bucket_width = width_, .x_lo = x_lo_, .x_hi = x_hi_};
  for (const Point& p : points_kept_) {
    s.x.push_back(p.x);
    s.y.push_back(p.y);
  }
  for (const Run& run : runs_) {
    Point kept[4] = {run.first, run.low, run.high, run.last};
    std::sort(std::begin(kept), std::end(kept), [](const Point& a, const Point& b) { return a.index < b.index; });
    for (size_t k = 0; k < 4; ++k) {
      if (k > 0 && kept[k].index == kept[k - 1].index) continue;
      s.x.push_back(kept[k].x);
      s.y.push_back(kept[k].y);
    }
  }
  return s;
}

std::string render_bar_chart(const std::string& title, const std::string& unit, const std::vector<ChartBar>& bars,
                             int width) {
  double hi = 0.0;
  for (const ChartBar& b : bars) {
    if (std::isfinite(b.value)) hi = std::max(hi, b.value);
  }
  if (bars.empty() || !(hi > 0.0)) return no_data(title);
  const double label_w = 230, text_w = 110, row = 26;
  const double bar_w = width - label_w - text_w;
  const int height = static_cast<int>(row * static_cast<double>(bars.size()) + 8);
  std::string svg = strprintf("<svg viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\">", width, height,
                              width, height);
  for (size_t i = 0; i < bars.size(); ++i) {
    const ChartBar& b = bars[i];
    const double y = 4 + row * static_cast<double>(i);
    const double w = std::isfinite(b.value) ? std::max(0.0, b.value / hi * bar_w) : 0.0;
    svg += strprintf("<text x=\"%.1f\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">%s</text>", label_w - 8,
                     y + 15, html_escape(b.label).c_str());
    svg += strprintf("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"18\" fill=\"%s\"/>", label_w, y, w,
                     kPalette[i % std::size(kPalette)]);
    const std::string text = b.text.empty() ? format_tick(b.value) + (unit.empty() ? "" : " " + unit) : b.text;
    svg += strprintf("<text x=\"%.1f\" y=\"%.1f\" class=\"tick\">%s</text>", label_w + w + 6, y + 15,
                     html_escape(text).c_str());
  }
  svg += "</svg>";
  return figure(title, svg);
}

std::string render_histogram(const std::string& title, const std::string& x_label, const std::vector<double>& samples,
                             int bins, double lo, double hi, int width, int height) {
  Range r;
  for (const double v : samples) r.add(v);
  if (r.empty() || bins < 1) return no_data(title);
  if (lo == 0.0 && hi == 0.0) {
    lo = r.lo;
    hi = r.hi;
  }
  if (!(hi > lo)) {
    const double d = lo == 0.0 ? 1.0 : std::fabs(lo) * 0.05;
    lo -= d;
    hi += d;
  }
  std::vector<int64_t> counts(static_cast<size_t>(bins), 0);
  for (const double v : samples) {
    if (!std::isfinite(v)) continue;
    const int b = std::clamp(static_cast<int>((v - lo) / (hi - lo) * bins), 0, bins - 1);
    ++counts[static_cast<size_t>(b)];
  }
  const int64_t top_count = *std::max_element(counts.begin(), counts.end());
  const double left = 48, right = 16, top = 10, bottom = 34;
  const double pw = width - left - right, ph = height - top - bottom;
  std::string svg = strprintf("<svg viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\">", width, height,
                              width, height);
  svg += strprintf("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" class=\"plot\"/>", left, top, pw, ph);
  const double bw = pw / bins;
  for (int b = 0; b < bins; ++b) {
    const double h = top_count > 0 ? static_cast<double>(counts[static_cast<size_t>(b)]) / top_count * ph : 0.0;
    svg += strprintf("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>", left + b * bw + 0.5,
                     top + ph - h, std::max(bw - 1.0, 0.5), h, kPalette[0]);
  }
  for (int k = 0; k <= 4; ++k) {
    const double v = lo + (hi - lo) * k / 4.0;
    svg += strprintf("<text x=\"%.1f\" y=\"%.1f\" class=\"tick\" text-anchor=\"middle\">%s</text>",
                     left + pw * k / 4.0, top + ph + 16, html_escape(format_tick(v)).c_str());
  }
  svg += strprintf("<text x=\"%.1f\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">%lld</text>", left - 6, top + 10,
                   static_cast<long long>(top_count));
  svg += strprintf("<text x=\"%.1f\" y=\"%.1f\" class=\"axis\" text-anchor=\"end\">%s</text>", left + pw,
                   top + ph + 30, html_escape(x_label).c_str());
  svg += "</svg>";
  return figure(title, svg);
}

std::string html_table(const std::vector<std::pair<std::string, std::string>>& rows) {
  std::string out = "<table class=\"kv\">";
  for (const auto& [k, v] : rows) out += "<tr><th>" + html_escape(k) + "</th><td>" + html_escape(v) + "</td></tr>";
  return out + "</table>\n";
}

std::string html_page(const std::string& title, const std::string& body) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + html_escape(title) +
         "</title>\n<style>\n"
         "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;max-width:1340px;"
         "color:#222;padding:0 16px}\n"
         "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}\n"
         "p.sub{color:#666;margin:0 0 12px}pre{background:#f6f6f6;padding:8px;overflow-x:auto;font-size:12px}\n"
         ".grid2{display:flex;flex-wrap:wrap;gap:8px 24px}figure{margin:0}figcaption{font-weight:600;"
         "font-size:14px;margin:6px 0 2px}\n"
         "svg{font-size:11px;background:#fff}.plot{fill:#fafafa;stroke:#bbb}.grid{stroke:#e4e4e4}"
         ".tick{fill:#555}.axis{fill:#333}.legend{fill:#333}\n"
         ".marker{stroke:#999;stroke-dasharray:4 3}.markerlabel{fill:#777;font-size:10px}.nodata{color:#999}\n"
         "table{border-collapse:collapse;font-size:13px}td,th{padding:3px 10px;border-bottom:1px solid #eee;"
         "text-align:left;vertical-align:top}table.kv th{color:#555;font-weight:600}\n"
         "table.num td{text-align:right}table.num td:first-child{text-align:left}\n"
         "</style></head><body>\n" +
         body + "\n</body></html>\n";
}

}  // namespace sg::train
