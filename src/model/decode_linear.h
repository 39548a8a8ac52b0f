#pragma once
// A decoding layer's linear, y = x W^T, and optionally the MLP activation after it (model/mlp_activation.h).
// A decoding step's rows (up to kDecodeGemvMaxRows) go through kernels/decode_linear.h's
// matrix-vector kernel, the activation fused into it; more rows (a prompt's prefill), or a shape the kernel does
// not take (K not a multiple of 8), through cuBLASLt's GEMM and then the activation kernel. The two paths agree
// within bf16 rounding, not bitwise: they sum in other orders.
//
// STEPGRAPH_DECODE_GEMV, read once per process: 1 (the default) as above, or 0 (cuBLASLt and the activation
// kernel for every call: the A/B of docs/performance.md); any other value stops the run naming the variable.
#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

#include "cuda/bf16.h"
#include "kernels/gemm.h"
#include "model/spec.h"

namespace sg::model {

inline constexpr const char* kDecodeGemvVariable = "STEPGRAPH_DECODE_GEMV";
// The most rows the decoder gives the matrix-vector kernel (it takes kernels::kDecodeLinearMaxRows). At 8 rows its
// fp32 multiply-adds (8 x 2 x 8 for each pair of 16-byte weight chunks) keep the SMs issuing, and cuBLASLt's
// tensor-core GEMM was faster on the larger layers (docs/performance.md, thirty-sixth session).
inline constexpr int64_t kDecodeGemvMaxRows = 4;
// The variable's value (null: unset) as the switch; throws sg::Error naming the variable for any other value.
bool decode_gemv_setting(const char* value);
bool decode_gemv_enabled();  // the process's setting, read once

class DecodeLinear {
 public:
  DecodeLinear() = default;
  // W is [N, K]; with an activation, N = activation_input_width(activation, F) and y has F columns.
  DecodeLinear(int64_t K, int64_t N, std::optional<MlpActivation> activation = std::nullopt);

  int64_t weight_rows() const { return N_; }
  int64_t out_width() const { return out_width_; }
  // Whether T rows run cuBLASLt and, with an activation, need run()'s pre_activation buffer.
  bool runs_gemm(int64_t T) const;
  // Plans cuBLASLt's GEMM for T rows where run() will use it, so that a captured step plans nothing.
  void prepare(kernels::Blas& blas, int64_t T) const;
  // y [T, out_width()], x [T, K], w [N, K]; pre_activation [T, N] where runs_gemm(T) with an activation.
  void run(cudaStream_t stream, kernels::Blas& blas, int64_t T, bf16* y, const bf16* x, const bf16* w,
           bf16* pre_activation = nullptr) const;

 private:
  int64_t K_ = 0, N_ = 0, out_width_ = 0;
  std::optional<MlpActivation> activation_;
};

}  // namespace sg::model
