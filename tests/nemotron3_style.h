#pragma once
// hybrid/tiny_hybrid in Nemotron 3's style: 8 layers MEM*EMEM (Mamba, MoE, one attention layer without
// RoPE), squared-ReLU experts (8 of width 128, top-2) with a shared expert of 256, sigmoid routing with
// the aux-loss-free expert bias, the top-2 renormalised and scaled by 2.5, token-dropless: a
// NemotronHForCausalLM model with MoE layers. Overrides, not a shipped recipe: bench/torch_reference.py
// (the benchmarks' PyTorch side, which reads every shipped recipe) has no sigmoid routing or shared
// expert. scripts/gpu.sh's NemotronH MoE parity run spells the same overrides.
#include <string>
#include <vector>

namespace sg::test {

inline const char* const kNemotron3StyleRecipe = "hybrid/tiny_hybrid";

inline const std::vector<std::string>& nemotron3_style_overrides() {
  static const std::vector<std::string> overrides = {
      "model.hybrid_override_pattern=MEM*EMEM", "model.num_moe_experts=8", "model.moe_router_topk=2",
      "model.moe_ffn_hidden_size=128", "model.moe_shared_expert_intermediate_size=256",
      "model.moe_router_score_function=sigmoid", "model.moe_router_enable_expert_bias=true",
      "model.moe_router_topk_scaling_factor=2.5", "model.moe_router_load_balancing_type=seq_aux_loss",
      "model.moe_aux_loss_coeff=1e-4", "model.moe_token_dispatcher_type=alltoall"};
  return overrides;
}

}  // namespace sg::test
