#include "checkpoint/finite_check.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/strings.h"

namespace sg::checkpoint {

namespace {

float element(const TensorRef& t, int64_t i) {
  const auto* bytes = static_cast<const uint8_t*>(t.data);
  if (t.dtype == TensorDtype::BF16) {
    uint16_t h = 0;
    std::memcpy(&h, bytes + 2 * i, 2);
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float f = 0.0f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  float f = 0.0f;
  std::memcpy(&f, bytes + 4 * i, 4);
  return f;
}

}  // namespace

std::optional<NonFiniteValue> find_nonfinite(std::span<const TensorRef> tensors) {
  std::optional<NonFiniteValue> first;
  int64_t count = 0;
  for (const TensorRef& t : tensors) {
    if (t.dtype != TensorDtype::F32 && t.dtype != TensorDtype::BF16) continue;
    const int64_t n = num_elements(t.shape);
    for (int64_t i = 0; i < n; ++i) {
      const float v = element(t, i);
      if (std::isfinite(v)) continue;
      if (!first) first = NonFiniteValue{t.name, i, v, 0};
      ++count;
    }
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
