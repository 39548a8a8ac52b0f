#pragma once
// A contiguous range of elements of the model's flat parameter / gradient buffer (model/param_builder.h).
#include <cstdint>

namespace sg::dist {

struct FlatRange {
  int64_t begin = 0;
  int64_t size = 0;
  int64_t end() const { return begin + size; }
  bool operator==(const FlatRange&) const = default;
};

}  // namespace sg::dist
