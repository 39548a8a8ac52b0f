#pragma once
// MoE layer test cases shared by the CPU twin's gradient check (moe_layer_test.cpp) and the GPU layer
// tests (moe_layer_gpu_test.cpp): one 'E' layer in a hybrid pattern, small odd shapes, the routing and
// dispatch variants (dropless, token drop by probs / position, padded, sigmoid with expert bias,
// seq_aux_loss, shared expert) and the experts' activation (SwiGLU, squared ReLU).
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "model/init.h"
#include "model/layers/moe_layer.h"
#include "model/spec.h"
#include "model/stack.h"

namespace sg::test {

struct MoeCase {
  const char* name;
  int64_t H, E, k, F, S;  // hidden, experts, top-k, expert width, shared expert width (0: none)
  int64_t micro_batch, seq;
  ref::MoeScoreFunction score = ref::MoeScoreFunction::softmax;
  bool pre_softmax = false;
  double scaling = 1.0;
  model::MoeLoadBalancing balancing = model::MoeLoadBalancing::aux_loss;
  double aux = 0.1, z = 0.01;
  bool expert_bias = false;
  double capacity_factor = 0.0;  // 0: dropless
  bool pad = false;
  ref::MoeDropPolicy drop = ref::MoeDropPolicy::probs;
  model::MlpActivation activation = model::MlpActivation::swiglu;
  bool shared_gate = false;  // moe_shared_expert_gate (with S > 0)
  bool linear_biases = false;  // add_bias_linear: the experts' FC1 and FC2 biases (with S == 0)
};

inline model::ModelSpec moe_case_spec(const MoeCase& c) {
  model::ModelSpec s;
  s.vocab_size = 32;
  s.hybrid_layer_pattern = "E";
  s.num_layers = 1;
  s.hidden_size = c.H;
  s.ffn_hidden_size = c.F;
  s.num_attention_heads = 1;
  s.num_query_groups = 1;
  s.seq_length = c.seq;
  s.init_method_std = 0.3;  // away from the linear regime: every path carries gradient
  s.num_moe_experts = c.E;
  s.moe_router_topk = c.k;
  s.moe_ffn_hidden_size = c.F;
  s.moe.score_function = c.score;
  s.moe.pre_softmax = c.pre_softmax;
  s.moe.topk_scaling_factor = c.scaling;
  s.moe.load_balancing = c.balancing;
  s.moe.aux_loss_coeff = c.aux;
  s.moe.z_loss_coeff = c.z;
  s.moe.enable_expert_bias = c.expert_bias;
  s.moe.bias_update_rate = 0.05;
  s.moe.capacity_factor = c.capacity_factor;
  s.moe.pad_to_capacity = c.pad;
  s.moe.drop_policy = c.drop;
  s.moe.shared_expert_intermediate_size = c.S;
  s.moe.shared_expert_gate = c.shared_gate;
  s.mlp_activation = c.activation;
  s.add_bias_linear = c.linear_biases;
  return s;
}

inline model::BatchSpec moe_case_batch(const MoeCase& c) {
  model::BatchSpec b;
  b.micro_batch_size = c.micro_batch;
  b.num_microbatches = 1;
  return b;
}

// The layout of the one-layer model, declared through `layer` (its declarations are filled in).
template <class LayerT>
model::ModelLayout declare_moe_case(const model::ModelSpec& spec, LayerT& layer) {
  return model::declare_model(spec, [&](size_t, model::LayerDeclarations& d) { layer.declare(d); });
}

// Weights for the layer: the model's init, with the expert bias (if any) set to distinct values so that
// it changes the selection, and the experts' linear biases (zero at init) drawn ~ N(0, 0.3^2) so they count.
inline std::vector<float> moe_case_weights(const model::ModelLayout& layout, uint64_t seed) {
  std::vector<float> w = model::initial_parameters(layout, seed);
  std::mt19937_64 gen(seed + 1);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  for (const auto& t : layout.tensors()) {
    if (t.name.find(".experts.") != std::string::npos && t.name.size() > 5 &&
        t.name.compare(t.name.size() - 5, 5, ".bias") == 0) {
      for (int64_t i = 0; i < t.numel; ++i) w[static_cast<size_t>(t.offset + i)] = normal(gen);
      continue;
    }
    if (t.name.find("e_score_correction_bias") == std::string::npos) continue;
    for (int64_t e = 0; e < t.numel; ++e) w[static_cast<size_t>(t.offset + e)] = 0.07f * static_cast<float>((e * 5) % 7) - 0.2f;
  }
  return w;
}

inline std::vector<float> random_values(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(gen);
  return v;
}

}  // namespace sg::test
