#pragma once
// Order statistics of per-step samples. Percentiles interpolate linearly between the two closest
// ranks (numpy's default "linear" method), so the median of an even count is the mean of the middle
// two and p90 of 50 samples lies between the 45th and 46th smallest.
#include <cstddef>
#include <vector>

namespace sg::bench {

struct SampleStats {
  size_t count = 0;
  double median = 0.0;
  double p90 = 0.0;
  double mean = 0.0;
  double min = 0.0;
  double max = 0.0;
};

// `fraction` in [0, 1]; NaN for no samples. Throws sg::Error for a fraction outside [0, 1] or a NaN sample.
double percentile(std::vector<double> values, double fraction);

// All of the above; every field NaN (count 0) for no samples.
SampleStats sample_stats(const std::vector<double>& values);

}  // namespace sg::bench
