#pragma once
// Samples the current CUDA device's board power, SM clock and the reasons NVML gives for holding the clock
// down, on a thread of its own, every interval between start() and stop().
//
// NVML is the driver's libnvidia-ml.so.1, loaded at run time (dlopen) rather than linked, so binaries start on
// machines without a driver (CI). Where it cannot be loaded or does not know the device, the sampler is
// unavailable and says why; the bench then reports "not sampled: <why>" and measures everything else as
// before: power is context for the step times, not one of them.
#include <memory>
#include <string>

#include "bench/power_summary.h"

namespace sg::bench {

class PowerSampler {
 public:
  static constexpr double kDefaultIntervalMs = 20.0;

  // Opens NVML for the current CUDA device (matched by PCI bus id). Never throws for a missing NVML.
  // enabled = false (--no-power): touches no NVML; unavailable() says so.
  explicit PowerSampler(bool enabled = true, double interval_ms = kDefaultIntervalMs);
  ~PowerSampler();  // stops a running thread
  PowerSampler(const PowerSampler&) = delete;
  PowerSampler& operator=(const PowerSampler&) = delete;

  bool available() const { return unavailable_.empty(); }
  const std::string& unavailable() const { return unavailable_; }

  // Starts sampling (the first sample at once). Without NVML it does nothing.
  void start();
  // Stops and joins the thread; the summary of the samples since start() (unavailable: no samples, the reason).
  PowerSummary stop();

 private:
  struct State;
  std::unique_ptr<State> state_;
  std::string unavailable_;
  double interval_ms_;
};

}  // namespace sg::bench
