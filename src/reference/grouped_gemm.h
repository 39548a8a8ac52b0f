#pragma once
// CPU fp32 twin of kernels/grouped_gemm.h and kernels/grouped_linear_bias.h: the MoE expert linears (and their
// per-expert biases) on a permuted row buffer. Expert g owns
// rows [offsets[g], offsets[g] + counts[g]) of x/y/dx/dy (row-major, total_rows rows); its weight is the
// [N, K] matrix at w + g * N * K (PyTorch Linear [out, in]). Rows outside every segment are not touched;
// an expert with no rows writes no y/dx rows, and its dW is left bit-for-bit unchanged when accumulating
// and set to zero when overwriting (it contributes nothing). Segments must lie inside
// [0, total_rows) (sg::Error otherwise); they may leave gaps but must not overlap for the outputs to be
// well defined.
#include <cstdint>

namespace sg::ref {

struct GroupedRows {
  const int32_t* counts = nullptr;   // [num_groups]
  const int32_t* offsets = nullptr;  // [num_groups]
  int num_groups = 0;
  int64_t total_rows = 0;
};

// y_g[m_g, N] = x_g[m_g, K] W_g^T. Overwrites the segments' rows of y.
void grouped_linear_forward(float* y, const float* x, const float* w, const GroupedRows& rows, int64_t N, int64_t K);

// dx_g[m_g, K] = dy_g[m_g, N] W_g. Overwrites the segments' rows of dx.
void grouped_linear_backward_input(float* dx, const float* dy, const float* w, const GroupedRows& rows, int64_t N,
                                   int64_t K);

// accumulate: dW_g[N, K] += dy_g^T x_g into dw [num_groups, N, K] (the fp32 main_grad convention).
// !accumulate: dW_g = dy_g^T x_g for every expert, zero for those without rows (dw's old values unread).
void grouped_linear_backward_weight(float* dw, const float* dy, const float* x, const GroupedRows& rows, int64_t N,
                                    int64_t K, bool accumulate = true);

// y_g[m_g, N] += b_g[N] (bias [num_groups, N]): the fp32 sum the kernel rounds to bf16 once.
void grouped_bias_forward(float* y, const float* bias, const GroupedRows& rows, int64_t N);

// dbias_g[N] += the column sums of dy_g[m_g, N] (double, rounded to float once, reference/column_sums); an expert
// without rows keeps its dbias row.
void grouped_bias_backward(float* dbias, const float* dy, const GroupedRows& rows, int64_t N);

}  // namespace sg::ref
