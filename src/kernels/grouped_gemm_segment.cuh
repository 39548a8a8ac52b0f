#pragma once
// Internal to kernels/grouped_gemm: expert g's row segment as every device kernel of the grouped GEMM
// reads it, so the setup kernel (which experts the GEMM computes) and the overwrite zero-fill blocks (which
// experts it does not) agree on which experts are empty.
#include <cstdint>

namespace sg::kernels::detail {

struct GroupSegment {
  int64_t first_row;
  int64_t rows;  // 0: the expert is empty
};

// [offsets[g], offsets[g] + counts[g]) clamped into [0, max_rows). A malformed segment (negative, or
// reaching past max_rows: an upstream bug the CPU twin throws on) is clamped, so a bad count can never
// make a kernel touch memory outside the operand buffers; an empty one starts at row 0.
__device__ __forceinline__ GroupSegment clamped_group_segment(const int32_t* counts, const int32_t* offsets, int g,
                                                              int64_t max_rows) {
  int64_t first = offsets[g];
  int64_t rows = counts[g];
  if (rows < 0 || first < 0 || first >= max_rows) rows = 0;
  if (rows > max_rows - first) rows = max_rows - first;
  if (rows == 0) first = 0;
  return {first, rows};
}

}  // namespace sg::kernels::detail
