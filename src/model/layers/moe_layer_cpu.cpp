// The MoE layer's CPU fp32 twin (the declarations and the GPU side: moe_layer.cpp).
#include <algorithm>

#include "model/layer_registry.h"
#include "model/layers/moe_layer.h"
#include "reference/grouped_gemm.h"
#include "reference/linear.h"
#include "reference/moe_combine.h"
#include "reference/moe_gating.h"
#include "reference/moe_permute.h"
#include "reference/moe_router.h"
#include "reference/moe_shared_gate.h"

namespace sg::model {

namespace {
size_t sz(int64_t n) { return static_cast<size_t>(n); }
}  // namespace

CpuLayerFootprint MoeLayerCpu::host_footprint(const ModelSpec& m, const BatchSpec& b) {
  // plan()'s buffers: the router's (with the aux loss's per-group counts and the step's per-expert counts), the
  // permuted rows', the experts' and the shared expert's. The parameters count the expert bias [E] where the layer
  // declares it (moe_layer_declarations.cpp: enabled, or Nemotron-H's non-gated experts, whose router always has it).
  const MoeShapes s = moe_shapes(m, b.micro_batch_size * m.seq_length);
  const double H = static_cast<double>(m.hidden_size);
  const double T = static_cast<double>(b.micro_batch_size) * static_cast<double>(m.seq_length);
  const double E = static_cast<double>(s.E), R = static_cast<double>(s.rows), Fe = static_cast<double>(s.F),
               Sh = static_cast<double>(s.S), k = static_cast<double>(s.k);
  // FC1's output and the activation's per unit of width: 2 + 1 gated, 1 + 1 not (so are the weights).
  const double widths = static_cast<double>(s.fc1_width() + s.F) / static_cast<double>(s.F);
  const double expert_bias = m.moe.enable_expert_bias || m.mlp_activation != MlpActivation::swiglu ? E : 0.0;
  // moe_shared_expert_gate: its weight [H]; saved the ungated output [T, H] and the gate [T]; scratch d logit [T].
  const double gate = s.shared_gate ? 1.0 : 0.0;
  // add_bias_linear: FC1's and FC2's biases per expert.
  const double linear_biases = m.add_bias_linear ? E * (static_cast<double>(s.fc1_width()) + H) : 0.0;
  return {.params = E * H + widths * E * Fe * H + widths * Sh * H + expert_bias + gate * H + linear_biases,
          .saved = T * (E + 2.0 * k) + static_cast<double>(s.aux_groups + 1) * E + R * (2.0 * H + widths * Fe) +
                   widths * T * Sh + gate * T * (H + 1.0),
          .scratch = T * (E + k + H) + R * (2.0 * H + widths * Fe) + widths * T * Sh + gate * T};
}

void MoeLayerCpu::plan(const ModelSpec& model, const BatchSpec& batch) {
  shapes_ = moe_shapes(model, batch.tokens_per_microbatch(model));
  const MoeShapes& s = shapes_;
  logits_.resize(sz(s.T * s.E));
  dlogits_.resize(sz(s.T * s.E));
  probs_.resize(sz(s.T * s.k));
  dprobs_.resize(sz(s.T * s.k));
  routing_map_.resize(sz(s.T * s.k));
  aux_counts_.resize(sz(s.aux_groups * s.E));
  for (auto* v : {&permuted_, &expert_out_, &d_expert_out_, &d_permuted_}) v->assign(sz(s.rows * s.H), 0.0f);
  for (auto* v : {&fc1_out_, &d_fc1_}) v->assign(sz(s.rows * s.fc1_width()), 0.0f);
  for (auto* v : {&act_, &d_act_}) v->assign(sz(s.rows * s.F), 0.0f);
  for (auto* v : {&shared_fc1_, &d_shared_fc1_}) v->resize(sz(s.T * s.shared_fc1_width()));
  for (auto* v : {&shared_act_, &d_shared_act_}) v->resize(sz(s.T * s.S));
  d_input_part_.resize(sz(s.T * s.H));
  if (s.shared_gate) {
    shared_out_.resize(sz(s.T * s.H));
    shared_gate_.resize(sz(s.T));
    d_shared_gate_logit_.resize(sz(s.T));
  }
  step_counts_.assign(sz(s.E), 0);
}

void MoeLayerCpu::forward(const CpuLayerIO& io) { run_forward(io, /*step_state=*/true); }

// The whole forward again, for every recompute module (the CPU twin keeps everything anyway): the same
// saved activations and output, without adding the auxiliary losses or the token counts a second time.
void MoeLayerCpu::recompute(const CpuLayerIO& io) { run_forward(io, /*step_state=*/false); }

void MoeLayerCpu::run_forward(const CpuLayerIO& io, bool step_state) {
  const MoeShapes& s = shapes_;
  // Router (fp32) and its losses.
  ref::linear_forward(logits_.data(), io.input, io.weight(decl_.router), s.T, s.H, s.E);
  const float* bias = s.expert_bias ? io.weight(decl_.expert_bias) : nullptr;
  ref::moe_router_forward(routing_map_.data(), probs_.data(), logits_.data(), bias, s.routing);
  if (s.losses.aux_coeff > 0.0f) {
    // The aux loss balances the unbiased choice (Megatron routes with the bias, balances without).
    std::vector<int32_t> unbiased = routing_map_;
    std::vector<float> unbiased_probs(probs_.size());
    if (bias != nullptr) ref::moe_router_forward(unbiased.data(), unbiased_probs.data(), logits_.data(), nullptr, s.routing);
    ref::moe_count_experts(aux_counts_.data(), unbiased.data(), s.T, s.k, s.E, s.losses.group_tokens(s.T));
    if (step_state && io.aux_losses != nullptr) {
      io.aux_losses->load_balancing +=
          io.loss_scale * ref::moe_aux_loss(logits_.data(), aux_counts_.data(), s.routing, s.losses);
    }
  }
  if (s.losses.z_coeff > 0.0f && step_state && io.aux_losses != nullptr) {
    io.aux_losses->z += io.loss_scale * ref::moe_z_loss(logits_.data(), s.routing, s.losses);
  }

  // Dispatch.
  perm_ = ref::moe_preprocess(routing_map_.data(), probs_.data(), s.dispatch);
  if (step_state && io.dropout) {  // training only (evaluation leaves the step's counts alone)
    for (int64_t e = 0; e < s.E; ++e) step_counts_[sz(e)] += perm_.kept_counts[sz(e)];
  }
  ref::moe_permute_forward(permuted_.data(), io.input, perm_.row_to_slot.data(), s.rows, s.k, s.H);

  // Experts. Rows outside every expert's segment stay zero.
  const ref::GroupedRows rows{perm_.expert_rows.data(), perm_.expert_row_offsets.data(), static_cast<int>(s.E), s.rows};
  std::fill(fc1_out_.begin(), fc1_out_.end(), 0.0f);
  std::fill(expert_out_.begin(), expert_out_.end(), 0.0f);
  ref::grouped_linear_forward(fc1_out_.data(), permuted_.data(), io.weight(decl_.fc1), rows, s.fc1_width(), s.H);
  if (decl_.fc1_bias.valid())
    ref::grouped_bias_forward(fc1_out_.data(), io.weight(decl_.fc1_bias), rows, s.fc1_width());
  activation_forward({.activation = s.activation, .out = act_.data(), .in = fc1_out_.data(), .T = s.rows, .F = s.F});
  ref::grouped_linear_forward(expert_out_.data(), act_.data(), io.weight(decl_.fc2), rows, s.H, s.F);
  if (decl_.fc2_bias.valid()) ref::grouped_bias_forward(expert_out_.data(), io.weight(decl_.fc2_bias), rows, s.H);
  ref::moe_combine_forward(io.output, expert_out_.data(), probs_.data(), perm_.slot_to_row.data(), s.T, s.k, s.H);

  if (s.S > 0) {
    ref::linear_forward(shared_fc1_.data(), io.input, io.weight(decl_.shared_fc1), s.T, s.H, s.shared_fc1_width());
    activation_forward(
        {.activation = s.activation, .out = shared_act_.data(), .in = shared_fc1_.data(), .T = s.T, .F = s.S});
    if (s.shared_gate) {  // out += sigmoid(n w) * shared expert, the ungated output kept for the backward
      ref::linear_forward(shared_out_.data(), shared_act_.data(), io.weight(decl_.shared_down), s.T, s.S, s.H);
      ref::moe_shared_gate_forward(io.output, shared_gate_.data(), shared_out_.data(), io.input,
                                   io.weight(decl_.shared_gate), s.T, s.H);
    } else {
      ref::linear_forward(d_input_part_.data(), shared_act_.data(), io.weight(decl_.shared_down), s.T, s.S, s.H);
      ref::moe_gating_add_grad(io.output, d_input_part_.data(), s.T * s.H);  // out += shared expert
    }
  }
}

void MoeLayerCpu::backward(const CpuLayerIO& io) {
  const MoeShapes& s = shapes_;
  // Experts (moe), then the un-permute (moe_preprocess): d n from the routed path.
  ref::moe_combine_backward(d_expert_out_.data(), dprobs_.data(), io.d_output, expert_out_.data(), probs_.data(),
                            perm_.slot_to_row.data(), perm_.row_to_slot.data(), s.T, s.k, s.H, s.rows);
  const ref::GroupedRows rows{perm_.expert_rows.data(), perm_.expert_row_offsets.data(), static_cast<int>(s.E), s.rows};
  std::fill(d_act_.begin(), d_act_.end(), 0.0f);
  std::fill(d_permuted_.begin(), d_permuted_.end(), 0.0f);
  ref::grouped_linear_backward_input(d_act_.data(), d_expert_out_.data(), io.weight(decl_.fc2), rows, s.H, s.F);
  ref::grouped_linear_backward_weight(io.grad(decl_.fc2), d_expert_out_.data(), act_.data(), rows, s.H, s.F);
  if (decl_.fc2_bias.valid()) ref::grouped_bias_backward(io.grad(decl_.fc2_bias), d_expert_out_.data(), rows, s.H);
  activation_backward({.activation = s.activation,
                       .din = d_fc1_.data(),
                       .dout = d_act_.data(),
                       .in = fc1_out_.data(),
                       .T = s.rows,
                       .F = s.F});
  if (decl_.fc1_bias.valid()) ref::grouped_bias_backward(io.grad(decl_.fc1_bias), d_fc1_.data(), rows, s.fc1_width());
  ref::grouped_linear_backward_input(d_permuted_.data(), d_fc1_.data(), io.weight(decl_.fc1), rows, s.fc1_width(),
                                     s.H);
  ref::grouped_linear_backward_weight(io.grad(decl_.fc1), d_fc1_.data(), permuted_.data(), rows, s.fc1_width(),
                                      s.H);
  ref::moe_permute_backward(io.d_input, d_permuted_.data(), perm_.slot_to_row.data(), s.T, s.k, s.H);

  // Router (moe_router): the probs' gradient and the losses' through the fp32 gating linear.
  ref::moe_router_backward(dlogits_.data(), dprobs_.data(), logits_.data(), routing_map_.data(), s.routing);
  if (s.losses.aux_coeff > 0.0f) {
    ref::moe_aux_loss_backward(dlogits_.data(), logits_.data(), aux_counts_.data(), s.routing, s.losses,
                               static_cast<double>(io.loss_scale));
  }
  if (s.losses.z_coeff > 0.0f) {
    ref::moe_z_loss_backward(dlogits_.data(), logits_.data(), s.routing, s.losses, static_cast<double>(io.loss_scale));
  }
  ref::linear_backward_input(d_input_part_.data(), dlogits_.data(), io.weight(decl_.router), s.T, s.H, s.E);
  ref::moe_gating_add_grad(io.d_input, d_input_part_.data(), s.T * s.H);
  ref::linear_backward_weight(io.grad(decl_.router), dlogits_.data(), io.input, s.T, s.H, s.E);

  if (s.S > 0) {
    // The shared expert's output gradient: dy, or with the gate g dy (d_input_part_), the gate's own gradients
    // added into d n and its weight's.
    const float* d_shared_out = io.d_output;
    if (s.shared_gate) {
      ref::moe_shared_gate_backward(d_input_part_.data(), d_shared_gate_logit_.data(), io.d_input,
                                    io.grad(decl_.shared_gate), io.d_output, shared_out_.data(), io.input,
                                    io.weight(decl_.shared_gate), shared_gate_.data(), s.T, s.H);
      d_shared_out = d_input_part_.data();
    }
    ref::linear_backward_input(d_shared_act_.data(), d_shared_out, io.weight(decl_.shared_down), s.T, s.S, s.H);
    ref::linear_backward_weight(io.grad(decl_.shared_down), d_shared_out, shared_act_.data(), s.T, s.S, s.H);
    activation_backward({.activation = s.activation,
                         .din = d_shared_fc1_.data(),
                         .dout = d_shared_act_.data(),
                         .in = shared_fc1_.data(),
                         .T = s.T,
                         .F = s.S});
    ref::linear_backward_input(d_input_part_.data(), d_shared_fc1_.data(), io.weight(decl_.shared_fc1), s.T, s.H,
                               s.shared_fc1_width());
    ref::moe_gating_add_grad(io.d_input, d_input_part_.data(), s.T * s.H);
    ref::linear_backward_weight(io.grad(decl_.shared_fc1), d_shared_fc1_.data(), io.input, s.T, s.H,
                                s.shared_fc1_width());
  }
}

void MoeLayerCpu::step_begin() { std::fill(step_counts_.begin(), step_counts_.end(), 0); }

void MoeLayerCpu::step_end(const ModelLayout& layout, float* weights) {
  logged_counts_ = step_counts_;
  if (!shapes_.expert_bias) return;
  ref::moe_expert_bias_update(weights + layout.offset(decl_.expert_bias), step_counts_.data(), shapes_.E,
                              shapes_.bias_update_rate);  // zeroes step_counts_
}

void MoeDecodeCpu::plan(const ModelSpec& model, const DecodeSpec& decode) {
  const int64_t rows = decode.max_rows();
  shapes_ = moe_shapes(model, rows);
  const MoeShapes& s = shapes_;
  logits_.resize(sz(rows * s.E));
  probs_.resize(sz(rows * s.k));
  routing_map_.resize(sz(rows * s.k));
  fc1_out_.resize(sz(s.fc1_width()));
  act_.resize(sz(s.F));
  expert_out_.resize(sz(s.H));
  shared_fc1_.resize(sz(rows * s.shared_fc1_width()));
  shared_act_.resize(sz(rows * s.S));
  shared_out_.resize(sz(rows * s.H));
  if (s.shared_gate) shared_gate_.resize(sz(rows));
}

void MoeDecodeCpu::forward(const CpuDecodeIO& io) {
  const MoeShapes& s = shapes_;
  const int64_t T = io.rows.T, H = s.H, N = s.fc1_width();
  ref::MoeRouting routing = s.routing;
  routing.T = T;
  ref::linear_forward(logits_.data(), io.input, io.weight(decl_.router), T, H, s.E);
  ref::moe_router_forward(routing_map_.data(), probs_.data(), logits_.data(),
                          s.expert_bias ? io.weight(decl_.expert_bias) : nullptr, routing);
  // Each token through its experts in selection order, weighted by its probs (the combine's order).
  const float* fc1 = io.weight(decl_.fc1);
  const float* fc2 = io.weight(decl_.fc2);
  const float* fc1_bias = decl_.fc1_bias.valid() ? io.weight(decl_.fc1_bias) : nullptr;
  const float* fc2_bias = decl_.fc2_bias.valid() ? io.weight(decl_.fc2_bias) : nullptr;
  for (int64_t t = 0; t < T; ++t) {
    float* out = io.output + t * H;
    std::fill(out, out + H, 0.0f);
    for (int64_t j = 0; j < s.k; ++j) {
      const int64_t e = routing_map_[sz(t * s.k + j)];
      ref::linear_forward(fc1_out_.data(), io.input + t * H, fc1 + e * N * H, 1, H, N);
      if (fc1_bias != nullptr) ref::moe_gating_add_grad(fc1_out_.data(), fc1_bias + e * N, N);  // += the bias
      activation_forward({.activation = s.activation, .out = act_.data(), .in = fc1_out_.data(), .T = 1, .F = s.F});
      ref::linear_forward(expert_out_.data(), act_.data(), fc2 + e * H * s.F, 1, s.F, H);
      if (fc2_bias != nullptr) ref::moe_gating_add_grad(expert_out_.data(), fc2_bias + e * H, H);
      const float p = probs_[sz(t * s.k + j)];
      for (int64_t c = 0; c < H; ++c) out[c] += p * expert_out_[sz(c)];
    }
  }
  if (s.S > 0) {
    ref::linear_forward(shared_fc1_.data(), io.input, io.weight(decl_.shared_fc1), T, H, s.shared_fc1_width());
    activation_forward(
        {.activation = s.activation, .out = shared_act_.data(), .in = shared_fc1_.data(), .T = T, .F = s.S});
    ref::linear_forward(shared_out_.data(), shared_act_.data(), io.weight(decl_.shared_down), T, s.S, H);
    if (s.shared_gate) {
      ref::moe_shared_gate_forward(io.output, shared_gate_.data(), shared_out_.data(), io.input,
                                   io.weight(decl_.shared_gate), T, H);
    } else {
      ref::moe_gating_add_grad(io.output, shared_out_.data(), T * H);  // out += shared expert
    }
  }
}

std::vector<std::vector<int32_t>> moe_step_token_counts(const std::vector<std::unique_ptr<CpuLayer>>& layers) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& layer : layers) {
    if (const auto* moe = dynamic_cast<const MoeLayerCpu*>(layer.get())) out.push_back(moe->last_step_token_counts());
  }
  return out;
}

}  // namespace sg::model
