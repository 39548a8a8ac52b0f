// The MoE layer's shapes, its plain GEMM descriptors (shared by the training layer and the decoding twin),
// its parameter declarations and FLOPs, and the check that a checkpoint's expert bias is used. The GPU side
// is moe_layer.cpp, the CPU twin moe_layer_cpu.cpp.
#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "kernels/gemm.h"
#include "model/layer_registry.h"
#include "model/layers/moe_layer.h"
#include "model/stack.h"

namespace sg::model {

namespace {
size_t sz(int64_t n) {
  return static_cast<size_t>(n);
}
long long ll(int64_t v) {
  return static_cast<long long>(v);
}
}  // namespace
MoeShapes moe_shapes(const ModelSpec& m, int64_t T) {
  MoeShapes s;
  s.T = T;
  s.H = m.hidden_size;
  s.E = m.num_moe_experts;
  s.k = m.moe_router_topk;
  s.F = m.moe_ffn_hidden_size;
  s.S = m.moe.shared_expert_intermediate_size;
  s.activation = m.mlp_activation;
  s.routing = {.T = T,
               .E = s.E,
               .k = s.k,
               .score_function = m.moe.score_function,
               .pre_softmax = m.moe.pre_softmax,
               .scaling_factor = static_cast<float>(m.moe.topk_scaling_factor)};
  s.losses.aux_coeff = m.moe.load_balancing == MoeLoadBalancing::none ? 0.0f : static_cast<float>(m.moe.aux_loss_coeff);
  s.losses.aux_group_tokens = m.moe.load_balancing == MoeLoadBalancing::seq_aux_loss ? m.seq_length : 0;
  s.losses.z_coeff = static_cast<float>(m.moe.z_loss_coeff);
  s.aux_groups = s.losses.groups(T);
  s.dispatch.T = T;
  s.dispatch.E = s.E;
  s.dispatch.k = s.k;
  s.dispatch.drop_policy = m.moe.drop_policy;
  s.dispatch.pad_to_capacity = !m.moe.dropless() && m.moe.pad_to_capacity;
  s.dispatch.capacity =
      m.moe.dropless() ? 0 : ref::moe_expert_capacity(T, s.k, s.E, m.moe.capacity_factor, s.dispatch.pad_to_capacity);
  s.rows = s.dispatch.permuted_rows();
  s.expert_bias = m.moe.enable_expert_bias;
  s.bias_update_rate = static_cast<float>(m.moe.bias_update_rate);
  s.shared_gate = m.moe.shared_expert_gate && s.S > 0;
  return s;
}

// The fp32 gating linear (row-major, as kernels/gemm.h's Linear helpers derive them).
// logits^T[E,T] = Wg[E,H] n^T: m=E n=T k=H, A = Wg (col-major [H,E]) transposed
kernels::GemmDesc moe_gate_forward_desc(const MoeShapes& s) {
  return {.transpose_a = true,
          .m = s.E,
          .n = s.T,
          .k = s.H,
          .lda = s.H,
          .ldb = s.H,
          .ldd = s.E,
          .d_type = kernels::GemmDtype::kFP32};
}

// As LinearForward(T, S, H) with beta 1: the routed output is in D already.
kernels::GemmDesc moe_shared_down_accumulate_desc(const MoeShapes& s) {
  return {.transpose_a = true, .m = s.H, .n = s.T, .k = s.S, .lda = s.S, .ldb = s.S, .ldd = s.H, .beta = 1.0f};
}

LayerFlops MoeLayer::flops_per_token(const ModelSpec& m) {
  // The router, the k routed experts a token visits and the shared expert: FC1 (2F columns gated, F not)
  // and FC2 per unit of width; the shared expert's gate, one column.
  const double H = static_cast<double>(m.hidden_size), F = static_cast<double>(m.moe_ffn_hidden_size);
  const double shared = static_cast<double>(m.moe.shared_expert_intermediate_size);
  const double linears = static_cast<double>(activation_input_width(m.mlp_activation, 1)) + 1.0;
  const double gate = m.moe.shared_expert_gate && shared > 0.0 ? H : 0.0;
  return {.matmul_weights = H * static_cast<double>(m.num_moe_experts) +
                            linears * H * (F * static_cast<double>(m.moe_router_topk) + shared) + gate};
}

void MoeDeclarations::declare(LayerDeclarations& d) {
  const ModelSpec& s = d.model;
  SG_CHECK(s.num_moe_experts >= 1 && s.num_moe_experts <= ref::kMoeMaxExperts,
           strprintf("model.num_moe_experts = %lld: an MoE layer needs 1 to %lld experts", ll(s.num_moe_experts),
                     ll(ref::kMoeMaxExperts)));
  SG_CHECK(s.moe_router_topk >= 1 && s.moe_router_topk <= s.num_moe_experts,
           strprintf("model.moe_router_topk = %lld must be between 1 and model.num_moe_experts = %lld",
                     ll(s.moe_router_topk), ll(s.num_moe_experts)));
  SG_CHECK(s.moe_ffn_hidden_size > 0,
           strprintf("model.moe_ffn_hidden_size = %lld: must be positive", ll(s.moe_ffn_hidden_size)));
  SG_CHECK(!s.add_bias_linear || s.moe.shared_expert_intermediate_size == 0,
           strprintf("model.add_bias_linear = true with model.moe_shared_expert_intermediate_size = %lld: shared "
                     "experts have no biases (Megatron's SharedExpertMLP refuses add_bias_linear); set "
                     "model.add_bias_linear=false, or model.moe_shared_expert_intermediate_size=0",
                     ll(s.moe.shared_expert_intermediate_size)));
  SG_CHECK(!s.moe.enable_expert_bias || ref::moe_elementwise_scores(s.moe.score_function),
           "model.moe_router_enable_expert_bias needs model.moe_router_score_function=sigmoid or sqrtsoftplus");
  SG_CHECK(s.moe.load_balancing != MoeLoadBalancing::seq_aux_loss || s.moe.aux_loss_coeff == 0.0 || s.seq_length > 0,
           "model.moe_router_load_balancing_type=seq_aux_loss needs a positive seq_length");
  const int64_t H = s.hidden_size, E = s.num_moe_experts, F = s.moe_ffn_hidden_size;
  const std::string& p = d.place.param_prefix;
  router = d.params.matrix(p + "gate.weight", {E, H});
  // The experts in the names of the checkpoint family that has them (moe_layer.h): Mixtral's or the Qwen MoE
  // families' SwiGLU, Nemotron-H's squared ReLU.
  const bool gated = s.mlp_activation == MlpActivation::swiglu;
  const bool qwen = qwen_moe_names(s);
  // With add_bias_linear each weight has its bias beside it, zero at init (Megatron's), FC1's gate then up per expert.
  std::vector<ParamDecl> fc1_tensors, fc2_tensors, fc1_biases, fc2_biases;
  const auto add = [&](std::vector<ParamDecl>& weights, std::vector<ParamDecl>& biases, const std::string& linear,
                       int64_t out, int64_t in, ParamInit init) {
    weights.emplace_back(linear + ".weight", std::vector<int64_t>{out, in}, init);
    if (s.add_bias_linear) biases.emplace_back(linear + ".bias", std::vector<int64_t>{out}, ParamInit::zeros);
  };
  for (int64_t j = 0; j < E; ++j) {
    const std::string expert = strprintf("%sexperts.%lld.", p.c_str(), ll(j));
    if (gated) {
      add(fc1_tensors, fc1_biases, expert + (qwen ? "gate_proj" : "w1"), F, H, ParamInit::normal);
      add(fc1_tensors, fc1_biases, expert + (qwen ? "up_proj" : "w3"), F, H, ParamInit::normal);
    } else {
      add(fc1_tensors, fc1_biases, expert + "up_proj", F, H, ParamInit::normal);
    }
    add(fc2_tensors, fc2_biases, expert + (gated && !qwen ? "w2" : "down_proj"), H, F, ParamInit::output_projection);
  }
  fc1 = d.params.matrix(std::move(fc1_tensors));
  fc2 = d.params.matrix(std::move(fc2_tensors));
  if (s.add_bias_linear) {
    fc1_bias = d.params.vector(std::move(fc1_biases));
    fc2_bias = d.params.vector(std::move(fc2_biases));
  }
  if (s.moe.shared_expert_intermediate_size > 0) {
    const int64_t S = s.moe.shared_expert_intermediate_size;
    const std::string shared = p + (gated ? "shared_expert." : "shared_experts.");
    shared_fc1 = gated ? d.params.matrix({{shared + "gate_proj.weight", {S, H}}, {shared + "up_proj.weight", {S, H}}})
                       : d.params.matrix(shared + "up_proj.weight", {S, H});
    shared_down = d.params.matrix(shared + "down_proj.weight", {H, S}, ParamInit::output_projection);
    if (s.moe.shared_expert_gate) shared_gate = d.params.matrix(p + "shared_expert_gate.weight", {1, H});
  }
  // Nemotron-H's router always has the bias (zero and unchanged without moe_router_enable_expert_bias), so
  // its checkpoints load as NemotronHForCausalLM with nothing missing.
  // With moe_router_enable_expert_bias the router reads it in fp32 (bind: main_weight).
  const std::string bias_name = p + "gate.e_score_correction_bias";
  if (s.moe.enable_expert_bias) {
    expert_bias = d.params.fp32_vector(bias_name, {E}, ParamInit::zeros);
  } else if (!gated) {
    expert_bias = d.params.vector(bias_name, {E}, ParamInit::zeros);
  }
}

std::string unused_expert_bias(const ModelLayout& layout, const FlatView& weights) {
  const ModelSpec& m = layout.spec;
  if (m.num_moe_experts <= 0 || m.moe.enable_expert_bias) return "";
  // The MoE layers' declarations again, to hold their bias references (the other kinds declare as usual).
  std::vector<ParamRef> biases;
  std::vector<std::unique_ptr<CpuLayer>> layers = make_cpu_layers(m);
  const ModelLayout declared = declare_model(m, [&](size_t i, LayerDeclarations& d) {
    if (d.place.kind != LayerKind::moe) return layers[i]->declare(d);
    MoeDeclarations moe;
    moe.declare(d);
    if (moe.expert_bias.valid()) biases.push_back(moe.expert_bias);
  });
  SG_CHECK(declared.total() == layout.total() && weights.size() == layout.total(),
           "unused_expert_bias: the layout or the weights given are not this model's");
  for (const ParamRef bias : biases) {
    const int64_t first = declared.params.offset(bias);
    std::vector<float> values(sz(declared.params.numel(bias)));
    weights.read(first, first + declared.params.numel(bias), values.data());
    for (int64_t e = 0; e < declared.params.numel(bias); ++e) {
      const float value = values[sz(e)];
      if (value == 0.0f) continue;
      const auto& tensors = declared.tensors();
      const auto tensor =
          std::find_if(tensors.begin(), tensors.end(), [&](const ParamTensor& t) { return t.offset == first; });
      return strprintf(
          "%s[%lld] = %g: the model these weights come from chooses experts with this bias, but "
          "model.moe_router_enable_expert_bias is false, so this run would choose without it; set "
          "model.moe_router_enable_expert_bias=true (the bias then also moves by "
          "model.moe_router_bias_update_rate each step)",
          tensor->name.c_str(), static_cast<long long>(e), static_cast<double>(value));
    }
  }
  return "";
}

}  // namespace sg::model
