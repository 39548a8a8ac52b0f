#pragma once
// A decoding layer's linear, y = x W^T (+ bias: add_qkv_bias, add_bias_linear), and optionally the MLP
// activation after it (model/mlp_activation.h).
// A decoding step's rows (up to kDecodeGemvMaxRows, or 8 under tensor_cores: model/decode_gemv.h) go through
// kernels/decode_linear.h's matrix-vector kernel, the activation fused into it; more rows (a prompt's prefill), or a
// shape the kernel does not take (K not a multiple of 8), through cuBLASLt's GEMM and then the activation kernel.
// The paths agree within bf16 rounding, not bitwise: they sum in other orders.
#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

#include "cuda/bf16.h"
#include "kernels/decode_linear.h"
#include "kernels/gemm.h"
#include "model/decode_gemv.h"
#include "model/spec.h"

namespace sg::model {

class DecodeLinear {
 public:
  DecodeLinear() = default;
  // W is [N, K]; with an activation, N = activation_input_width(activation, F) and y has F columns. `gemv`: the
  // decoder's DecodeSpec::gemv (none: the process's STEPGRAPH_DECODE_GEMV). `with_bias`: every call passes a bias [N]
  // (the kernel adds it before rounding, cuBLASLt in its bias epilogue).
  DecodeLinear(int64_t K, int64_t N, std::optional<MlpActivation> activation = std::nullopt,
               std::optional<DecodeGemv> gemv = std::nullopt, bool with_bias = false);

  int64_t weight_rows() const { return N_; }
  int64_t out_width() const { return out_width_; }
  // Whether T rows run cuBLASLt and, with an activation, need run()'s pre_activation buffer.
  bool runs_gemm(int64_t T) const;
  // Plans cuBLASLt's GEMM for T rows where run() will use it, so that a captured step plans nothing.
  void prepare(kernels::Blas& blas, int64_t T) const;
  // The kernel's parameters for T rows where !runs_gemm(T): the shape, the activation's epilogue and the math. The
  // attention layer sets its QKV epilogue on them.
  kernels::DecodeLinearParams kernel_params(int64_t T, bf16* y, const bf16* x, const bf16* w,
                                            const bf16* bias = nullptr) const;
  // y [T, out_width()], x [T, K], w [N, K]; pre_activation [T, N] where runs_gemm(T) with an activation; bias [N]
  // exactly when constructed with_bias (sg::Error otherwise).
  void run(cudaStream_t stream, kernels::Blas& blas, int64_t T, bf16* y, const bf16* x, const bf16* w,
           bf16* pre_activation = nullptr, const bf16* bias = nullptr) const;

 private:
  int64_t K_ = 0, N_ = 0, out_width_ = 0;
  std::optional<MlpActivation> activation_;
  DecodeGemv gemv_ = DecodeGemv::tensor_cores;
  bool with_bias_ = false;
  void check_bias(const bf16* bias) const;
};

}  // namespace sg::model
