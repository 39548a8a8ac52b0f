#pragma once
// The Mixture-of-Experts options of a model (Megatron's moe_* keys, config/model_config.cpp fills
// them): routing, load balancing, token drop and the shared expert. The expert count, top-k and expert
// width are ModelSpec's num_moe_experts / moe_router_topk / moe_ffn_hidden_size.
#include <cstdint>
#include <vector>

#include "reference/moe_permute.h"
#include "reference/moe_router.h"

namespace sg::model {

enum class MoeLoadBalancing : uint8_t { aux_loss, seq_aux_loss, none };  // moe_router_load_balancing_type

struct MoeSpec {
  ref::MoeScoreFunction score_function = ref::MoeScoreFunction::softmax;  // moe_router_score_function
  bool pre_softmax = false;                                              // moe_router_pre_softmax
  double topk_scaling_factor = 1.0;  // moe_router_topk_scaling_factor (null: 1)
  MoeLoadBalancing load_balancing = MoeLoadBalancing::aux_loss;
  double aux_loss_coeff = 0.0;  // moe_aux_loss_coeff (0: no aux loss)
  double z_loss_coeff = 0.0;    // moe_z_loss_coeff (0: no z-loss)
  // Aux-loss-free balancing: a per-expert bias added to the sigmoid (sqrtsoftplus) scores for the selection only,
  // updated after every step from the step's token counts (moe_router_enable_expert_bias).
  bool enable_expert_bias = false;
  double bias_update_rate = 1e-3;  // moe_router_bias_update_rate
  double capacity_factor = 0.0;    // moe_expert_capacity_factor; 0: token-dropless
  bool pad_to_capacity = false;    // moe_pad_expert_input_to_capacity
  ref::MoeDropPolicy drop_policy = ref::MoeDropPolicy::probs;  // moe_token_drop_policy
  int64_t shared_expert_intermediate_size = 0;  // moe_shared_expert_intermediate_size; 0: none
  // moe_shared_expert_gate (Qwen2-MoE): the shared expert's output scaled by sigmoid(n . w) per token, w [1, H]
  // (shared_expert_gate.weight, decayed); only with a shared expert.
  bool shared_expert_gate = false;
  // GPT layout: which blocks have an MoE MLP (1) or a dense one (0), one entry per block (Megatron's
  // moe_layer_freq expanded); empty: every block.
  std::vector<int> layer_freq;

  bool dropless() const { return capacity_factor <= 0.0; }
  bool is_moe_block(int64_t block) const {
    return layer_freq.empty() || layer_freq[static_cast<size_t>(block)] != 0;
  }
};

}  // namespace sg::model
