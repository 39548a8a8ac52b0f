#pragma once
// CPU twin of src/kernels/moe_shared_gate (Megatron's moe_shared_expert_gate, Qwen2-MoE's shared_expert_gate): the
// sigmoid gate g[t] = sigmoid(input[t] . weight) that scales a MoE layer's shared expert output before it joins the
// layer's output, and its whole backward (the GPU side's weight gradient is kernels/column_sums with row_scale).
// fp32 in and out, sums and products in double, each result rounded to float once.
#include <cstdint>

namespace sg::ref {

// out [T, H] ADDED into: out[t] += g[t] shared[t]; gate [T] OVERWRITTEN: g[t] = sigmoid(input[t] . weight).
// weight [H]. T may be 0.
void moe_shared_gate_forward(float* out, float* gate, const float* shared, const float* input, const float* weight,
                             int64_t T, int64_t H);

// With g = gate (from the forward) and d_logit[t] = (dy[t] . shared[t]) g[t] (1 - g[t]):
//   d_shared [T, H] OVERWRITTEN: g[t] dy[t];   d_logit [T] OVERWRITTEN;
//   d_input [T, H] ADDED into: d_input[t] += d_logit[t] weight;   d_weight [H] ADDED into: += sum_t d_logit[t] input[t]
// d_input and d_weight use the unrounded d_logit. T may be 0 (d_input and d_weight keep their values).
void moe_shared_gate_backward(float* d_shared, float* d_logit, float* d_input, float* d_weight, const float* dy,
                              const float* shared, const float* input, const float* weight, const float* gate,
                              int64_t T, int64_t H);

}  // namespace sg::ref
