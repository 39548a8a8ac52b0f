#pragma once
// The elementwise helpers of the MoE router's fp32 gating linear (Megatron's moe_router_dtype fp32):
// its GEMMs run through cuBLASLt (kernels/gemm.h) with fp32 operands, which need fp32 copies of the
// bf16 input and weight, and its input gradient (fp32) is added into the layer's bf16 input gradient.
// CPU twin: reference/moe_gating.h.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/bf16.h"

namespace sg::kernels {

struct MoeGatingWidenParams {
  float* out = nullptr;      // [n] OVERWRITTEN: exactly the bf16 values
  const bf16* in = nullptr;  // [n]
  int64_t n = 0;
};
void moe_gating_widen(cudaStream_t stream, const MoeGatingWidenParams& p);

struct MoeGatingAddGradParams {
  bf16* dx = nullptr;          // [n] dx = bf16(float(dx) + add), round to nearest even
  const float* add = nullptr;  // [n]
  int64_t n = 0;
};
void moe_gating_add_grad(cudaStream_t stream, const MoeGatingAddGradParams& p);

}  // namespace sg::kernels
