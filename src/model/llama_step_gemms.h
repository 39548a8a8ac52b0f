#pragma once
// The GEMMs of one dense Llama layer (shared by every layer: same shapes), planned once in the step's
// Blas. Private to llama_step*.cpp.
#include <cstdint>

#include "kernels/gemm.h"
#include "model/llama_step.h"

namespace sg::model {

struct LlamaStep::Gemms {
  // Forward y[T, N] = x[T, K] W^T, named by weight: qkv [QKV, H], o_proj [H, H], gate_up [2F, H],
  // down [H, F].
  kernels::LinearForward qkv, o_proj, gate_up, down;
  // dx[T, K] = dy[T, N] W (overwrites dx).
  kernels::LinearBackwardInput qkv_dx, o_proj_dx, gate_up_dx, down_dx;
  // dW[N, K] += dy^T x (fp32 main_grad).
  kernels::LinearBackwardWeight qkv_dw, o_proj_dw, gate_up_dw, down_dw;

  Gemms(kernels::Blas& b, int64_t T, int64_t H, int64_t QKV, int64_t F)
      : qkv(b, T, H, QKV),
        o_proj(b, T, H, H),
        gate_up(b, T, H, 2 * F),
        down(b, T, F, H),
        qkv_dx(b, T, H, QKV),
        o_proj_dx(b, T, H, H),
        gate_up_dx(b, T, H, 2 * F),
        down_dx(b, T, F, H),
        qkv_dw(b, T, H, QKV),
        o_proj_dw(b, T, H, H),
        gate_up_dw(b, T, H, 2 * F),
        down_dw(b, T, F, H) {}
};

}  // namespace sg::model
