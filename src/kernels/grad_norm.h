#pragma once
// Global gradient norm, stage 1: this rank's sums of squares, on the device (no host sync).
// CPU twin: reference/grad_norm.h.
//
// Deterministic two-stage sum of squares in fp64: stage 1 (here) has a FIXED grid of kGradNormPartials
// blocks (independent of n and of the GPU), each writing one fp64 partial; stage 2 is one block adding
// the partials in a fixed order, fused with the optimizer's other per-step scalars
// (kernels/optimizer_step_scalars.h: norm, clip coefficient, non-finite flag). Written by hand rather
// than with cub::DeviceReduce so the partition (and thus the bits) does not depend on the SM count.
// With data parallelism the caller sums the partials over ranks in place between the two stages
// (dist/gradient_reducer.h).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/float_buffer.h"

namespace sg::kernels {

inline constexpr int kGradNormPartials = 1024;
// Scratch the model reserves (workspaces category) for GradNormPartialsParams::partials.
inline constexpr size_t kGradNormScratchBytes = kGradNormPartials * sizeof(double);

struct GradNormPartialsParams {
  FloatBuffer grads;  // [n] the flat main_grad, fp32 or bf16 (summed in fp64 either way)
  int64_t n = 0;
  double* partials = nullptr;  // OUT [kGradNormPartials] (kGradNormScratchBytes): block b's sum of g^2
};
// Block b sums g^2 over the fixed strided subset {b * 256 + tid + k * 1024 * 256}.
void grad_norm_partials(cudaStream_t stream, const GradNormPartialsParams& p);

}  // namespace sg::kernels
