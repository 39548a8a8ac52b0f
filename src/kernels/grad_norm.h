#pragma once
// Global gradient norm, clip coefficient and non-finite flags, all on the device (no host sync).
// CPU twin: reference/grad_norm.h.
//
// Deterministic two-stage sum of squares in fp64: stage 1 has a FIXED grid of kGradNormPartials blocks
// (independent of n and of the GPU), each writing one fp64 partial; stage 2 is one block reducing the
// partials in a fixed order and writing norm, clip coefficient and the flag. Written by hand rather than
// with cub::DeviceReduce so the partition (and thus the bits) does not depend on the SM count, and so
// sqrt/clip/flag fuse into the final stage.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace sg::kernels {

inline constexpr int kGradNormPartials = 1024;
// Scratch the model reserves (workspaces category) for GradNormParams::partials.
inline constexpr size_t kGradNormScratchBytes = kGradNormPartials * sizeof(double);

struct GradNormParams {
  const float* grads = nullptr;  // [n] the flat fp32 main_grad
  int64_t n = 0;
  double* partials = nullptr;        // scratch [kGradNormPartials] (kGradNormScratchBytes)
  float* norm = nullptr;             // device scalar OUT: sqrt(sum g^2), rounded to fp32
  float* clip_coefficient = nullptr; // device scalar OUT: as ref::clip_coefficient(norm, max_norm)
  int* nonfinite_flag = nullptr;     // device int: set to 1 when the norm is NaN/inf; never cleared here
                                     // (sticky: whoever reads it, ddp.check_for_nan_in_grad, resets it)
  float max_norm = 0.0f;             // plan-time clip_grad; <= 0 turns clipping off (coefficient 1)
};
void grad_global_norm(cudaStream_t stream, const GradNormParams& p);
// The two stages apart, for a norm over several ranks' shards: stage 1 writes this rank's partials, the
// caller sums them over ranks in place (dist/gradient_reducer.h), stage 2 finishes from the sums.
// grad_global_norm(p) == grad_norm_partials(p) then grad_norm_finalize(p).
void grad_norm_partials(cudaStream_t stream, const GradNormParams& p);
void grad_norm_finalize(cudaStream_t stream, const GradNormParams& p);

struct NonfiniteCheckParams {
  const float* values = nullptr;  // [n], e.g. the step loss (n = 1) for check_for_nan_in_loss
  int64_t n = 0;
  int* flag = nullptr;  // device int: set to 1 if any value is NaN/inf; never cleared here (sticky)
};
void flag_if_nonfinite(cudaStream_t stream, const NonfiniteCheckParams& p);

}  // namespace sg::kernels
