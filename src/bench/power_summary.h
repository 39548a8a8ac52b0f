#pragma once
// The GPU's board power and SM clock while a mode's measured steps ran: the samples power_sampler.h takes,
// and what the bench reports of them. Pure CPU (unit-tested on made-up samples).
//
// Why it is reported: an H200 at its power limit lowers its SM clock, and a step's time then follows the
// energy it spends, not its kernels' quality alone (docs/performance.md: the 1b step and the grouped GEMM's
// timing regimes). When two runs of one step differ by a few percent, this is the first place to look.
#include <string>
#include <vector>

namespace sg::bench {

struct PowerSample {
  double power_w = 0.0;       // board power draw
  double sm_clock_mhz = 0.0;  // current SM clock
  bool power_capped = false;  // NVML: the clock is held down by the power limit (software cap or power brake)
  bool thermal = false;       // NVML: ... by a thermal slowdown
};

struct PowerSummary {
  std::string unavailable;  // why there are no samples ("" when there are)
  int samples = 0;
  double interval_ms = 0.0;    // between samples
  double power_limit_w = 0.0;  // the enforced limit; 0 unknown
  double max_sm_clock_mhz = 0.0;  // the device's maximum; 0 unknown
  double power_median_w = 0.0, power_max_w = 0.0;
  double sm_clock_median_mhz = 0.0, sm_clock_min_mhz = 0.0;
  bool power_instant = true;        // power samples are the current draw (false: NVML's 1 s averages)
  bool reasons_known = true;        // NVML reported why the clock was held down (not every GPU does)
  double power_capped_share = 0.0;  // of the samples, those whose clock the power limit held down
  double thermal_share = 0.0;
  bool measured() const { return samples > 0; }
};

// Medians, extremes and shares of `samples`. No samples: measured() is false and `unavailable` says why
// ("no sample was taken" when the caller gives no reason).
PowerSummary summarize_power(const std::vector<PowerSample>& samples, double interval_ms, double power_limit_w,
                             double max_sm_clock_mhz, bool reasons_known, const std::string& unavailable = "");

// "median 685 W of the 700 W limit (max 709 W); SM clock median 1755 MHz (min 1395, device max 1980 MHz); clock
// held down by the power cap in 59% of 210 samples (every 20 ms)" (the share: samples whose NVML clock-limit
// reasons include the software power cap or the power brake), or "not sampled: <why>".
std::string describe_power(const PowerSummary& s);

}  // namespace sg::bench
