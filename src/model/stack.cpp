#include "model/stack.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"

namespace sg::model {

namespace {

// Hugging Face names of the step's own tensors per layout.
struct StepNames {
  const char* embedding;
  const char* final_norm;
};
StepNames step_names(StackLayout layout) {
  if (layout == StackLayout::gpt) return {"model.embed_tokens.weight", "model.norm.weight"};
  return {"backbone.embeddings.weight", "backbone.norm_f.weight"};
}

}  // namespace

void validate_model_spec(const ModelSpec& s) {
  auto positive = [](const char* key, int64_t v) {
    SG_CHECK(v > 0, strprintf("model.%s = %lld: must be positive", key, static_cast<long long>(v)));
  };
  positive("vocab_size", s.vocab_size);
  positive("num_layers", s.num_layers);
  positive("hidden_size", s.hidden_size);
  positive("seq_length", s.seq_length);
  SG_CHECK(s.init_method_std > 0.0, "model.init_method_std must be positive");
  SG_CHECK(s.layernorm_epsilon > 0.0, "model.layernorm_epsilon must be positive");
  SG_CHECK(s.attention_dropout >= 0.0f && s.attention_dropout < 1.0f,
           strprintf("model.attention_dropout = %g: must be in [0, 1)", static_cast<double>(s.attention_dropout)));
  SG_CHECK(s.hidden_dropout >= 0.0f && s.hidden_dropout < 1.0f,
           strprintf("model.hidden_dropout = %g: must be in [0, 1)", static_cast<double>(s.hidden_dropout)));
  SG_CHECK(ref::rope_rotary_dim_valid(s.head_dim(), s.rotary_dim),
           strprintf("RoPE's rotary dimensions (model.rotary_percent, partial_rotary_factor) are %lld of a head of "
                     "%lld: they must be even and at most the head's",
                     static_cast<long long>(s.rotary_dim), static_cast<long long>(s.head_dim())));
  stack_layer_kinds(s);
}

StackLayout stack_layout(const ModelSpec& spec) {
  return spec.hybrid_layer_pattern.empty() ? StackLayout::gpt : StackLayout::hybrid;
}

std::vector<LayerKind> stack_layer_kinds(const ModelSpec& spec) {
  if (stack_layout(spec) == StackLayout::hybrid) {
    std::vector<LayerKind> kinds = parse_layer_pattern(spec.hybrid_layer_pattern);
    SG_CHECK(static_cast<int64_t>(kinds.size()) == spec.num_layers,
             strprintf("model.hybrid_override_pattern %s has %zu layers but model.num_layers is %lld: set "
                       "model.num_layers=%zu (one layer per letter)",
                       spec.hybrid_layer_pattern.c_str(), kinds.size(), static_cast<long long>(spec.num_layers),
                       kinds.size()));
    return kinds;
  }
  SG_CHECK(spec.num_layers > 0, strprintf("model.num_layers = %lld: must be positive",
                                          static_cast<long long>(spec.num_layers)));
  const std::vector<int>& freq = spec.moe.layer_freq;
  SG_CHECK(freq.empty() || static_cast<int64_t>(freq.size()) == spec.num_layers,
           strprintf("model.moe_layer_freq lists %zu blocks but model.num_layers is %lld: give one 0/1 per block",
                     freq.size(), static_cast<long long>(spec.num_layers)));
  std::vector<LayerKind> kinds;
  for (int64_t b = 0; b < spec.num_layers; ++b) {
    kinds.push_back(LayerKind::attention);
    kinds.push_back(spec.num_moe_experts > 0 && spec.moe.is_moe_block(b) ? LayerKind::moe : LayerKind::mlp);
  }
  return kinds;
}

bool stack_has_kind(const ModelSpec& spec, LayerKind kind) {
  const std::vector<LayerKind> kinds = stack_layer_kinds(spec);
  return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
}

bool qwen_moe_names(const ModelSpec& spec) {
  return stack_layout(spec) == StackLayout::gpt && spec.mlp_activation == MlpActivation::swiglu &&
         (spec.qk_layernorm || (spec.moe.shared_expert_gate && spec.moe.shared_expert_intermediate_size > 0));
}

std::vector<LayerPlace> stack_places(const ModelSpec& spec) {
  const std::vector<LayerKind> kinds = stack_layer_kinds(spec);
  const bool gpt = stack_layout(spec) == StackLayout::gpt;
  const bool qwen_moe = qwen_moe_names(spec);
  std::vector<LayerPlace> places;
  for (size_t i = 0; i < kinds.size(); ++i) {
    LayerPlace p;
    p.index = static_cast<int>(i);
    p.kind = kinds[i];
    if (gpt) {
      p.hf_layer = static_cast<int64_t>(i / 2);
      p.first_in_hf_layer = i % 2 == 0;
      const std::string block = strprintf("model.layers.%lld.", static_cast<long long>(p.hf_layer));
      p.param_prefix = block + (p.kind == LayerKind::moe && qwen_moe ? "mlp" : layer_kind_info(p.kind).hf_module) + ".";
      p.norm_name = block + (p.first_in_hf_layer ? "input_layernorm.weight" : "post_attention_layernorm.weight");
    } else {
      p.hf_layer = static_cast<int64_t>(i);
      p.first_in_hf_layer = true;
      const std::string layer = strprintf("backbone.layers.%zu.", i);
      p.param_prefix = layer + "mixer.";
      p.norm_name = layer + "norm.weight";
    }
    places.push_back(std::move(p));
  }
  return places;
}

std::vector<graph::LayerRegions> stack_regions(const ModelSpec& spec) {
  std::vector<graph::LayerRegions> out;
  const std::vector<LayerKind> kinds = stack_layer_kinds(spec);
  for (size_t i = 0; i < kinds.size(); ++i) out.push_back({static_cast<int>(i), layer_kind_info(kinds[i]).modules});
  return out;
}

std::string describe_stack(const ModelSpec& spec) {
  const std::vector<LayerKind> kinds = stack_layer_kinds(spec);
  const std::string pattern = compact_layer_pattern(kinds);
  if (stack_layout(spec) == StackLayout::gpt) {
    return strprintf("%zu layers: %s as %lld GPT block%s", kinds.size(), pattern.c_str(),
                     static_cast<long long>(spec.num_layers), spec.num_layers == 1 ? "" : "s");
  }
  return strprintf("%zu layers: %s (hybrid pattern)", kinds.size(), pattern.c_str());
}

std::string hf_architecture(const ModelSpec& spec, std::string* why_none) {
  const auto none = [&](std::string why) {
    if (why_none != nullptr) *why_none = std::move(why);
    return std::string();
  };
  const std::vector<LayerKind> kinds = stack_layer_kinds(spec);
  const auto has = [&](LayerKind k) { return std::find(kinds.begin(), kinds.end(), k) != kinds.end(); };
  if (stack_layout(spec) == StackLayout::hybrid) {
    // NemotronH: attention without RoPE, non-gated squared-ReLU MLPs and experts, Mamba2 mixers.
    if (has(LayerKind::attention) && spec.qk_layernorm) {
      return none(
          "NemotronHForCausalLM's attention has no query and key norms, and this hybrid model's has "
          "(model.qk_layernorm=true)");
    }
    if (spec.add_bias_linear) {
      return none(
          "NemotronHForCausalLM's attention has no biases, and this hybrid model's linears have them "
          "(model.add_bias_linear=true)");
    }
    if (has(LayerKind::attention) && spec.add_qkv_bias) {
      return none(
          "NemotronHForCausalLM's attention biases (attention_bias) would bias o_proj too, and this hybrid model's "
          "biases only q, k and v (model.add_qkv_bias=true)");
    }
    if (has(LayerKind::attention) && spec.position_embedding != PositionEmbedding::none) {
      return none("NemotronHForCausalLM's attention has no RoPE, and this hybrid model's has "
                  "(model.position_embedding_type=rope)");
    }
    if ((has(LayerKind::mlp) || has(LayerKind::moe)) && spec.mlp_activation != MlpActivation::squared_relu) {
      return none("NemotronHForCausalLM's MLPs and experts are non-gated squared ReLU, and this hybrid model's are "
                  "SwiGLU (model.activation_func=silu, model.gated_linear_unit=true)");
    }
    if (has(LayerKind::moe)) {
      // NemotronHMoE: sigmoid scores (+ the correction bias for the choice), the top-k renormalised when
      // k > 1 (Megatron's sigmoid rule; norm_topk_prob), scaled, token-dropless, always a shared expert.
      const MoeSpec& m = spec.moe;
      if (m.score_function != ref::MoeScoreFunction::sigmoid) {
        return none("NemotronHForCausalLM routes with sigmoid scores (model.moe_router_score_function=sigmoid)");
      }
      if (spec.num_moe_experts < 2) return none("NemotronHForCausalLM's router needs at least 2 experts");
      if (!m.dropless()) {
        return none("NemotronHForCausalLM drops no tokens (model.moe_expert_capacity_factor=null)");
      }
      if (m.shared_expert_intermediate_size <= 0) {
        return none("NemotronHForCausalLM's MoE layers have a shared expert "
                    "(set model.moe_shared_expert_intermediate_size)");
      }
      if (m.shared_expert_gate) {
        return none("NemotronHForCausalLM's shared expert has no gate (model.moe_shared_expert_gate=true)");
      }
    }
    return "NemotronHForCausalLM";
  }
  bool moe = false, mlp = false;
  for (LayerKind k : kinds) {
    moe = moe || k == LayerKind::moe;
    mlp = mlp || k == LayerKind::mlp;
    if (k != LayerKind::attention && k != LayerKind::mlp && k != LayerKind::moe) {
      return none(strprintf("no transformers architecture for GPT blocks with %s layers yet",
                            layer_kind_info(k).description));
    }
  }
  if (spec.position_embedding != PositionEmbedding::rope || spec.mlp_activation != MlpActivation::swiglu) {
    return none(std::string(moe ? "MixtralForCausalLM" : "LlamaForCausalLM") +
                " needs RoPE and SwiGLU (model.position_embedding_type=rope, model.activation_func=silu, "
                "model.gated_linear_unit=true)");
  }
  if (spec.rotary_dim != 0 || spec.longrope.enabled()) {
    // Phi3: Llama's blocks, RoPE on a share of each head (partial_rotary_factor) and LongRoPE; no biases, norms or
    // experts.
    const std::string phi3 = "Phi3ForCausalLM";
    const std::string why =
        spec.rotary_dim != 0
            ? strprintf(", and only it rotates a share of each head (model.rotary_percent: %lld of %lld)",
                        static_cast<long long>(spec.rotary_dim), static_cast<long long>(spec.head_dim()))
            : std::string(", and only it has LongRoPE (model.longrope_short_factor)");
    if (moe) return none(phi3 + " has no experts" + why);
    if (spec.add_bias_linear || spec.add_qkv_bias) return none(phi3 + " has no linear biases" + why);
    if (spec.qk_layernorm) return none(phi3 + " has no query and key norms (model.qk_layernorm=true)" + why);
    if (spec.rope_scaling.llama3()) return none(phi3 + " has no Llama 3 rope scaling (model.rope_scaling)" + why);
    return phi3;
  }
  if (spec.add_bias_linear) {
    // Llama's attention_bias and mlp_bias: a bias on q, k, v, o_proj, gate_proj, up_proj and down_proj.
    if (spec.qk_layernorm) {
      return none(
          "no transformers class has query and key norms with biases on every linear (model.qk_layernorm=true with "
          "model.add_bias_linear=true; Qwen3 has no mlp_bias)");
    }
    if (moe) {
      return none(
          "no transformers class has experts with biases beside Llama-style attention (model.add_bias_linear="
          "true with experts; GptOss has them, with attention sinks, sliding windows and its own activation)");
    }
    return "LlamaForCausalLM";
  }
  if (moe && spec.moe.shared_expert_gate && spec.moe.shared_expert_intermediate_size > 0) {
    // Qwen2-MoE: softmax routing over all experts, the top-k renormalised (norm_topk_prob) or not, unscaled,
    // token-dropless, no expert bias, always a gated shared expert; q, k and v biased or not (qkv_bias); dense blocks
    // where mlp_only_layers lists them.
    const std::string qwen2_moe = "Qwen2MoeForCausalLM";
    const MoeSpec& m = spec.moe;
    if (spec.qk_layernorm) return none(qwen2_moe + " has no query and key norms (model.qk_layernorm=true)");
    if (m.score_function != ref::MoeScoreFunction::softmax) {
      return none(qwen2_moe + " routes with a softmax (model.moe_router_score_function=softmax)");
    }
    if (m.topk_scaling_factor != 1.0) return none(qwen2_moe + " has no model.moe_router_topk_scaling_factor");
    if (m.enable_expert_bias) return none(qwen2_moe + " has no expert bias");
    if (!m.dropless()) return none(qwen2_moe + " drops no tokens (model.moe_expert_capacity_factor=null)");
    return qwen2_moe;
  }
  if (spec.add_qkv_bias) {
    // Qwen2: Llama with a bias on q_proj, k_proj and v_proj (Qwen3's attention_bias would bias o_proj too).
    if (spec.qk_layernorm) {
      return none(
          "no transformers class has query and key norms with biases on q, k and v alone "
          "(model.qk_layernorm=true with model.add_qkv_bias=true; Qwen3's attention_bias biases o_proj too)");
    }
    if (moe) {
      return none(
          "no transformers MoE class has biases on q, k and v alone with these experts: Qwen2MoeForCausalLM's have a "
          "gated shared expert (model.moe_shared_expert_intermediate_size, model.moe_shared_expert_gate=true); or set "
          "model.add_qkv_bias=false for MixtralForCausalLM");
    }
    return "Qwen2ForCausalLM";
  }
  // Qwen3: Llama with a query and a key RMSNorm per head.
  if (!moe) return spec.qk_layernorm ? "Qwen3ForCausalLM" : "LlamaForCausalLM";
  const MoeSpec& m = spec.moe;
  if (spec.qk_layernorm) {
    // Qwen3-MoE: softmax routing over all experts, the top-k renormalised (norm_topk_prob, = Megatron's softmax
    // after top-k) or not (= moe_router_pre_softmax), unscaled, token-dropless, no shared expert or expert bias;
    // dense blocks where mlp_only_layers lists them.
    const std::string qwen3_moe = "Qwen3MoeForCausalLM";
    if (m.score_function != ref::MoeScoreFunction::softmax) {
      return none(qwen3_moe + " routes with a softmax (model.moe_router_score_function=softmax)");
    }
    if (m.topk_scaling_factor != 1.0) return none(qwen3_moe + " has no model.moe_router_topk_scaling_factor");
    if (m.shared_expert_intermediate_size > 0) return none(qwen3_moe + " has no shared expert");
    if (m.enable_expert_bias) return none(qwen3_moe + " has no expert bias");
    if (!m.dropless()) return none(qwen3_moe + " drops no tokens (model.moe_expert_capacity_factor=null)");
    return qwen3_moe;
  }
  // Mixtral: every block MoE, softmax over all experts, top-k renormalised (= Megatron's softmax after
  // top-k), no scaling, no shared expert, no expert bias.
  if (mlp) return none("MixtralForCausalLM needs every block MoE (model.moe_layer_freq mixes dense and MoE blocks)");
  if (m.score_function != ref::MoeScoreFunction::softmax || m.pre_softmax) {
    return none("MixtralForCausalLM routes with a softmax over the top-k logits (model.moe_router_score_function="
                "softmax, model.moe_router_pre_softmax=false)");
  }
  if (m.topk_scaling_factor != 1.0) return none("MixtralForCausalLM has no model.moe_router_topk_scaling_factor");
  if (m.shared_expert_intermediate_size > 0) {
    return none(
        "MixtralForCausalLM has no shared expert (Qwen2MoeForCausalLM's is gated: model.moe_shared_expert_gate"
        "=true)");
  }
  if (m.enable_expert_bias) return none("MixtralForCausalLM has no expert bias");
  if (!m.dropless()) return none("MixtralForCausalLM drops no tokens (model.moe_expert_capacity_factor=null)");
  if (spec.rope_scaling.llama3()) return none("MixtralForCausalLM has no Llama 3 rope scaling (model.rope_scaling)");
  return "MixtralForCausalLM";
}

ParamRef ModelLayout::norm_before(int64_t i) const {
  SG_CHECK(i >= 0 && i <= num_layers(), strprintf("ModelLayout::norm_before(%lld): no such layer boundary",
                                                   static_cast<long long>(i)));
  return i == num_layers() ? final_norm : pre_norms[static_cast<size_t>(i)];
}

ModelLayout declare_model(const ModelSpec& spec, const DeclareLayer& declare_layer) {
  validate_model_spec(spec);
  ModelLayout m;
  m.spec = spec;
  m.layers = stack_places(spec);
  const StepNames names = step_names(stack_layout(spec));
  const int64_t V = spec.vocab_size, H = spec.hidden_size;
  ParamBuilder params;
  DropoutSiteAllocator sites;
  params.begin_group();
  m.embedding = params.matrix(names.embedding, {V, H});
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const LayerPlace& place = m.layers[i];
    if (place.first_in_hf_layer) params.begin_group();
    m.pre_norms.push_back(params.vector(place.norm_name, {H}));
    LayerDeclarations d{spec, place, params, sites};
    declare_layer(i, d);
    m.output_sites.push_back(sites.next());
  }
  params.begin_group();
  m.final_norm = params.vector(names.final_norm, {H});
  if (spec.share_embeddings_and_output_weights) {
    m.lm_head = m.embedding;
  } else {
    params.begin_group();
    m.lm_head = params.matrix(kLmHeadName, {V, H});
  }
  m.num_dropout_sites = sites.count();
  m.params = params.build();
  return m;
}

}  // namespace sg::model
