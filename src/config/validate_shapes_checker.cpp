// Rule 16's reporting helpers (validate_shapes_checker.h): each check names the keys, their values and a fix.
#include "config/validate_shapes_checker.h"

#include <algorithm>
#include <cmath>

#include "core/strings.h"

namespace sg::config::detail {

void ShapeChecker::fail(const std::string& message, const std::vector<std::string>& keys, const std::string& fix) {
  Violation v{16, message, {}, fix};
  for (const auto& key : keys) v.values.push_back({key, format_value(c_, key)});
  out_.push_back(std::move(v));
}

void ShapeChecker::note(const std::string& message, const std::vector<std::string>& keys) {
  Note n{16, message, {}};
  for (const auto& key : keys) n.values.push_back({key, format_value(c_, key)});
  notes_.push_back(std::move(n));
}

bool ShapeChecker::in_range(const std::string& key, int64_t value, int64_t min, int64_t max) {
  if (value >= min && value <= max) return true;
  const std::string range =
      max == std::numeric_limits<int64_t>::max()
          ? strprintf(">= %lld", static_cast<long long>(min))
          : strprintf("between %lld and %lld", static_cast<long long>(min), static_cast<long long>(max));
  fail(key + " must be " + range, {key}, "set " + key + " to a value " + range);
  return false;
}

bool ShapeChecker::size(const std::string& key, int64_t value, int64_t max) {
  return in_range(key, value, 1, max);
}

bool ShapeChecker::size(const std::string& key, const std::optional<int64_t>& value) {
  if (!value) {
    fail(key + " must be set", {key}, "set " + key + " to a positive integer");
    return false;
  }
  return size(key, *value);
}

void ShapeChecker::real(const std::string& key, double value, double min, bool min_inclusive, double max,
                        bool max_inclusive) {
  const bool ok = std::isfinite(value) && (min_inclusive ? value >= min : value > min) &&
                  (max_inclusive ? value <= max : value < max);
  if (ok) return;
  const std::string range =
      strprintf("%s%g, %s%s", min_inclusive ? "[" : "(", min, std::isinf(max) ? "inf" : strprintf("%g", max).c_str(),
                max_inclusive ? "]" : ")");
  fail(key + " must be a finite number in " + range, {key}, "set " + key + " within " + range);
}

void ShapeChecker::positive(const std::string& key, double value) {
  real(key, value, 0.0, false, INFINITY, false);
}

void ShapeChecker::non_negative(const std::string& key, double value) {
  real(key, value, 0.0, true, INFINITY, false);
}

bool ShapeChecker::one_of(const std::string& key, const std::string& value, const std::vector<std::string>& valid,
                          const std::vector<std::string>& megatron_only) {
  if (std::find(valid.begin(), valid.end(), value) != valid.end()) return true;
  const bool megatron = std::find(megatron_only.begin(), megatron_only.end(), value) != megatron_only.end();
  const std::string close = megatron ? "" : closest_match(value, valid);
  fail(megatron ? key + ": Megatron's '" + value + "' is not implemented in stepgraph"
                : "unknown " + key + " '" + value + "'",
       {key}, "use one of: " + join(valid, ", ") + (close.empty() ? "" : "; did you mean '" + close + "'?"));
  return false;
}

bool ShapeChecker::one_of(const KeyValues& values, const std::string& value) {
  return one_of(values.key, value, values.implemented, values.megatron_only);
}

void ShapeChecker::positive_range(const std::string& lo_key, double lo, const std::string& hi_key, double hi,
                                  const std::string& defaults) {
  positive("model." + lo_key, lo);
  positive("model." + hi_key, hi);
  if (lo > hi) {
    fail(lo_key + " must not exceed " + hi_key, {"model." + lo_key, "model." + hi_key},
         "set 0 < " + lo_key + " <= " + hi_key + " (" + defaults + ")");
  }
}

}  // namespace sg::config::detail
