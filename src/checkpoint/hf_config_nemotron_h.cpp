// config.json for hybrid Mamba models: transformers' NemotronHConfig (model_type nemotron_h), so a
// checkpoint folder loads with NemotronHForCausalLM.from_pretrained(folder).
#include <cmath>

#include "checkpoint/hf_config.h"
#include "core/error.h"
#include "core/strings.h"
#include "model/stack.h"

namespace sg::checkpoint {

nlohmann::json hf_nemotron_h_config(const model::ModelSpec& spec, const std::string& torch_dtype) {
  detail::require_hf_architecture(spec, "NemotronHForCausalLM", "not a NemotronH model");
  if (torch_dtype != "bfloat16" && torch_dtype != "float32") {
    throw Error("config.json: torch_dtype must be \"bfloat16\" or \"float32\", got \"" + torch_dtype + "\"");
  }
  const model::MambaSpec& m = spec.mamba;
  nlohmann::json config{
      {"architectures", {"NemotronHForCausalLM"}},
      {"model_type", "nemotron_h"},
      {"vocab_size", spec.vocab_size},
      {"hidden_size", spec.hidden_size},
      {"num_hidden_layers", spec.num_layers},
      // The older NemotronHConfig reads the pattern; the newer converts it into layers_block_type.
      {"hybrid_override_pattern", spec.hybrid_layer_pattern},
      {"tie_word_embeddings", spec.share_embeddings_and_output_weights},
      {"layer_norm_epsilon", spec.layernorm_epsilon},
      {"initializer_range", spec.init_method_std},
      {"residual_in_fp32", false},
      {"use_bias", false},
      // attention (no RoPE in NemotronH)
      {"num_attention_heads", spec.num_attention_heads},
      {"num_key_value_heads", spec.num_query_groups},
      {"head_dim", spec.head_dim()},
      // The context trained; a run from pretrained weights keeps its source's if larger (see hf_llama_config).
      {"max_position_embeddings", spec.seq_length},
      {"attention_bias", false},
      {"attention_dropout", std::stod(strprintf("%g", spec.attention_dropout))},  // 0.1, not 0.100000001
      // MLP: up_proj -> relu^2 -> down_proj
      {"intermediate_size", spec.ffn_hidden_size},
      {"mlp_hidden_act", "relu2"},
      {"mlp_bias", false},
      // Mamba2 mixer
      {"ssm_state_size", m.state_dim},
      {"mamba_num_heads", spec.mamba_heads()},
      {"mamba_head_dim", m.head_dim},
      {"n_groups", m.num_groups},
      {"expand", m.expand},
      {"conv_kernel", m.conv_kernel},
      {"chunk_size", m.chunk_size},
      {"use_conv_bias", true},
      {"mamba_proj_bias", false},
      {"mamba_hidden_act", "silu"},
      {"time_step_min", m.dt_min},
      {"time_step_max", m.dt_max},
      {"time_step_floor", m.dt_init_floor},
      {"use_cache", true},
      {"torch_dtype", torch_dtype},
  };
  if (model::stack_has_kind(spec, model::LayerKind::moe)) {
    // NemotronHMoE ('E' layers; hf_architecture checked the routing): one group, no latent projection;
    // the top-k renormalised only when k > 1, as Megatron's sigmoid router does.
    config["n_routed_experts"] = spec.num_moe_experts;
    config["num_experts_per_tok"] = spec.moe_router_topk;
    config["moe_intermediate_size"] = spec.moe_ffn_hidden_size;
    config["moe_shared_expert_intermediate_size"] = spec.moe.shared_expert_intermediate_size;
    config["n_shared_experts"] = 1;
    config["routed_scaling_factor"] = spec.moe.topk_scaling_factor;
    config["norm_topk_prob"] = spec.moe_router_topk > 1;
    config["n_group"] = 1;
    config["topk_group"] = 1;
  }
  // transformers' default is (0, inf); JSON has no infinity, so a finite limit only when one is set.
  if (m.dt_limit_min > 0.0 || std::isfinite(m.dt_limit_max)) {
    config["time_step_limit"] = {m.dt_limit_min, std::isfinite(m.dt_limit_max) ? m.dt_limit_max : 3.0e38};
  }
  return config;
}

}  // namespace sg::checkpoint
