#include "bench/power_summary.h"

#include <algorithm>
#include <cmath>

#include "bench/bench_stats.h"
#include "core/strings.h"

namespace sg::bench {

PowerSummary summarize_power(const std::vector<PowerSample>& samples, double interval_ms, double power_limit_w,
                             double max_sm_clock_mhz, bool reasons_known, const std::string& unavailable) {
  PowerSummary s;
  s.reasons_known = reasons_known;
  s.interval_ms = interval_ms;
  s.power_limit_w = power_limit_w;
  s.max_sm_clock_mhz = max_sm_clock_mhz;
  if (samples.empty()) {
    s.unavailable = unavailable.empty() ? "no sample was taken" : unavailable;
    return s;
  }
  s.samples = static_cast<int>(samples.size());
  std::vector<double> power, clock;
  int capped = 0, thermal = 0;
  for (const PowerSample& p : samples) {
    power.push_back(p.power_w);
    clock.push_back(p.sm_clock_mhz);
    capped += p.power_capped;
    thermal += p.thermal;
  }
  s.power_median_w = percentile(power, 0.5);
  s.power_max_w = *std::max_element(power.begin(), power.end());
  s.sm_clock_median_mhz = percentile(clock, 0.5);
  s.sm_clock_min_mhz = *std::min_element(clock.begin(), clock.end());
  s.power_capped_share = static_cast<double>(capped) / s.samples;
  s.thermal_share = static_cast<double>(thermal) / s.samples;
  return s;
}

std::string describe_power(const PowerSummary& s) {
  if (!s.measured()) return "not sampled: " + s.unavailable;
  std::string text = strprintf("median %.0f W", s.power_median_w);
  if (s.power_limit_w > 0) text += strprintf(" of the %.0f W limit", s.power_limit_w);
  text += strprintf(" (max %.0f W%s); SM clock median %.0f MHz (min %.0f", s.power_max_w,
                    s.power_instant ? "" : "; 1 s averages", s.sm_clock_median_mhz,
                    s.sm_clock_min_mhz);
  if (s.max_sm_clock_mhz > 0) text += strprintf(", device max %.0f", s.max_sm_clock_mhz);
  text += " MHz); ";
  if (s.reasons_known) {
    text += strprintf("clock held down by the power cap in %.0f%% of ", std::round(100.0 * s.power_capped_share));
  }
  text += strprintf("%d samples (every %.0f ms)", s.samples, s.interval_ms);
  if (!s.reasons_known) text += "; this GPU does not report why its clock is held down";
  if (s.thermal_share > 0) text += strprintf("; a thermal slowdown in %.0f%%", std::round(100.0 * s.thermal_share));
  return text;
}

}  // namespace sg::bench
