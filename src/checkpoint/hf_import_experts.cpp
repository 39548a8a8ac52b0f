// config.json's experts for the GPT-block MoE families (Mixtral, Qwen3-MoE, Qwen2-MoE) into the ModelSpec stepgraph
// trains (checkpoint/hf_import.cpp reads the rest of these folders).
#include <algorithm>
#include <string>
#include <vector>

#include "checkpoint/hf_config_reader.h"

namespace sg::checkpoint::detail {

// MixtralForCausalLM's experts: every block's MLP is num_local_experts SwiGLU experts of intermediate_size, top-k
// softmax routing renormalised over the chosen (Megatron's softmax after top-k), token-dropless.
void read_mixtral_experts(const ConfigReader& c, model::ModelSpec& s) {
  s.num_moe_experts = c.integer("num_local_experts", 8);
  s.moe_router_topk = c.integer("num_experts_per_tok", 2);
  s.moe_ffn_hidden_size = s.ffn_hidden_size;  // intermediate_size: the experts' width
  if (s.moe_router_topk > s.num_moe_experts) {
    c.fail("num_experts_per_tok",
           strprintf("= %lld is more than num_local_experts = %lld", static_cast<long long>(s.moe_router_topk),
                     static_cast<long long>(s.num_moe_experts)));
  }
  if (c.has("sliding_window")) {
    c.fail("sliding_window", "= " + c.json()["sliding_window"].dump() +
                                 ": stepgraph's attention is fully causal; a folder with a window is another model");
  }
  if (c.number("router_jitter_noise", 0.0) != 0.0) {
    c.fail("router_jitter_noise", "is not 0: stepgraph's router adds no noise (set it to 0.0)");
  }
}

// The Qwen MoE families' experts (Qwen3MoeForCausalLM's, Qwen2MoeForCausalLM's): num_experts SwiGLU experts of
// moe_intermediate_size in the blocks that are neither in mlp_only_layers nor off decoder_sparse_step (those have a
// dense MLP of intermediate_size); a softmax over all experts, the top-k renormalised with norm_topk_prob (Megatron's
// softmax after top-k), not without it (Megatron's moe_router_pre_softmax); token-dropless. Absent keys take the
// config class's defaults (Qwen3MoeConfig's, or with `qwen2` Qwen2MoeConfig's), as transformers reads them.
// Qwen2-MoE's blocks also have a shared expert of shared_expert_intermediate_size, always gated.
void read_qwen_moe_experts(const ConfigReader& c, model::ModelSpec& s, bool qwen2) {
  s.num_moe_experts = c.integer(c.has("num_local_experts") ? "num_local_experts" : "num_experts", qwen2 ? 60 : 128);
  s.moe_router_topk = c.integer("num_experts_per_tok", qwen2 ? 4 : 8);
  s.moe_ffn_hidden_size = c.integer("moe_intermediate_size", qwen2 ? 1408 : 768);
  s.moe.pre_softmax = !c.boolean("norm_topk_prob", false);
  if (qwen2) {
    s.moe.shared_expert_intermediate_size = c.integer("shared_expert_intermediate_size", 5632);  // positive
    s.moe.shared_expert_gate = true;
  }
  if (s.num_moe_experts < 1)
    c.fail("num_experts", strprintf("= %lld: must be positive", static_cast<long long>(s.num_moe_experts)));
  if (s.moe_router_topk < 1 || s.moe_router_topk > s.num_moe_experts) {
    c.fail("num_experts_per_tok",
           strprintf("= %lld must be between 1 and num_experts = %lld", static_cast<long long>(s.moe_router_topk),
                     static_cast<long long>(s.num_moe_experts)));
  }
  const int64_t step = c.integer("decoder_sparse_step", 1);
  if (step < 1) c.fail("decoder_sparse_step", strprintf("= %lld: must be positive", static_cast<long long>(step)));
  std::vector<int> freq(static_cast<size_t>(s.num_layers), 0);
  for (int64_t b = 0; b < s.num_layers; ++b) freq[static_cast<size_t>(b)] = (b + 1) % step == 0 ? 1 : 0;
  const nlohmann::json& j = c.json();
  if (j.contains("mlp_only_layers") && !j["mlp_only_layers"].is_null()) {
    const nlohmann::json& dense = j["mlp_only_layers"];
    if (!dense.is_array()) c.fail("mlp_only_layers", "= " + dense.dump() + ": expected a list of layer indices");
    for (const auto& b : dense) {
      if (!b.is_number_integer() || b.get<int64_t>() < 0 || b.get<int64_t>() >= s.num_layers) {
        c.fail("mlp_only_layers",
               "lists " + b.dump() + ": not a layer index below num_hidden_layers = " + std::to_string(s.num_layers));
      }
      freq[static_cast<size_t>(b.get<int64_t>())] = 0;
    }
  }
  if (std::find(freq.begin(), freq.end(), 1) == freq.end()) {
    c.fail("mlp_only_layers", std::string("and decoder_sparse_step leave no MoE block: that is a dense ") +
                                  (qwen2 ? "Qwen2 (model_type qwen2)" : "Qwen3 (model_type qwen3)"));
  }
  if (std::find(freq.begin(), freq.end(), 0) != freq.end()) s.moe.layer_freq = freq;  // empty: every block
}

}  // namespace sg::checkpoint::detail
