#pragma once
// Where the MLP uses a GEMM with SwiGLU in its epilogue (kernels/swiglu_backward_gemm.h) instead of a cuBLASLt
// GEMM and a separate SwiGLU pass, and the environment variable that overrides it (read at each plan, so tests
// can switch it): unset or 1 = where it pays (below), 0 = never, always = wherever the kernel supports the shape.
// Any other value is an error naming the variable. Apart from the kernel so that it is tested on any machine.
//
// Where it pays, measured on the H200 (docs/performance.md): sm_90, H <= 1024 and at least one wave of 128x128
// output tiles (T/128 x F/128 >= the SM count). The fusion saves a pass whose cost grows with T x F; the
// CUTLASS tile costs a share of a GEMM that grows with T x F x H (at H = 2048 more than the pass); below one wave
// the persistent kernel's setup is not paid back.
#include <cstdint>
#include <string>

namespace sg::kernels {

inline constexpr const char* kSwiGluBackwardGemmVariable = "STEPGRAPH_SWIGLU_BACKWARD_GEMM";

// The kernel's shape limits: T, H, F > 0, H and F multiples of 8 (16-byte TMA rows), sizes within int.
bool swiglu_gemm_shape_supported(int64_t T, int64_t H, int64_t F);

// "SwiGLU backward GEMM (T=.., H=.., F=..)": the kernel's name in errors.
std::string swiglu_gemm_describe(int64_t T, int64_t H, int64_t F);

// Plan-time checks of the fused kernel, named `what` in errors: the shape is supported and the device is sm_90
// (the kernel is built for sm_90a only). Throws sg::Error naming both; returns the device's SM count.
int swiglu_gemm_check_plan(const std::string& what, int64_t T, int64_t H, int64_t F);

// True when the fused kernel serves shape (T, H, F) on the current device: the rule above, as overridden by
// kSwiGluBackwardGemmVariable.
bool swiglu_backward_gemm_preferred(int64_t T, int64_t H, int64_t F);

}  // namespace sg::kernels
