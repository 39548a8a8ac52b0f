#pragma once
// CPU fp32 twin of src/kernels/moe_router: the top-k router of a Mixture-of-Experts layer, its
// load-balancing losses (Megatron's aux_loss / seq_aux_loss and z-loss) with their gradients, and the
// aux-loss-free expert-bias update. The formulas are Megatron-LM's `topk_routing_with_score_function`,
// `switch_load_balancing_loss_func`, `z_loss_func` and `get_updated_expert_bias`.
//
// Layout: T tokens (micro batch x sequence, batch-major: token t belongs to sequence t / seq_length),
// E experts, k = topk. logits [T, E]; routing_map [T, k] holds the chosen experts of each token in
// selection order (best first); probs [T, k] the matching routing weights.
#include <cstdint>

namespace sg::ref {

// softmax over the experts, or an elementwise score: sigmoid(x), or sqrtsoftplus sqrt(softplus(x)) (DeepSeek-V4's,
// softplus(x) = log(1 + e^x), x itself above 20 as torch's threshold has it).
enum class MoeScoreFunction { softmax, sigmoid, sqrtsoftplus };
const char* moe_score_function_name(MoeScoreFunction f);  // "softmax", "sigmoid", "sqrtsoftplus"
// sigmoid and sqrtsoftplus: a score per expert from its own logit (Megatron treats both alike).
constexpr bool moe_elementwise_scores(MoeScoreFunction f) {
  return f != MoeScoreFunction::softmax;
}

// The plan-time description of one router (Megatron's key in the comments).
struct MoeRouting {
  int64_t T = 0;  // tokens of one microbatch
  int64_t E = 0;  // num_moe_experts, at most kMoeMaxExperts
  int64_t k = 1;  // moe_router_topk, 1 <= k <= E
  MoeScoreFunction score_function = MoeScoreFunction::softmax;  // moe_router_score_function
  bool pre_softmax = false;     // moe_router_pre_softmax (softmax only)
  float scaling_factor = 1.0f;  // moe_router_topk_scaling_factor (1 when unset)
};
inline constexpr int64_t kMoeMaxExperts = 1024;

// The router's losses (plan-time). A coefficient of 0 turns a loss off.
struct MoeRouterLosses {
  float aux_coeff = 0.0f;  // moe_aux_loss_coeff
  // Tokens per load-balancing group: T for aux_loss (the whole microbatch), seq_length for
  // seq_aux_loss (one group per sequence). Must divide T. 0 means T.
  int64_t aux_group_tokens = 0;
  float z_coeff = 0.0f;  // moe_z_loss_coeff
  constexpr int64_t groups(int64_t T) const { return aux_group_tokens > 0 ? T / aux_group_tokens : 1; }
  constexpr int64_t group_tokens(int64_t T) const { return aux_group_tokens > 0 ? aux_group_tokens : T; }
};

// Throws sg::Error naming the bad field and its value (op names the caller).
void check_moe_routing(const MoeRouting& r, const char* op);
void check_moe_router_losses(const MoeRouterLosses& l, int64_t T, const char* op);

// ---- Forward: scores, top-k, probs --------------------------------------------------------------
// Selection (ties go to the lower expert index, so it is deterministic):
//   no expert bias: the top-k logits (every score function is monotone, so this is the top-k of the
//                   scores Megatron selects on, without the ties that saturated scores would create);
//   expert bias:    the top-k of score(logit) + bias (sigmoid and sqrtsoftplus only, as Megatron; the bias
//                   steers the choice, never the probs).
// Probs (times scaling_factor):
//   softmax, post:  softmax over the k chosen logits;
//   softmax, pre:   softmax over all E logits, taken at the chosen experts (not renormalised);
//   sigmoid, sqrtsoftplus: score(logit) of the chosen experts, divided by their sum (+1e-20) when k > 1.
// expert_bias [E] or nullptr.
void moe_router_forward(int32_t* routing_map, float* probs, const float* logits, const float* expert_bias,
                        const MoeRouting& r);
template <class Real>
void moe_router_forward_generic(int32_t* routing_map, Real* probs, const Real* logits, const Real* expert_bias,
                                const MoeRouting& r);

// dlogits [T, E] OVERWRITTEN with d(sum dprobs . probs)/dlogits for the given routing_map.
void moe_router_backward(float* dlogits, const float* dprobs, const float* logits, const int32_t* routing_map,
                         const MoeRouting& r);
template <class Real>
void moe_router_backward_generic(Real* dlogits, const Real* dprobs, const Real* logits, const int32_t* routing_map,
                                 const MoeRouting& r);

// counts [T / group_tokens, E] OVERWRITTEN: how many (token, slot) pairs of each group of group_tokens
// consecutive tokens chose each expert (group_tokens = T: one row, the per-expert token counts).
void moe_count_experts(int32_t* counts, const int32_t* routing_map, int64_t T, int64_t k, int64_t E,
                       int64_t group_tokens);

// ---- Load-balancing loss (switch / per sequence) ------------------------------------------------
// Scores over all E experts: softmax(logits), or score(logits) / (sum + 1e-20) (sigmoid, sqrtsoftplus). With G
// groups of S = group_tokens tokens, counts [G, E] from moe_count_experts over the unbiased routing (held
// constant, as in Megatron):
//   loss = aux_coeff / G * sum_g E / (k S^2) * sum_e counts[g, e] * sum_{t in g} score[t, e]
// G = 1 is Megatron's aux_loss, G = sequences its seq_aux_loss (the mean of per-sequence losses).
// Returns the coefficient-scaled loss (fp64 sums).
template <class Real>
double moe_aux_loss(const Real* logits, const int32_t* counts, const MoeRouting& r, const MoeRouterLosses& l);
// dlogits [T, E] += grad_scale * d(loss)/dlogits.
template <class Real>
void moe_aux_loss_backward(Real* dlogits, const Real* logits, const int32_t* counts, const MoeRouting& r,
                           const MoeRouterLosses& l, double grad_scale);

// ---- z-loss -------------------------------------------------------------------------------------
// loss = z_coeff * mean_t logsumexp(logits_t)^2 (coefficient-scaled, fp64 sums).
template <class Real>
double moe_z_loss(const Real* logits, const MoeRouting& r, const MoeRouterLosses& l);
// dlogits [T, E] += grad_scale * d(loss)/dlogits = grad_scale * z_coeff * 2 lse_t softmax(logits_t) / T.
template <class Real>
void moe_z_loss_backward(Real* dlogits, const Real* logits, const MoeRouting& r, const MoeRouterLosses& l,
                         double grad_scale);

// ---- Aux-loss-free balancing ----------------------------------------------------------------------
// After the step: bias[e] += rate * sign(mean(counts) - counts[e]) (Megatron's get_updated_expert_bias,
// compared in exact integers), then step_counts is zeroed for the next step.
void moe_expert_bias_update(float* expert_bias, int32_t* step_counts, int64_t E, float rate);

}  // namespace sg::ref
