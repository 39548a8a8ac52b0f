#pragma once
// Host-side checks shared by launchers that read strided row views (the Mamba2 mixer's in_proj row
// [z | xBC | dt]) or write deterministic per-block partial sums into a planned scratch: each throws
// sg::Error naming the launcher, the value and the fix.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace sg::kernels::detail {

// The row stride of a view named `name` (the elements between consecutive tokens): 0 means packed and
// gives `width`; otherwise it must be >= width.
int64_t resolve_row_stride(const char* op, const char* name, int64_t stride, int64_t width);

// The 16-byte (8 x bf16) vector path applies: width and every stride a multiple of 8 and every pointer
// 16-byte aligned (null pointers are skipped).
bool bf16_vector_path_ok(int64_t width, std::initializer_list<int64_t> strides,
                         std::initializer_list<const void*> ptrs);

// The caller's fp32 scratch holds `need` bytes; `shape` describes the call ("T=4 H=8") and `planner` names
// the function that gives `need` ("mamba_dt_backward_scratch_bytes(T, H)").
void check_scratch(const char* op, const float* scratch, size_t have, size_t need, const std::string& shape,
                   const char* planner);

}  // namespace sg::kernels::detail
