#pragma once
// The top-k router of a Mixture-of-Experts layer, in fp32, on the device; its load-balancing losses
// (aux_loss / seq_aux_loss, z-loss) and their gradients; the aux-loss-free expert-bias update.
// Formulas, selection rule and layout: reference/moe_router.h (the CPU twin). The gating GEMM that makes
// the fp32 logits is a plain linear done by the layer.
//
// All sizes are plan-time constants; per-step data (maps, counts, losses) stay in device memory. No
// float atomics: the cross-token sums (counts, loss partials) are integer atomics or fixed-order
// reductions, so every launch is bitwise reproducible.
//
// One microbatch, forward (moe_router region):
//   1. moe_router_forward       logits -> routing_map [T, k], probs [T, k] (+ aux_routing_map)
//   2. moe_count_experts        routing_map -> expert_counts [E] (group_tokens = T; logged; the
//                               dispatch reads it); for the aux loss, the counts of the unbiased
//                               routing per group [G, E] (same buffer when no bias and G = 1)
//   3. moe_router_loss_forward  aux / z-loss values += into device scalars (when a coefficient is > 0)
// Backward:
//   4. moe_router_backward      dprobs (from moe_combine_backward) + the loss gradients -> dlogits [T, E]
// After the step's optimizer update (expert bias on):
//   5. moe_expert_bias_update   from the step's kept counts (moe_preprocess accumulates them)
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "reference/moe_router.h"

namespace sg::kernels {

using ref::MoeRouterLosses;
using ref::MoeRouting;
using ref::MoeScoreFunction;

struct MoeRouterForwardParams {
  const float* logits = nullptr;       // [T, E]
  const float* expert_bias = nullptr;  // [E] or null (sigmoid, sqrtsoftplus): added to the scores for selection
  int32_t* routing_map = nullptr;      // [T, k] OUT: expert ids, best first
  float* probs = nullptr;              // [T, k] OUT
  // [T, k] OUT, optional: the top-k without the bias, which the aux loss counts (Megatron routes with
  // the bias but balances the unbiased choice). Only meaningful with expert_bias; null otherwise.
  int32_t* aux_routing_map = nullptr;
  MoeRouting routing;
};
// One warp per token.
void moe_router_forward(cudaStream_t stream, const MoeRouterForwardParams& p);

struct MoeCountExpertsParams {
  const int32_t* routing_map = nullptr;  // [T, k]
  int32_t* counts = nullptr;             // [T / group_tokens, E] OVERWRITTEN
  int64_t T = 0, E = 0, k = 1;
  int64_t group_tokens = 0;  // tokens per group (0 = T: one row of per-expert counts)
};
// A memset, then shared-memory histograms added with integer atomics (exact in any order).
void moe_count_experts(cudaStream_t stream, const MoeCountExpertsParams& p);

// Scratch of moe_router_loss_forward (fixed-order partial sums), for the plan's workspaces.
size_t moe_router_loss_workspace_bytes(const MoeRouting& routing, const MoeRouterLosses& losses);

struct MoeRouterLossParams {
  const float* logits = nullptr;        // [T, E]
  const int32_t* aux_counts = nullptr;  // [G, E] counts of the unbiased routing (needed when aux_coeff > 0)
  MoeRouting routing;
  MoeRouterLosses losses;
  void* workspace = nullptr;  // moe_router_loss_workspace_bytes
  // Device scalars: += value_scale * loss (coefficient included), one thread's read-modify-write.
  // Either may be null (that loss is not recorded); a loss whose coefficient is 0 adds nothing.
  float* aux_loss_sum = nullptr;
  float* z_loss_sum = nullptr;
  float value_scale = 1.0f;  // plan-time, e.g. 1 / num_microbatches for a per-step mean
};
// Two launches: per-chunk partial sums (grid), then one block that reduces them in a fixed order.
void moe_router_loss_forward(cudaStream_t stream, const MoeRouterLossParams& p);

struct MoeRouterBackwardParams {
  float* dlogits = nullptr;              // [T, E] OVERWRITTEN (fp32)
  const float* dprobs = nullptr;         // [T, k] (0 for dropped slots, as moe_combine_backward writes)
  const float* logits = nullptr;         // [T, E], the forward input
  const int32_t* routing_map = nullptr;  // [T, k] from moe_router_forward
  const int32_t* aux_counts = nullptr;   // [G, E] as in MoeRouterLossParams (when aux_coeff > 0)
  MoeRouting routing;
  MoeRouterLosses losses;  // their gradients are added when the coefficients are > 0
  // Scale of the loss gradients (Megatron's MoEAuxLossAutoScaler scale): 1 / num_microbatches when
  // the main loss is the microbatch mean. dprobs already carries the main loss's scale.
  float loss_grad_scale = 1.0f;
};
// One warp per token: dlogits = d(probs . dprobs) + loss_grad_scale * d(aux + z)/dlogits.
void moe_router_backward(cudaStream_t stream, const MoeRouterBackwardParams& p);

struct MoeExpertBiasUpdateParams {
  float* expert_bias = nullptr;   // [E] fp32: += rate * sign(mean(counts) - counts[e])
  int32_t* step_counts = nullptr; // [E] the step's kept counts; zeroed for the next step
  int64_t E = 0;
  float rate = 1e-3f;  // moe_router_bias_update_rate
};
// One block.
void moe_expert_bias_update(cudaStream_t stream, const MoeExpertBiasUpdateParams& p);

}  // namespace sg::kernels
