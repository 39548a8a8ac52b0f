// The MLP activation's GPU dispatch (the CPU twin: mlp_activation_cpu.cpp).
#include "model/mlp_activation.h"

#include "kernels/squared_relu.h"
#include "kernels/swiglu.h"

namespace sg::model {

int64_t activation_input_width(MlpActivation activation, int64_t F) {
  return activation == MlpActivation::swiglu ? 2 * F : F;
}

void activation_forward(cudaStream_t stream, const ActivationForwardParams& p) {
  if (p.activation == MlpActivation::swiglu) {
    kernels::swiglu_forward(stream, {.out = p.out, .gate_up = p.in, .T = p.T, .F = p.F});
  } else {
    kernels::squared_relu_forward(stream, {.out = p.out, .in = p.in, .T = p.T, .F = p.F});
  }
}

void activation_backward(cudaStream_t stream, const ActivationBackwardParams& p) {
  if (p.activation == MlpActivation::swiglu) {
    kernels::swiglu_backward(stream, {.dgate_up = p.din, .dout = p.dout, .gate_up = p.in, .T = p.T, .F = p.F});
  } else {
    kernels::squared_relu_backward(stream, {.din = p.din, .dout = p.dout, .in = p.in, .T = p.T, .F = p.F});
  }
}

}  // namespace sg::model
