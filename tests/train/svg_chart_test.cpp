// train/svg_chart's line charts: a series with more than 4 points per pixel column of the plot is drawn through
// its envelope (first, lowest, highest, last point of each bucket of x, a power of two at most a pixel column
// wide), so report.html stays kilobytes however many steps a run records (a line per step in metrics.jsonl: 1M
// points wrote ~12 MB of SVG per chart before), and still shows the spikes; a series that fits is drawn point for
// point. SeriesEnvelope keeps that envelope while the points are read, in memory bounded by the chart's width: the
// chart drawn from it is the chart drawn from every point, byte for byte.
#include "train/svg_chart.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
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
  // Buckets of 1024 steps (a pixel column is 1785.7): at most 2 x 560 + 1 of them, 4 points each.
  EXPECT_LE(points.size(), 4u * (2 * 560 + 1));
  EXPECT_GT(points.size(), 977u);  // every bucket holds points
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

struct Curve {
  std::vector<double> x, y;
};

// A training curve as metrics.jsonl gives it: `n` points from x = `first_x` on, a noisy random walk with spikes and
// dips (each about 1 in 10^4 points) and a few missing points (non-finite: a capture step's time, a NaN loss).
Curve noisy_curve(size_t n, uint64_t seed, double first_x = 1.0, bool positive = false) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0.0, 0.05);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  Curve c;
  double level = 10.0;
  for (size_t i = 0; i < n; ++i) {
    level = std::max(0.5, level * 0.99999 + noise(rng));
    const double u = unit(rng);
    double y = u < 1e-4 ? level * 40.0 : u < 2e-4 ? (positive ? level * 1e-3 : -level) : level;
    if (unit(rng) < 1e-3) y = unit(rng) < 0.5 ? NAN : INFINITY;
    c.x.push_back(first_x + static_cast<double>(i));
    c.y.push_back(y);
  }
  return c;
}

ChartSeries every_point(const std::string& name, const Curve& c) {
  return ChartSeries{name, c.x, c.y};
}

ChartSeries envelope_of(const std::string& name, const Curve& c, int envelope_width) {
  SeriesEnvelope e(envelope_width);
  for (size_t i = 0; i < c.x.size(); ++i) e.add(c.x[i], c.y[i]);
  return e.series(name);
}

// The chart of `curves` (the second with dots, as report.html draws validation loss; a capture marked at `marker`)
// drawn from every point and from envelopes kept for a chart `envelope_width` wide: the same SVG.
void expect_same_chart(const std::vector<Curve>& curves, int envelope_width, int width, int height, bool log_y,
                       double marker) {
  LineChart all, reduced;
  for (LineChart* chart : {&all, &reduced}) {
    chart->title = "loss";
    chart->x_label = "step";
    chart->y_label = "loss";
    chart->log_y = log_y;
    chart->markers = {{marker, "graph capture"}};
  }
  size_t kept = 0, points = 0;
  for (size_t k = 0; k < curves.size(); ++k) {
    const std::string name = "series " + std::to_string(k);
    all.series.push_back(every_point(name, curves[k]));
    reduced.series.push_back(envelope_of(name, curves[k], envelope_width));
    all.series.back().markers = reduced.series.back().markers = k == 1;
    kept += reduced.series.back().x.size();
    points += curves[k].x.size();
  }
  const std::string want = render_line_chart(all, width, height);
  const std::string got = render_line_chart(reduced, width, height);
  if (want == got) return;
  const size_t at =
      static_cast<size_t>(std::mismatch(want.begin(), want.end(), got.begin(), got.end()).first - want.begin());
  const size_t from = at < 80 ? 0 : at - 80;
  ADD_FAILURE() << points << " points (" << kept << " kept for a chart " << envelope_width << " wide) drawn " << width
                << " wide: the SVGs differ at byte " << at << " of " << want.size() << " / " << got.size()
                << "\nfrom every point: ..." << want.substr(from, 160) << "\nfrom the envelope: ..."
                << got.substr(from, 160);
}

TEST(SeriesEnvelope, AChartFromTheEnvelopeIsTheChartFromEveryPoint) {
  // A 2M-step run's loss with its validation loss every 1000 steps, drawn as report.html draws it (980 x 320), and
  // at 640 from the same envelopes (a narrower chart); its gradient norm on a log axis.
  const Curve loss = noisy_curve(2'000'003, 1);
  Curve val;
  for (size_t i = 999; i < loss.x.size(); i += 1000) {
    val.x.push_back(loss.x[i]);
    val.y.push_back(loss.y[i] + 0.1);
  }
  expect_same_chart({loss, val}, 980, 980, 320, false, 2.0);
  expect_same_chart({loss, val}, 980, 640, 260, false, 2.0);
  expect_same_chart({noisy_curve(2'000'003, 2, 1.0, /*positive=*/true)}, 640, 640, 260, true, 2.0);
  // Values that repeat (memory in use, a learning-rate schedule): which of equal points is drawn matters.
  Curve steps = noisy_curve(1'000'000, 4);
  for (double& y : steps.y) y = std::round(y * 2.0) / 2.0;
  expect_same_chart({steps}, 640, 640, 260, false, 2.0);
  // A resumed run's records from step 123457 on, its capture marked where it resumed.
  expect_same_chart({noisy_curve(1'500'000, 3, 123'457.0)}, 640, 640, 260, false, 123'458.0);
}

TEST(SeriesEnvelope, EveryLengthAroundItsLimitsDrawsAsEveryPoint) {
  // A 640-wide chart (560 px of plot) draws up to 2240 points one by one; its envelope keeps up to 1121 runs.
  for (const size_t n :
       {0, 1, 2, 1121, 1122, 2239, 2240, 2241, 2242, 3000, 4482, 4483, 8966, 10'007, 65'537, 300'001}) {
    SCOPED_TRACE("points: " + std::to_string(n));
    expect_same_chart({noisy_curve(n, 10 + n)}, 640, 640, 260, false, 1.0);
    expect_same_chart({noisy_curve(n, 20 + n)}, 980, 640, 260, false, 1.0);
  }
  // x that repeats (never decreasing): each step three times, and 5000 points at one step first.
  Curve repeated = noisy_curve(300'000, 30), flat_first = noisy_curve(300'000, 31);
  for (size_t i = 0; i < repeated.x.size(); ++i) repeated.x[i] = std::floor(static_cast<double>(i) / 3.0);
  for (size_t i = 0; i < flat_first.x.size(); ++i) flat_first.x[i] = std::max(0.0, static_cast<double>(i) - 5000.0);
  expect_same_chart({repeated}, 640, 640, 260, false, 1.0);
  expect_same_chart({flat_first}, 640, 640, 260, false, 1.0);
  // Points that crowd: 2000 in one step and 240 over the next 1000 steps (up to 2240 the chart draws every one).
  for (const size_t n : {2240, 2241}) {
    Curve crowded = noisy_curve(n, 33);
    for (size_t i = 0; i < n; ++i) {
      crowded.x[i] = i < 2000 ? static_cast<double>(i) / 2000.0 : 1.0 + static_cast<double>(i - 2000) * 1000.0 / 240.0;
    }
    expect_same_chart({crowded}, 640, 640, 260, false, 0.0);
  }
  // Records out of order: a later step first, and the least x inside its bucket's run (neither first, last, lowest
  // nor highest: the envelope does not keep it, the x axis starts there all the same).
  Curve out_of_order = noisy_curve(300'000, 34);
  out_of_order.x[0] = 1000.5;
  out_of_order.x[2] = 3.5, out_of_order.x[3] = 1.0, out_of_order.y[3] = 10.0;
  expect_same_chart({out_of_order}, 640, 640, 260, false, 2.0);
  // Fractional x (a chart of seconds, say): buckets narrower than 1.
  Curve seconds = noisy_curve(100'000, 32);
  for (double& x : seconds.x) x *= 1e-3;
  expect_same_chart({seconds}, 640, 640, 260, false, 0.0);
}

TEST(SeriesEnvelope, KeepsAtMostEightPointsAPixelColumnWhateverTheLength) {
  // 560 px of plot: at most 2 x 560 + 1 buckets of 4 points, after at most 4 x 560 points one by one.
  constexpr size_t kBound = 8 * 560 + 4;
  SeriesEnvelope steps(640);
  for (size_t i = 1; i <= 10'000'000; ++i) steps.add(static_cast<double>(i), std::sin(static_cast<double>(i)));
  EXPECT_EQ(steps.points(), 10'000'000u);
  EXPECT_LE(steps.series("loss").x.size(), kBound);
  // x that goes back and forth (no run's steps do; the memory stays bounded all the same): at random, and across 0.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  SeriesEnvelope random(640), across_zero(640);
  for (size_t i = 1; i <= 1'000'000; ++i) {
    random.add(1e6 * unit(rng), unit(rng));
    across_zero.add(i % 2 ? -static_cast<double>(i) : static_cast<double>(i), unit(rng));
  }
  EXPECT_LE(random.series("x").x.size(), kBound);
  EXPECT_LE(across_zero.series("x").x.size(), kBound);
  LineChart chart;
  chart.series = {random.series("x"), across_zero.series("y")};
  EXPECT_LT(render_line_chart(chart).size(), 256u * 1024);
}

// Found with tests/fuzz/run_records_fuzz.cpp's harness (a metrics.jsonl with steps 1e17 and 1e17 + 16): the tick
// step (5) was below the values' resolution (16), so `t += step` left t where it was and the tick loop never ended,
// writing SVG until memory ran out. The ticks are counted now.
TEST(SvgLineChart, AStepBelowTheValuesResolutionStillEndsTheTicks) {
  ChartSeries s{"loss", {1e17, 1e17 + 16}, {1e17, 1e17 + 16}};
  LineChart chart;
  chart.series = {s};
  const std::string svg = render_line_chart(chart, 640, 260);
  size_t ticks = 0;
  for (size_t at = svg.find("class=\"tick\""); at != std::string::npos; at = svg.find("class=\"tick\"", at + 1)) {
    ++ticks;
  }
  EXPECT_GT(ticks, 0u);
  EXPECT_LE(ticks, 2u * 51);
  EXPECT_LT(svg.size(), 64u * 1024);
}

}  // namespace
}  // namespace sg::train
