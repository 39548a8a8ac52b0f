// train/svg_chart's line charts: a series with more points than the plot has pixel columns is drawn through its
// per-column envelope (first, lowest, highest, last point of each column), so report.html stays kilobytes however
// many steps a run records (a line per step in metrics.jsonl: 1M points wrote ~12 MB of SVG per chart before), and
// still shows the spikes; a series that fits is drawn point for point, as before.
#include "train/svg_chart.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace sg::train {
namespace {

// The points of the chart's one polyline ("x,y x,y ...").
std::vector<std::string> polyline_points(const std::string& svg) {
  const std::string tag = "points=\"";
  const size_t at = svg.find("<polyline");
  if (at == std::string::npos) return {};
  const size_t begin = svg.find(tag, at) + tag.size();
  const std::string text = svg.substr(begin, svg.find('"', begin) - begin);
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    const size_t space = text.find(' ', i);
    out.push_back(text.substr(i, space - i));
    i = space + 1;
  }
  return out;
}

// The y pixel of a point ("123.4,56.7" -> "56.7").
std::string y_of(const std::string& point) {
  return point.substr(point.find(',') + 1);
}

TEST(SvgLineChart, AMillionStepsDrawTheirEnvelopeInKilobytes) {
  constexpr size_t n = 1'000'000;
  ChartSeries s{"loss", {}, {}};
  s.x.resize(n);
  s.y.resize(n);
  for (size_t i = 0; i < n; ++i) {
    s.x[i] = static_cast<double>(i + 1);
    s.y[i] = 0.5 + 0.1 * std::sin(static_cast<double>(i));
  }
  s.y[777'777] = 100.0;  // a loss spike: the axis runs 0 to 100
  s.y[123'457] = 0.0;    // and a dip to its bottom
  LineChart chart;
  chart.series = {s};
  const std::string svg = render_line_chart(chart, 640, 260);  // plot: 560 x 208 px from (64, 12)
  EXPECT_LT(svg.size(), 64u * 1024) << "a 1M-point series wrote " << svg.size() << " bytes of SVG";
  const std::vector<std::string> points = polyline_points(svg);
  EXPECT_LE(points.size(), 4u * 561);
  EXPECT_GT(points.size(), 561u);  // every column of the plot holds points
  size_t spike = 0, dip = 0;
  for (const std::string& p : points) {
    spike += y_of(p) == "12.0";  // y = 100: the top of the plot
    dip += y_of(p) == "220.0";   // y = 0: its bottom
  }
  EXPECT_EQ(spike, 1u) << "the spike is not drawn";
  EXPECT_EQ(dip, 1u) << "the dip is not drawn";
  EXPECT_EQ(points.front(), "64.0,219.0") << "the first step (y 0.5) is not the line's start";
}

TEST(SvgLineChart, ASeriesThatFitsIsDrawnPointForPoint) {
  ChartSeries s{"lr", {}, {}};
  for (int i = 0; i < 2240; ++i) {  // 4 points per column of a 560-px plot: not decimated
    s.x.push_back(i);
    s.y.push_back(i % 7);
  }
  s.y[5] = NAN;  // skipped, as ever
  LineChart chart;
  chart.series = {s};
  EXPECT_EQ(polyline_points(render_line_chart(chart, 640, 260)).size(), 2239u);
}

}  // namespace
}  // namespace sg::train
