#pragma once
// CPU fp32 reference of the linear layer: the ground truth for kernels/gemm.h and the CPU
// backend. Row-major, PyTorch convention: the weight W is [N, K] = [out_features, in_features].
#include <cstdint>

namespace sg::ref {

// y[T, N] = x[T, K] W^T. Overwrites y.
void linear_forward(float* y, const float* x, const float* w, int64_t T, int64_t K, int64_t N);

// y[T, N] += bias[N] on every row: the bias of LinearForward's epilogue (kernels/gemm.h); a null bias adds nothing
// (a linear without one). Its gradient, the column sums of dy, is reference/column_sums.h's.
void add_row_bias(float* y, const float* bias, int64_t T, int64_t N);

// dx[T, K] = dy[T, N] W. Overwrites dx.
void linear_backward_input(float* dx, const float* dy, const float* w, int64_t T, int64_t K, int64_t N);

// dw[N, K] += dy[T, N]^T x[T, K]. ACCUMULATES into dw (main_grad convention: the step zeroes the
// fp32 gradient once, every microbatch adds).
void linear_backward_weight(float* dw, const float* dy, const float* x, int64_t T, int64_t K, int64_t N);

}  // namespace sg::ref
