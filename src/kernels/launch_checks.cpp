#include "kernels/launch_checks.h"

#include "core/error.h"
#include "core/strings.h"

namespace sg::kernels::detail {

int64_t resolve_row_stride(const char* op, const char* name, int64_t stride, int64_t width) {
  if (stride == 0) return width;
  SG_CHECK(stride >= width, strprintf("%s: %s = %lld is smaller than the view's %lld columns (the elements "
                                      "between consecutive tokens: 0 for packed rows, else >= the width)",
                                      op, name, static_cast<long long>(stride), static_cast<long long>(width)));
  return stride;
}

bool bf16_vector_path_ok(int64_t width, std::initializer_list<int64_t> strides,
                         std::initializer_list<const void*> ptrs) {
  constexpr int64_t kVec = 8;
  if (width % kVec != 0) return false;
  for (int64_t s : strides) {
    if (s % kVec != 0) return false;
  }
  for (const void* q : ptrs) {
    if (q != nullptr && reinterpret_cast<uintptr_t>(q) % 16 != 0) return false;
  }
  return true;
}

void check_scratch(const char* op, const float* scratch, size_t have, size_t need, const std::string& shape,
                   const char* planner) {
  SG_CHECK(scratch != nullptr && have >= need,
           strprintf("%s: scratch of %zu bytes at %p is too small for %s; plan %s = %zu bytes", op, have,
                     static_cast<const void*>(scratch), shape.c_str(), planner, need));
}

}  // namespace sg::kernels::detail
