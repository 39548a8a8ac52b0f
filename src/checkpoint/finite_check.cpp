#include "checkpoint/finite_check.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/strings.h"

namespace sg::checkpoint {

namespace {

// Calls on_bad(i, value) for each non-finite element; one loop per dtype (the scan reads whole checkpoints).
template <class OnBad>
void scan(const TensorRef& t, OnBad&& on_bad) {
  const int64_t n = num_elements(t.shape);
  const auto* bytes = static_cast<const uint8_t*>(t.data);
  if (t.dtype == TensorDtype::F32) {
    for (int64_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, bytes + 4 * i, 4);
      if (!std::isfinite(v)) on_bad(i, v);
    }
    return;
  }
  // BF16 and F16 alike: non-finite exactly when the exponent bits are all ones.
  const uint16_t exponent = t.dtype == TensorDtype::BF16 ? 0x7f80 : 0x7c00;
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, bytes + 2 * i, 2);
    if ((h & exponent) == exponent) on_bad(i, float_element(t.dtype, t.data, i));
  }
}

}  // namespace

std::optional<NonFiniteValue> find_nonfinite(std::span<const TensorRef> tensors) {
  std::optional<NonFiniteValue> first;
  int64_t count = 0;
  for (const TensorRef& t : tensors) {
    if (!is_floating(t.dtype)) continue;
    scan(t, [&](int64_t i, float v) {
      if (!first) first = NonFiniteValue{t.name, i, v, 0};
      ++count;
    });
  }
  if (first) first->count = count;
  return first;
}

std::optional<NonFiniteValue> find_nonfinite(const SafetensorsFile& file) {
  std::vector<TensorRef> refs;
  for (const auto& e : file.tensors()) refs.push_back({e.name, e.dtype, e.shape, e.data});
  return find_nonfinite(refs);
}

std::string describe(const NonFiniteValue& v) {
  return strprintf("tensor %s element %lld is %s (%lld non-finite value%s in all)", v.tensor.c_str(),
                   static_cast<long long>(v.index),
                   std::isnan(v.value) ? "nan" : (v.value > 0 ? "inf" : "-inf"),
                   static_cast<long long>(v.count), v.count == 1 ? "" : "s");
}

}  // namespace sg::checkpoint
