#include "bench/power_sampler.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nvml.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "core/log.h"
#include "core/strings.h"

namespace sg::bench {
namespace {

constexpr const char* kSoname = "libnvidia-ml.so.1";

// The NVML functions used, from the driver's library (signatures from nvml.h).
struct NvmlApi {
  decltype(&nvmlInit_v2) Init = nullptr;
  decltype(&nvmlShutdown) Shutdown = nullptr;
  decltype(&nvmlErrorString) ErrorString = nullptr;
  decltype(&nvmlDeviceGetHandleByPciBusId_v2) GetHandleByPciBusId = nullptr;
  decltype(&nvmlDeviceGetPowerUsage) GetPowerUsage = nullptr;  // a 1 s average on Ampere and newer
  decltype(&nvmlDeviceGetFieldValues) GetFieldValues = nullptr;  // NVML_FI_DEV_POWER_INSTANT: the current draw
  decltype(&nvmlDeviceGetEnforcedPowerLimit) GetEnforcedPowerLimit = nullptr;
  decltype(&nvmlDeviceGetClockInfo) GetClockInfo = nullptr;
  decltype(&nvmlDeviceGetMaxClockInfo) GetMaxClockInfo = nullptr;
  // Renamed from ...ThrottleReasons in newer drivers; either serves.
  decltype(&nvmlDeviceGetCurrentClocksEventReasons) GetClocksEventReasons = nullptr;
};

// A field value as a double (NVML picks the type per field and driver); false for a type it does not list.
bool field_as_double(const nvmlFieldValue_t& f, double& out) {
  switch (f.valueType) {
    case NVML_VALUE_TYPE_DOUBLE: out = f.value.dVal; return true;
    case NVML_VALUE_TYPE_UNSIGNED_INT: out = f.value.uiVal; return true;
    case NVML_VALUE_TYPE_UNSIGNED_LONG: out = static_cast<double>(f.value.ulVal); return true;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: out = static_cast<double>(f.value.ullVal); return true;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG: out = static_cast<double>(f.value.sllVal); return true;
    case NVML_VALUE_TYPE_SIGNED_INT: out = f.value.siVal; return true;
    case NVML_VALUE_TYPE_UNSIGNED_SHORT: out = f.value.usVal; return true;
    default: return false;
  }
}

template <class F>
bool bind(void* handle, const char* name, F& out) {
  out = reinterpret_cast<F>(::dlsym(handle, name));
  return out != nullptr;
}

// The reason bits (nvml.h names the hardware ones only in their older ...ThrottleReason... spelling).
constexpr unsigned long long kPowerReasons =
    nvmlClocksEventReasonSwPowerCap | nvmlClocksThrottleReasonHwPowerBrakeSlowdown;
constexpr unsigned long long kThermalReasons =
    nvmlClocksEventReasonSwThermalSlowdown | nvmlClocksThrottleReasonHwThermalSlowdown;

}  // namespace

struct PowerSampler::State {
  void* library = nullptr;
  NvmlApi api;
  bool initialized = false;
  nvmlDevice_t device = nullptr;
  double power_limit_w = 0.0, max_sm_clock_mhz = 0.0;
  bool reasons_known = true;
  bool instant = true;  // the current draw (field value); false: nvmlDeviceGetPowerUsage's reading

  std::thread thread;
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::vector<PowerSample> samples;
  std::string failure;  // a read that failed while sampling

  std::string error(nvmlReturn_t r) const { return api.ErrorString ? api.ErrorString(r) : std::to_string(int(r)); }

  // One sample; false (and `failure` set) when NVML cannot read power or clock.
  bool take(PowerSample& s) {
    double milliwatts = 0.0;
    nvmlReturn_t r = NVML_SUCCESS;
    if (instant) {
      nvmlFieldValue_t field{};
      field.fieldId = NVML_FI_DEV_POWER_INSTANT;
      r = api.GetFieldValues(device, 1, &field);
      if (r == NVML_SUCCESS) r = field.nvmlReturn;
      if (r == NVML_SUCCESS && !field_as_double(field, milliwatts)) r = NVML_ERROR_UNKNOWN;  // an unknown value type
    } else {
      unsigned int average = 0;
      r = api.GetPowerUsage(device, &average);
      milliwatts = average;
    }
    unsigned int mhz = 0;
    if (r == NVML_SUCCESS) r = api.GetClockInfo(device, NVML_CLOCK_SM, &mhz);
    if (r != NVML_SUCCESS) {
      failure = "NVML stopped answering: " + error(r);
      return false;
    }
    s.power_w = milliwatts / 1000.0;
    s.sm_clock_mhz = mhz;
    unsigned long long reasons = 0;
    if (reasons_known) {
      if (api.GetClocksEventReasons(device, &reasons) == NVML_SUCCESS) {
        s.power_capped = (reasons & kPowerReasons) != 0;
        s.thermal = (reasons & kThermalReasons) != 0;
      } else {
        reasons_known = false;  // a failed read is no "not capped": the summary says the reasons are unknown
      }
    }
    return true;
  }

  void run(double interval_ms) {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping) {
      PowerSample s;
      lock.unlock();
      const bool ok = take(s);
      lock.lock();
      if (!ok) return;
      samples.push_back(s);
      wake.wait_for(lock, std::chrono::duration<double, std::milli>(interval_ms), [this] { return stopping; });
    }
  }
};

PowerSampler::PowerSampler(bool enabled, double interval_ms)
    : state_(std::make_unique<State>()), interval_ms_(interval_ms) {
  if (!enabled) {
    unavailable_ = "--no-power";
    return;
  }
  State& st = *state_;
  st.library = ::dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
  if (st.library == nullptr) {
    const char* why = ::dlerror();
    unavailable_ = std::string(kSoname) + " (the NVIDIA driver's NVML) cannot be loaded" +
                   (why ? std::string(": ") + why : std::string());
    return;
  }
  NvmlApi& api = st.api;
  bool ok = bind(st.library, "nvmlInit_v2", api.Init);
  ok = bind(st.library, "nvmlShutdown", api.Shutdown) && ok;
  ok = bind(st.library, "nvmlErrorString", api.ErrorString) && ok;
  ok = bind(st.library, "nvmlDeviceGetHandleByPciBusId_v2", api.GetHandleByPciBusId) && ok;
  ok = bind(st.library, "nvmlDeviceGetPowerUsage", api.GetPowerUsage) && ok;
  ok = bind(st.library, "nvmlDeviceGetEnforcedPowerLimit", api.GetEnforcedPowerLimit) && ok;
  ok = bind(st.library, "nvmlDeviceGetClockInfo", api.GetClockInfo) && ok;
  ok = bind(st.library, "nvmlDeviceGetMaxClockInfo", api.GetMaxClockInfo) && ok;
  if (!ok) {
    unavailable_ = std::string(kSoname) + " lacks functions the power sampling needs (an old driver?)";
    return;
  }
  if (!bind(st.library, "nvmlDeviceGetFieldValues", api.GetFieldValues)) st.instant = false;
  if (!bind(st.library, "nvmlDeviceGetCurrentClocksEventReasons", api.GetClocksEventReasons) &&
      !bind(st.library, "nvmlDeviceGetCurrentClocksThrottleReasons", api.GetClocksEventReasons)) {
    st.reasons_known = false;
  }
  if (const nvmlReturn_t r = api.Init(); r != NVML_SUCCESS) {
    unavailable_ = "nvmlInit failed: " + st.error(r);
    return;
  }
  st.initialized = true;
  int device = 0;
  char bus_id[64] = {0};
  const char* call = "cudaGetDevice";
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) {
    call = "cudaDeviceGetPCIBusId";
    err = cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device);
  }
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // reported here; not sticky, so the caller's next CUDA check is not about it
    unavailable_ = strprintf("the CUDA device's PCI bus id is unknown: %s failed: %s: %s", call, cudaGetErrorName(err),
                             cudaGetErrorString(err));
    return;
  }
  if (const nvmlReturn_t r = api.GetHandleByPciBusId(bus_id, &st.device); r != NVML_SUCCESS) {
    unavailable_ = strprintf("NVML does not know the CUDA device at PCI %s: %s", bus_id, st.error(r).c_str());
    return;
  }
  unsigned int limit_mw = 0, max_mhz = 0;
  if (api.GetEnforcedPowerLimit(st.device, &limit_mw) == NVML_SUCCESS) st.power_limit_w = limit_mw / 1000.0;
  if (api.GetMaxClockInfo(st.device, NVML_CLOCK_SM, &max_mhz) == NVML_SUCCESS) st.max_sm_clock_mhz = max_mhz;
  unsigned long long reasons = 0;
  if (st.reasons_known && api.GetClocksEventReasons(st.device, &reasons) != NVML_SUCCESS) st.reasons_known = false;
  PowerSample probe;
  if (st.instant && !st.take(probe)) st.instant = false;  // an older driver without the instant field
  if (!st.take(probe)) unavailable_ = st.failure;
}

PowerSampler::~PowerSampler() {
  if (state_->thread.joinable()) stop();
  if (state_->initialized) {
    if (const nvmlReturn_t r = state_->api.Shutdown(); r != NVML_SUCCESS) {
      try {  // a destructor: logged, not thrown (as SG_CUDA_CHECK_NOEXCEPT)
        log::error(strprintf("nvmlShutdown failed: %s [%s:%d]", state_->error(r).c_str(), __FILE__, __LINE__));
      } catch (...) {
        std::fprintf(stderr, "error: nvmlShutdown failed: NVML error %d\n", static_cast<int>(r));
      }
    }
  }
  // The library stays loaded: NVML's own at-exit work may still run.
}

void PowerSampler::start() {
  if (!available()) return;
  if (state_->thread.joinable()) stop();
  State& st = *state_;
  st.samples.clear();
  st.failure.clear();
  st.stopping = false;
  st.thread = std::thread([this] { state_->run(interval_ms_); });
}

PowerSummary PowerSampler::stop() {
  State& st = *state_;
  if (st.thread.joinable()) {
    {
      std::lock_guard<std::mutex> lock(st.mutex);
      st.stopping = true;
    }
    st.wake.notify_all();
    st.thread.join();
  }
  std::string why = unavailable_;
  if (why.empty() && st.samples.empty()) why = st.failure;
  PowerSummary summary =
      summarize_power(st.samples, interval_ms_, st.power_limit_w, st.max_sm_clock_mhz, st.reasons_known, why);
  summary.power_instant = st.instant;
  return summary;
}

}  // namespace sg::bench
