#pragma once
// The MLP's down-projection input gradient with SwiGLU's backward in the GEMM's epilogue (CUTLASS, sm_90a):
//   dh = bf16(dy [T, H] W_down [H, F]);  d_gate_up = [dh up sig(g) (1 + g (1 - sig(g))) | dh g sig(g)]
// the arithmetic of kernels::LinearBackwardInput followed by kernels::swiglu_backward (the same bf16 rounding
// of dh, the same fp32 formula from kernels/silu.cuh), in one kernel: dh never reaches memory, and the
// separate SwiGLU pass (read dh and gate_up, write d_gate_up) is gone. CPU twin: ref::linear_backward_input,
// rounded to bf16, then ref::swiglu_backward.
//
// The kernel: warp-specialized cooperative GEMM, tile 128x128x64, cluster 2x1, and an epilogue visitor graph
// that loads g and u by TMA beside the accumulators, stores du as an auxiliary output and dg as D
// (swiglu_backward_gemm_sm90a.cu). The tile is 128x128, smaller than cuBLASLt's at large K, because the
// epilogue's g and u staging buffers take shared memory that a wider tile's mainloop stages would need.
//
// When it is used: kernels/swiglu_gemm_rule.h (STEPGRAPH_SWIGLU_BACKWARD_GEMM overrides it). Measured on the
// H200 (bench/swiglu_backward_gemm_bench.cu and stepgraph bench, ninth and tenth sessions): alone 1.23-1.25x
// the two kernels at T = 8192, H = 768, F = 2048 (llama/small) and 0.94x at H = 2048, F = 5632 (llama/1b). In
// the small step it saves about half of that: there the two-kernel path's SwiGLU pass reads dh from L2 and
// runs faster than alone.
// Runs compared bitwise must agree on the variable.
//
// Graph-safe: run() only launches (CUTLASS's parameters are rebuilt on the host when a pointer changes).
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "cuda/bf16.h"
#include "kernels/swiglu_gemm_rule.h"

namespace sg::kernels {

struct SwiGluBackwardGemmParams {
  bf16* d_gate_up = nullptr;      // [T, 2F], overwritten
  const bf16* dy = nullptr;       // [T, H], the down projection's output gradient
  const bf16* w_down = nullptr;   // [H, F]
  const bf16* gate_up = nullptr;  // [T, 2F], the forward's gate and up
};

class SwiGluBackwardGemm {
 public:
  // Plans shape (T, H, F); throws sg::Error unless the device is sm_90 and H, F are multiples of 8.
  SwiGluBackwardGemm(int64_t T, int64_t H, int64_t F);
  ~SwiGluBackwardGemm();
  SwiGluBackwardGemm(const SwiGluBackwardGemm&) = delete;
  SwiGluBackwardGemm& operator=(const SwiGluBackwardGemm&) = delete;

  void run(cudaStream_t stream, const SwiGluBackwardGemmParams& p);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sg::kernels
