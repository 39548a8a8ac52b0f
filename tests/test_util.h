#pragma once
// Shared by CPU and GPU tests: seeded random inputs, error metrics with stated tolerances, a scoped
// environment variable.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"

namespace sg::test {

inline std::vector<float> random_normal(size_t n, uint64_t seed, float stddev = 1.0f) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

inline std::vector<int32_t> random_tokens(size_t n, int32_t vocab, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int32_t> dist(0, vocab - 1);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// ||a - b|| / ||b|| (b is the reference). NaN anywhere gives +inf so it never passes.
inline double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  if (a.size() != b.size()) return INFINITY;
  return den == 0.0 ? std::sqrt(num) : std::sqrt(num / den);
}

// max |a - b| / |b| over the elements (b the reference): every element at its own scale, where a norm-wise error
// would let a few large values swamp the rest. A non-finite value in `a` gives +inf.
inline double max_relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]) / std::fabs(static_cast<double>(b[i])));
  }
  return worst;
}

// Tolerances used across the GPU tests (issue 4): bf16 compute vs the fp32 CPU reference, and fp32.
inline constexpr double kBf16RelTol = 1e-2;
inline constexpr double kFp32RelTol = 1e-5;

// The message of the sg::Error `f` throws, or "" when it throws none.
inline std::string thrown_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The message of any std::exception `f` throws (a filesystem or JSON error too), or "" when it throws none.
inline std::string exception_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// Sets (value) or unsets (nullptr) an environment variable for one scope, then restores what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

}  // namespace sg::test
