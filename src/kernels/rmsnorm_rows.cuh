#pragma once
// Where row r of an rmsnorm operand starts (packed rows, kernels/rmsnorm.h): shared by the forward
// and backward kernel families, so both read the packed heads of qk_layernorm the same way.
#include "core/error.h"
#include "core/strings.h"
#include "kernels/common.cuh"
#include "kernels/rmsnorm.h"

namespace sg::kernels::rmsnorm_rows {
SG_EMULATED_NAMESPACE_BEGIN

// A checked packed-row layout with its stride resolved (contiguous rows: per_group 1, group_stride H).
struct Rows {
  int64_t per_group = 1, group_stride = 0;
};

SG_HOST_DEVICE int64_t row_start(const Rows& rows, int64_t row, int64_t H) {
  if (rows.per_group == 1) return row * rows.group_stride;
  const int64_t group = row / rows.per_group;
  return group * rows.group_stride + (row - group * rows.per_group) * H;
}

inline Rows resolve(const char* op, int64_t per_group, int64_t group_stride, int64_t T, int64_t H) {
  SG_CHECK(per_group >= 1 && T % per_group == 0,
           strprintf("%s: T = %lld rows are not whole groups of rows_per_group = %lld", op, static_cast<long long>(T),
                     static_cast<long long>(per_group)));
  const int64_t packed = per_group * H;
  const int64_t stride = group_stride == 0 ? packed : group_stride;
  SG_CHECK(stride >= packed, strprintf("%s: group_stride = %lld is less than rows_per_group x H = %lld: the rows "
                                       "of one group would overlap the next",
                                       op, static_cast<long long>(stride), static_cast<long long>(packed)));
  return {.per_group = per_group, .group_stride = stride};
}

SG_EMULATED_NAMESPACE_END
}  // namespace sg::kernels::rmsnorm_rows
