// bench/power_summary: what `stepgraph bench` reports of the power and clock samples, on made-up samples.
#include "bench/power_summary.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sg::bench {
namespace {

PowerSample sample(double watts, double mhz, bool capped, bool thermal = false) {
  return {.power_w = watts, .sm_clock_mhz = mhz, .power_capped = capped, .thermal = thermal};
}

TEST(PowerSummary, MediansExtremesAndSharesMatchAHandComputation) {
  const std::vector<PowerSample> samples = {sample(690, 1600, true), sample(700, 1500, true), sample(420, 1980, false),
                                            sample(695, 1560, true)};
  const PowerSummary s = summarize_power(samples, 20.0, 700.0, 1980.0, true);
  ASSERT_TRUE(s.measured());
  EXPECT_EQ(s.samples, 4);
  EXPECT_DOUBLE_EQ(s.power_median_w, 692.5);  // (690 + 695) / 2, as bench_stats' percentile
  EXPECT_DOUBLE_EQ(s.power_max_w, 700.0);
  EXPECT_DOUBLE_EQ(s.sm_clock_median_mhz, 1580.0);
  EXPECT_DOUBLE_EQ(s.sm_clock_min_mhz, 1500.0);
  EXPECT_DOUBLE_EQ(s.power_capped_share, 0.75);
  EXPECT_DOUBLE_EQ(s.thermal_share, 0.0);
  EXPECT_EQ(describe_power(s),
            "median 692 W of the 700 W limit (max 700 W); SM clock median 1580 MHz (min 1500, device max 1980 MHz); "
            "clock held down by the power cap in 75% of 4 samples (every 20 ms)");
}

TEST(PowerSummary, UnknownLimitsReasonsAndThermalAreSaid) {
  const PowerSummary s = summarize_power({sample(300, 1200, false, true)}, 50.0, 0.0, 0.0, false);
  const std::string text = describe_power(s);
  EXPECT_EQ(text.find("limit ("), std::string::npos) << text;  // no limit known: none named
  EXPECT_EQ(text.find("device max"), std::string::npos) << text;
  EXPECT_EQ(text.find("power cap"), std::string::npos) << text;
  EXPECT_NE(text.find("1 samples (every 50 ms); this GPU does not report why its clock is held down"), std::string::npos)
      << text;
  EXPECT_NE(text.find("a thermal slowdown in 100%"), std::string::npos) << text;
}

TEST(PowerSummary, AveragedReadingsAreSaid) {
  PowerSummary s = summarize_power({sample(500, 1700, false)}, 20.0, 700.0, 1980.0, true);
  EXPECT_EQ(describe_power(s).find("averages"), std::string::npos);
  s.power_instant = false;
  EXPECT_NE(describe_power(s).find("(max 500 W; 1 s averages)"), std::string::npos) << describe_power(s);
}

TEST(PowerSummary, NoSamplesSayWhy) {
  const PowerSummary missing = summarize_power({}, 20.0, 700.0, 1980.0, true, "libnvidia-ml.so.1 cannot be loaded");
  EXPECT_FALSE(missing.measured());
  EXPECT_EQ(describe_power(missing), "not sampled: libnvidia-ml.so.1 cannot be loaded");
  EXPECT_EQ(describe_power(summarize_power({}, 20.0, 0.0, 0.0, true)), "not sampled: no sample was taken");
}

}  // namespace
}  // namespace sg::bench
