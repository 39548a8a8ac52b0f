#pragma once
// The activation between an MLP's two linears, shared by the dense MLP and the MoE experts (routed and
// shared), on the GPU (kernels/) and in the CPU twins (reference/):
//   swiglu        in [T, 2F], each row [gate F | up F];  out [T, F] = silu(gate) * up   (Llama, Mixtral)
//   squared_relu  in [T, F];                             out [T, F] = relu(in)^2        (Nemotron-H)
// So the first linear writes activation_input_width(F) columns: 2F gated, F not.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/bf16.h"
#include "model/spec.h"

namespace sg::model {

int64_t activation_input_width(MlpActivation activation, int64_t F);

struct ActivationForwardParams {
  MlpActivation activation = MlpActivation::swiglu;
  bf16* out = nullptr;       // [T, F]
  const bf16* in = nullptr;  // [T, activation_input_width(F)]
  int64_t T = 0, F = 0;
};
void activation_forward(cudaStream_t stream, const ActivationForwardParams& p);

struct ActivationBackwardParams {
  MlpActivation activation = MlpActivation::swiglu;
  bf16* din = nullptr;         // [T, activation_input_width(F)], overwritten
  const bf16* dout = nullptr;  // [T, F]
  const bf16* in = nullptr;    // the forward's input
  int64_t T = 0, F = 0;
};
void activation_backward(cudaStream_t stream, const ActivationBackwardParams& p);

// The CPU twins (fp32), the same shapes.
struct CpuActivationForwardParams {
  MlpActivation activation = MlpActivation::swiglu;
  float* out = nullptr;
  const float* in = nullptr;
  int64_t T = 0, F = 0;
};
void activation_forward(const CpuActivationForwardParams& p);

struct CpuActivationBackwardParams {
  MlpActivation activation = MlpActivation::swiglu;
  float* din = nullptr;
  const float* dout = nullptr;
  const float* in = nullptr;
  int64_t T = 0, F = 0;
};
void activation_backward(const CpuActivationBackwardParams& p);

}  // namespace sg::model
