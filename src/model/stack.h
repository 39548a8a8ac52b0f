#pragma once
// The model as a stack of layers, composed as Megatron composes it (pure CPU: validation, scope
// planning, `config show`, checkpoints and both backends read it):
//
//   GPT layout     (hybrid_layer_pattern empty): num_layers blocks, each an attention layer '*' and
//                  an MLP layer '-' (an MoE layer 'E' when num_moe_experts > 0). Hugging Face
//                  (Llama) names: block b's attention layer carries model.layers.b.input_layernorm
//                  and model.layers.b.self_attn.*, its MLP layer model.layers.b.post_attention_layernorm
//                  and model.layers.b.mlp.*; model.embed_tokens, model.norm, lm_head.
//   hybrid layout  (hybrid_layer_pattern set): one layer per letter, num_layers == its length.
//                  NemotronH names: backbone.layers.i.norm and backbone.layers.i.mixer.*;
//                  backbone.embeddings, backbone.norm_f, lm_head.
//
// Every layer has its own pre-norm and residual: layer i reads n_i = norm_i(x_i) and returns delta_i;
// the step computes x_{i+1} = x_i + dropout(delta_i) and n_{i+1} = norm_{i+1}(x_{i+1}) (the final norm
// after the last layer). A layer's index in the stack is its RegionKey.layer, its NVTX "layer i" and
// the order of its dropout sites.
//
// "*-" repeated n times is the same computation as n GPT blocks, with the same flat parameter layout
// (same offsets, same dropout sites); only the names and the initial values differ: Megatron scales
// output-projection init by 1/sqrt(2 num_layers), and num_layers is n for the GPT spelling, 2n for the
// hybrid one. Upload the same weights to both and they train to the same bits.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "graph/scope_plan.h"
#include "model/dropout_sites.h"
#include "model/layer_kind.h"
#include "model/param_builder.h"
#include "model/spec.h"

namespace sg::model {

enum class StackLayout : uint8_t { gpt, hybrid };

// The LM head's Hugging Face name in both layouts; a model with tied embeddings has no such tensor.
inline constexpr const char* kLmHeadName = "lm_head.weight";

// Where one layer sits in the stack and what its parameters are called.
struct LayerPlace {
  int index = 0;  // position in the stack
  LayerKind kind = LayerKind::attention;
  int64_t hf_layer = 0;            // its Hugging Face layer: the GPT block, or `index` (hybrid)
  bool first_in_hf_layer = false;  // opens a group of the tensor list (param_builder.h)
  std::string param_prefix;        // of its own tensors: "model.layers.3.self_attn.", "backbone.layers.5.mixer."
  std::string norm_name;           // its pre-norm weight: "model.layers.3.input_layernorm.weight"
};

StackLayout stack_layout(const ModelSpec& spec);
// One kind per layer. Throws sg::Error for an invalid pattern or num_layers (naming key and fix).
std::vector<LayerKind> stack_layer_kinds(const ModelSpec& spec);
// Whether the stack has a layer of `kind` (stack_layer_kinds' errors likewise).
bool stack_has_kind(const ModelSpec& spec, LayerKind kind);
std::vector<LayerPlace> stack_places(const ModelSpec& spec);
// Whether the MoE layers take the Qwen MoE families' Hugging Face names (model.layers.b.mlp.gate, mlp.experts.j.gate_proj
// / up_proj / down_proj, mlp.shared_expert.*, mlp.shared_expert_gate): GPT blocks of SwiGLU experts with query and key
// norms (model.qk_layernorm: Qwen3-MoE) or a gated shared expert (model.moe_shared_expert_gate: Qwen2-MoE). Otherwise
// Mixtral's (block_sparse_moe.gate, experts.j.w1 / w3 / w2) or, in hybrid stacks, NemotronH's.
bool qwen_moe_names(const ModelSpec& spec);
// The regions each layer marks, in step order (for graph::plan_graph_scopes).
std::vector<graph::LayerRegions> stack_regions(const ModelSpec& spec);
// "8 layers: (*-)x4 as 4 GPT blocks", "6 layers: (M*-)x2 (hybrid pattern)".
std::string describe_stack(const ModelSpec& spec);
// The transformers class that loads this model's checkpoints ("LlamaForCausalLM" for GPT blocks of
// RoPE attention and SwiGLU MLP, also with model.add_bias_linear (attention_bias and mlp_bias), "Qwen2ForCausalLM"
// with model.add_qkv_bias alone, "Qwen3ForCausalLM" with model.qk_layernorm, "Qwen2MoeForCausalLM" with a gated
// shared expert, "MixtralForCausalLM" with every MLP
// Mixtral's experts; "NemotronHForCausalLM" for hybrid patterns of M, * without RoPE and - with squared ReLU);
// empty when none does yet, and then *why_none says why.
std::string hf_architecture(const ModelSpec& spec, std::string* why_none = nullptr);

// What a layer declares into, in stack order (Layer::declare / CpuLayer::declare).
struct LayerDeclarations {
  const ModelSpec& model;
  const LayerPlace& place;
  ParamBuilder& params;                 // its tensors, named place.param_prefix + "q_proj.weight"
  DropoutSiteAllocator& dropout_sites;  // the sites it draws inside (not its output: the step's)
};

// The declarations of the whole model: the step's (embedding, pre-norms, final norm, LM head, output
// dropout sites) around each layer's own.
struct ModelLayout {
  ModelSpec spec;
  std::vector<LayerPlace> layers;
  ParamLayout params;
  ParamRef embedding, final_norm, lm_head;  // lm_head is embedding when the embeddings are tied
  std::vector<ParamRef> pre_norms;          // [layers]
  std::vector<uint32_t> output_sites;       // [layers]: hidden_dropout on the layer's output
  uint32_t num_dropout_sites = 0;

  int64_t num_layers() const { return static_cast<int64_t>(layers.size()); }
  int64_t total() const { return params.total(); }
  int64_t num_decay() const { return params.num_decay(); }
  int64_t num_parameters() const { return params.num_parameters(); }
  const std::vector<ParamTensor>& tensors() const { return params.tensors(); }
  const ParamTensor& find(const std::string& name) const { return params.find(name); }
  std::string describe() const { return params.describe(); }
  int64_t offset(ParamRef block) const { return params.offset(block); }
  // The norm applied to the residual stream entering layer i (i == layers: the final norm).
  ParamRef norm_before(int64_t i) const;
};

// Declares the model: embedding; per layer its pre-norm, then declare_layer(i, ...), then its output
// dropout site; the final norm; the LM head (unless tied). Validates the spec (validate_model_spec).
using DeclareLayer = std::function<void(size_t index, LayerDeclarations& declarations)>;
ModelLayout declare_model(const ModelSpec& spec, const DeclareLayer& declare_layer);

// Checks the shapes every layout needs (positive sizes, dropout in [0, 1), ...); each layer kind
// checks its own (attention: heads divide the hidden size, ...). Throws sg::Error naming the key.
void validate_model_spec(const ModelSpec& spec);

}  // namespace sg::model
