// The MLP activation's CPU fp32 twin (the GPU dispatch: mlp_activation.cpp).
#include "model/mlp_activation.h"
#include "reference/squared_relu.h"
#include "reference/swiglu.h"

namespace sg::model {

void activation_forward(const CpuActivationForwardParams& p) {
  if (p.activation == MlpActivation::swiglu) {
    ref::swiglu_forward(p.out, p.in, p.T, p.F);
  } else {
    ref::squared_relu_forward(p.out, p.in, p.T, p.F);
  }
}

void activation_backward(const CpuActivationBackwardParams& p) {
  if (p.activation == MlpActivation::swiglu) {
    ref::swiglu_backward(p.din, p.dout, p.in, p.T, p.F);
  } else {
    ref::squared_relu_backward(p.din, p.dout, p.in, p.T, p.F);
  }
}

}  // namespace sg::model
