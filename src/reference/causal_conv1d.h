#pragma once
// CPU fp32 twin of src/kernels/causal_conv1d: the Mamba2 mixer's depthwise causal conv1d (width 4, with
// bias) followed by SiLU, over the xBC channels of the in_proj output:
//   pre[b, t, c] = bias[c] + sum_{k<4} weight[c, k] * in[b, t - 3 + k, c]   (in at t < 0 is 0)
//   out[b, t, c] = silu(pre[b, t, c])
// i.e. PyTorch's Conv1d(C, C, 4, groups=C, padding=3)[..., :S] (Megatron's conv1d_weight [C, 1, 4]).
// `in` is a strided view: row (b, t) starts at in + (b * S + t) * in_stride, so it can be the xBC slice
// of the [z | xBC | dt] in_proj row. out is contiguous [B, S, C].
#include <cstdint>

namespace sg::ref {

inline constexpr int64_t kCausalConv1dWidth = 4;

void causal_conv1d_silu_forward(float* out, const float* in, int64_t in_stride, const float* weight,
                                const float* bias, int64_t B, int64_t S, int64_t C);

// The conv continued over new rows of ONE sequence, as decoding runs it (a prompt, then one token at a
// time): state [C, 3] holds the sequence's last 3 inputs before in's first row (oldest first; zero at the
// sequence's start) and is left holding its last 3 inputs after in's last row. The same products and
// order as the forward, so a sequence in pieces gives the same out.
void causal_conv1d_silu_forward_continued(float* out, float* state, const float* in, int64_t in_stride,
                                          const float* weight, const float* bias, int64_t S, int64_t C);
// din (strided like in): the C columns of every row are OVERWRITTEN, nothing else is touched.
// dweight [C, 4] and dbias [C] are ADDED into.
void causal_conv1d_silu_backward(float* din, int64_t din_stride, float* dweight, float* dbias, const float* dout,
                                 const float* in, int64_t in_stride, const float* weight, const float* bias,
                                 int64_t B, int64_t S, int64_t C);

// Scalar-generic twins (float and double instantiated) for fp64 gradient checks.
template <class Real>
void causal_conv1d_silu_forward_generic(Real* out, const Real* in, int64_t in_stride, const Real* weight,
                                        const Real* bias, int64_t B, int64_t S, int64_t C);
template <class Real>
void causal_conv1d_silu_backward_generic(Real* din, int64_t din_stride, Real* dweight, Real* dbias,
                                         const Real* dout, const Real* in, int64_t in_stride, const Real* weight,
                                         const Real* bias, int64_t B, int64_t S, int64_t C);

}  // namespace sg::ref
