#include "bench/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "core/strings.h"

namespace sg::bench {

double percentile(std::vector<double> values, double fraction) {
  SG_CHECK(fraction >= 0.0 && fraction <= 1.0, strprintf("percentile fraction %g is outside [0, 1]", fraction));
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  for (const double v : values) SG_CHECK(!std::isnan(v), "percentile of a NaN sample");
  std::sort(values.begin(), values.end());
  const double position = fraction * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(position));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (position - static_cast<double>(lo));
}

SampleStats sample_stats(const std::vector<double>& values) {
  SampleStats s;
  s.count = values.size();
  if (values.empty()) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    s.median = s.p90 = s.mean = s.min = s.max = nan;
    return s;
  }
  s.median = percentile(values, 0.5);
  s.p90 = percentile(values, 0.9);
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  s.min = *lo;
  s.max = *hi;
  return s;
}

}  // namespace sg::bench
