// The MoE layer's GPU side (its declarations: moe_layer_declarations.cpp; the CPU twin: moe_layer_cpu.cpp).
#include "model/layers/moe_layer.h"

#include <algorithm>
#include <optional>
#include <type_traits>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/column_sums.h"
#include "kernels/gemm.h"
#include "kernels/grouped_gemm.h"
#include "kernels/moe_combine.h"
#include "kernels/moe_gating.h"
#include "kernels/moe_permute.h"
#include "kernels/moe_router.h"
#include "kernels/moe_shared_gate.h"
#include "model/layer_registry.h"

namespace sg::model {

namespace {
size_t sz(int64_t n) { return static_cast<size_t>(n); }
long long ll(int64_t v) { return static_cast<long long>(v); }
// The aux loss's counts (unbiased routing, per group) equal the dispatch's expert counts: no expert bias
// (routing_map is the unbiased routing) and one load-balancing group.
bool aux_counts_are_expert_counts(const MoeShapes& s) { return !s.expert_bias && s.aux_groups == 1; }
}  // namespace

// ---- GPU ----

// The layer's GEMM plans: the fp32 gating linear and the shared expert through cuBLASLt, the experts
// through the grouped GEMM (shared by every MoE layer of the same shapes: one stream, ordered launches).
struct MoeLayer::Plans {
  const kernels::GemmPlan* gate_forward = nullptr;   // logits[T,E] fp32 = n[T,H] Wg^T (bf16 in)
  const kernels::GemmPlan* shared_down_acc = nullptr;  // out[T,H] += act Wdown^T (bf16, beta 1)
  std::unique_ptr<kernels::LinearForward> shared_fc1;
  std::unique_ptr<kernels::LinearForward> shared_down;  // moe_shared_expert_gate: the ungated output, kept
  SharedBufferRef ws_shared_gate;                       // its weight gradient's partial rows (kernels/column_sums)
  size_t shared_gate_bytes = 0;
  std::unique_ptr<kernels::LinearBackwardInput> shared_down_dx, shared_fc1_dx;
  std::unique_ptr<kernels::LinearBackwardWeight> shared_down_dw, shared_fc1_dw;
  kernels::GroupedLinearForward* fc1 = nullptr;
  kernels::GroupedLinearForward* fc2 = nullptr;
  kernels::GroupedLinearBackwardInput* fc1_dx = nullptr;
  kernels::GroupedLinearBackwardInput* fc2_dx = nullptr;
  kernels::GroupedLinearBackwardWeight* fc1_dw = nullptr;
  kernels::GroupedLinearBackwardWeight* fc2_dw = nullptr;
  SharedBufferRef ws_fc1, ws_fc2, ws_fc1_dx, ws_fc2_dx, ws_fc1_dw, ws_fc2_dw, ws_preprocess, ws_loss, ws_gating;
  size_t preprocess_bytes = 0, gating_bytes = 0;
};

// Arena slots (plan) and their pointers (bind).
struct MoeLayer::Buffers {
  // saved (forward -> backward)
  cuda::MemorySlot logits_s, routing_map_s, probs_s, aux_counts_s, expert_counts_s, shared_fc1_s, shared_act_s;
  cuda::MemorySlot kept_counts_s, expert_rows_s, offsets_s, slot_to_row_s, row_to_slot_s, permuted_s;
  cuda::MemorySlot fc1_out_s, act_s, expert_out_s;
  cuda::MemorySlot shared_out_s, shared_gate_s;  // moe_shared_expert_gate: the ungated output, the gate
  // state
  int64_t step_counts_at = 0;  // in the step's step counts (summed over data-parallel ranks)
  cuda::MemorySlot logged_counts_s;
  // scratch shared by all layers
  SharedBufferRef aux_routing_map_r, d_expert_out_r, dprobs_r, d_act_r, d_fc1_r, d_permuted_r, dlogits_r,
      d_shared_act_r, d_shared_fc1_r, d_shared_out_r, d_shared_gate_r;

  float *logits = nullptr, *probs = nullptr;
  int32_t *routing_map = nullptr, *aux_routing_map = nullptr, *aux_counts = nullptr, *expert_counts = nullptr;
  bf16 *shared_fc1 = nullptr, *shared_act = nullptr;
  int32_t *kept_counts = nullptr, *expert_rows = nullptr, *offsets = nullptr, *slot_to_row = nullptr,
          *row_to_slot = nullptr;
  bf16 *permuted = nullptr, *fc1_out = nullptr, *act = nullptr, *expert_out = nullptr;
  int32_t* step_counts = nullptr;
  bf16 *d_expert_out = nullptr, *d_act = nullptr, *d_fc1 = nullptr, *d_permuted = nullptr;
  float *dprobs = nullptr, *dlogits = nullptr;
  bf16 *d_shared_act = nullptr, *d_shared_fc1 = nullptr;
  bf16 *shared_out = nullptr, *d_shared_out = nullptr;                                      // moe_shared_expert_gate
  float *shared_gate = nullptr, *d_shared_gate = nullptr, *shared_gate_partials = nullptr;  // gate [T], d logit [T]
  void *preprocess_ws = nullptr, *loss_ws = nullptr, *gating_ws = nullptr;
  // parameters
  const bf16 *w_router = nullptr, *w_fc1 = nullptr, *w_fc2 = nullptr, *w_shared_fc1 = nullptr,
             *w_shared_down = nullptr;
  kernels::FloatBuffer g_router, g_fc1, g_fc2, g_shared_fc1, g_shared_down;  // main_grad, fp32 or bf16
  const bf16* w_shared_gate = nullptr;
  kernels::FloatBuffer g_shared_gate;
  float* expert_bias = nullptr;  // fp32 main weight (step_end updates it)
  float *aux_loss = nullptr, *z_loss = nullptr;
};

MoeLayer::MoeLayer(LayerPlace place) : Layer(std::move(place)), buf_(std::make_unique<Buffers>()) {}
MoeLayer::~MoeLayer() = default;

void MoeLayer::plan(LayerPlanContext& ctx) {
  using graph::Module;
  shapes_ = moe_shapes(ctx.model(), ctx.tokens());
  // The auxiliary losses are means over the global batch's microbatches (every rank's: the reducer sums).
  microbatches_ = ctx.batch().global_microbatches();
  const MoeShapes& s = shapes_;
  Buffers& b = *buf_;
  const size_t Tk = sz(s.T * s.k), R = sz(s.rows), E = sz(s.E);
  // What gives each saved activation back: moe the whole layer; without it, moe_act and shared_experts
  // their part; the routing, dispatch and expert buffers otherwise come back only with full recompute.
  const RecomputeSpec& recompute = ctx.model().recompute;
  const bool whole = recompute.selects(RecomputeModule::moe);
  const auto given_back = [whole](std::optional<RecomputeModule> narrow) -> std::optional<RecomputeModule> {
    return whole ? std::optional<RecomputeModule>(RecomputeModule::moe) : narrow;
  };
  const std::optional<RecomputeModule> routed = given_back(std::nullopt);
  const std::optional<RecomputeModule> shared = given_back(RecomputeModule::shared_experts);
  reruns_.output = ctx.full_recompute();
  reruns_.router = reruns_.experts = whole || reruns_.output;
  reruns_.shared = reruns_.router || recompute.selects(RecomputeModule::shared_experts);
  reruns_.act = recompute.selects(RecomputeModule::moe_act);
  b.logits_s = ctx.saved_array<float>(Module::moe_router, "router_logits", sz(s.T * s.E), routed);
  b.routing_map_s = ctx.saved_array<int32_t>(Module::moe_router, "routing_map", Tk, routed);
  b.probs_s = ctx.saved_array<float>(Module::moe_router, "routing_probs", Tk, routed);
  b.expert_counts_s = ctx.saved_array<int32_t>(Module::moe_router, "expert_counts", E, routed);
  // The load-balancing loss counts the unbiased routing per group: without the expert bias and with
  // one group, that is expert_counts itself (no second count, no second buffer).
  if (!aux_counts_are_expert_counts(s)) {
    b.aux_counts_s = ctx.saved_array<int32_t>(Module::moe_router, "aux_counts", sz(s.aux_groups) * E, routed);
  }
  if (s.S > 0) {
    b.shared_fc1_s = ctx.saved_array<bf16>(Module::moe_router, "shared_fc1", sz(s.T * s.shared_fc1_width()), shared);
    b.shared_act_s = ctx.saved_array<bf16>(Module::moe_router, "shared_act", sz(s.T * s.S), shared);
    b.d_shared_act_r = ctx.scratch("grad.moe_d_shared_act", sz(s.T * s.S) * sizeof(bf16));
    b.d_shared_fc1_r = ctx.scratch("grad.moe_d_shared_fc1", sz(s.T * s.shared_fc1_width()) * sizeof(bf16));
  }
  if (s.shared_gate) {
    // The ungated output comes back with the shared expert's other activations; the gate is the output stage's (moe),
    // which reruns only under full recompute.
    b.shared_out_s = ctx.saved_array<bf16>(Module::moe_router, "shared_out", sz(s.T * s.H), shared);
    b.shared_gate_s = ctx.saved_array<float>(Module::moe, "shared_gate", sz(s.T), std::nullopt);
    b.d_shared_out_r = ctx.scratch("grad.moe_d_shared_out", sz(s.T * s.H) * sizeof(bf16));
    b.d_shared_gate_r = ctx.scratch("grad.moe_d_shared_gate_logit", sz(s.T) * sizeof(float));
  }
  b.kept_counts_s = ctx.saved_array<int32_t>(Module::moe_preprocess, "kept_counts", E, routed);
  b.expert_rows_s = ctx.saved_array<int32_t>(Module::moe_preprocess, "expert_rows", E, routed);
  b.offsets_s = ctx.saved_array<int32_t>(Module::moe_preprocess, "expert_row_offsets", E + 1, routed);
  b.slot_to_row_s = ctx.saved_array<int32_t>(Module::moe_preprocess, "slot_to_row", Tk, routed);
  b.row_to_slot_s = ctx.saved_array<int32_t>(Module::moe_preprocess, "row_to_slot", R, routed);
  b.permuted_s = ctx.saved_array<bf16>(Module::moe_preprocess, "permuted", R * sz(s.H), routed);
  b.fc1_out_s = ctx.saved_array<bf16>(Module::moe, "expert_fc1", R * sz(s.fc1_width()), routed);
  b.act_s = ctx.saved_array<bf16>(Module::moe, "expert_act", R * sz(s.F), given_back(RecomputeModule::moe_act));
  b.expert_out_s = ctx.saved_array<bf16>(Module::moe, "expert_out", R * sz(s.H), routed);
  b.step_counts_at = ctx.step_counts(s.E);
  b.logged_counts_s = ctx.state("moe_logged_counts", E * sizeof(int32_t));
  if (s.expert_bias && s.losses.aux_coeff > 0.0f) {
    b.aux_routing_map_r = ctx.scratch("act.moe_aux_routing_map", Tk * sizeof(int32_t));
  }
  b.d_expert_out_r = ctx.scratch("grad.moe_d_expert_out", R * sz(s.H) * sizeof(bf16));
  b.d_act_r = ctx.scratch("grad.moe_d_act", R * sz(s.F) * sizeof(bf16));
  b.d_fc1_r = ctx.scratch("grad.moe_d_fc1", R * sz(s.fc1_width()) * sizeof(bf16));
  b.d_permuted_r = ctx.scratch("grad.moe_d_permuted", R * sz(s.H) * sizeof(bf16));
  b.dprobs_r = ctx.scratch("grad.moe_dprobs", Tk * sizeof(float));
  b.dlogits_r = ctx.scratch("grad.moe_dlogits", sz(s.T * s.E) * sizeof(float));
}

void MoeLayer::plan_device(DevicePlanContext& ctx) {
  const MoeShapes& s = shapes_;
  plans_ = std::make_unique<Plans>();
  Plans& p = *plans_;
  // The weight gradients' dW in the main gradients' dtype; the other ops' outputs are bf16 activations.
  const auto dims = [&](int64_t N, int64_t K, bool weight_grad) {
    return kernels::GroupedGemmDims{
        .num_groups = static_cast<int>(s.E),
        .max_total_rows = s.rows,
        .N = N,
        .K = K,
        .weight_grad_dtype = weight_grad ? ctx.grad_dtype() : kernels::FloatDtype::fp32};
  };
  // One plan (and workspace) per (op, dims), shared by the MoE layers of the model.
  const auto grouped = [&]<class Plan>(const char* op, int64_t N, int64_t K, SharedBufferRef& ws) -> Plan* {
    const std::string key = strprintf("moe.grouped_%s.%lldx%lldx%lld", op, ll(s.rows), ll(N), ll(K));
    constexpr bool weight_grad = std::is_same_v<Plan, kernels::GroupedLinearBackwardWeight>;
    Plan& plan = ctx.objects().get<Plan>(key, [&] { return std::make_unique<Plan>(dims(N, K, weight_grad)); });
    ws = ctx.workspace("workspace." + key, plan.workspace_bytes());
    return &plan;
  };
  p.fc1 = grouped.operator()<kernels::GroupedLinearForward>("fwd", s.fc1_width(), s.H, p.ws_fc1);
  p.fc2 = grouped.operator()<kernels::GroupedLinearForward>("fwd", s.H, s.F, p.ws_fc2);
  p.fc1_dx = grouped.operator()<kernels::GroupedLinearBackwardInput>("dgrad", s.fc1_width(), s.H, p.ws_fc1_dx);
  p.fc2_dx = grouped.operator()<kernels::GroupedLinearBackwardInput>("dgrad", s.H, s.F, p.ws_fc2_dx);
  p.fc1_dw = grouped.operator()<kernels::GroupedLinearBackwardWeight>("wgrad", s.fc1_width(), s.H, p.ws_fc1_dw);
  p.fc2_dw = grouped.operator()<kernels::GroupedLinearBackwardWeight>("wgrad", s.H, s.F, p.ws_fc2_dw);
  p.preprocess_bytes = kernels::moe_preprocess_workspace_bytes(s.dispatch);
  p.ws_preprocess = ctx.workspace("workspace.moe_preprocess", p.preprocess_bytes);
  if (s.any_loss()) {
    p.ws_loss = ctx.workspace("workspace.moe_router_loss", kernels::moe_router_loss_workspace_bytes(s.routing, s.losses));
  }
  p.gating_bytes = kernels::moe_gating_backward_weight_workspace_bytes(s.T, s.E, s.H);
  if (p.gating_bytes > 0) p.ws_gating = ctx.workspace("workspace.moe_gating_backward_weight", p.gating_bytes);
  const bool biases = ctx.model().add_bias_linear;
  fc1_bias_.plan_device(ctx, biases, static_cast<int>(s.E), s.rows, s.fc1_width());
  fc2_bias_.plan_device(ctx, biases, static_cast<int>(s.E), s.rows, s.H);
  if (s.shared_gate) {
    p.shared_gate_bytes = kernels::column_sums_scratch_bytes(s.T, s.H);
    p.ws_shared_gate = ctx.workspace("workspace.moe_shared_gate_partials", p.shared_gate_bytes);
  }
}

void MoeLayer::bind(LayerBindContext& ctx) {
  const MoeShapes& s = shapes_;
  Buffers& b = *buf_;
  Plans& p = *plans_;
  b.logits = ctx.get<float>(b.logits_s);
  b.routing_map = ctx.get<int32_t>(b.routing_map_s);
  b.probs = ctx.get<float>(b.probs_s);
  b.expert_counts = ctx.get<int32_t>(b.expert_counts_s);
  b.aux_counts = aux_counts_are_expert_counts(s) ? b.expert_counts : ctx.get<int32_t>(b.aux_counts_s);
  if (s.S > 0) {
    b.shared_fc1 = ctx.get<bf16>(b.shared_fc1_s);
    b.shared_act = ctx.get<bf16>(b.shared_act_s);
    b.d_shared_act = ctx.get<bf16>(b.d_shared_act_r);
    b.d_shared_fc1 = ctx.get<bf16>(b.d_shared_fc1_r);
  }
  if (s.shared_gate) {
    b.shared_out = ctx.get<bf16>(b.shared_out_s);
    b.shared_gate = ctx.get<float>(b.shared_gate_s);
    b.d_shared_out = ctx.get<bf16>(b.d_shared_out_r);
    b.d_shared_gate = ctx.get<float>(b.d_shared_gate_r);
    b.shared_gate_partials = ctx.get<float>(p.ws_shared_gate);
    b.w_shared_gate = ctx.weight(decl_.shared_gate);
    b.g_shared_gate = ctx.grad(decl_.shared_gate);
  }
  b.kept_counts = ctx.get<int32_t>(b.kept_counts_s);
  b.expert_rows = ctx.get<int32_t>(b.expert_rows_s);
  b.offsets = ctx.get<int32_t>(b.offsets_s);
  b.slot_to_row = ctx.get<int32_t>(b.slot_to_row_s);
  b.row_to_slot = ctx.get<int32_t>(b.row_to_slot_s);
  b.permuted = ctx.get<bf16>(b.permuted_s);
  b.fc1_out = ctx.get<bf16>(b.fc1_out_s);
  b.act = ctx.get<bf16>(b.act_s);
  b.expert_out = ctx.get<bf16>(b.expert_out_s);
  b.step_counts = ctx.step_counts(b.step_counts_at);
  logged_counts_ = ctx.get<int32_t>(b.logged_counts_s);
  if (b.aux_routing_map_r.index >= 0) b.aux_routing_map = ctx.get<int32_t>(b.aux_routing_map_r);
  b.d_expert_out = ctx.get<bf16>(b.d_expert_out_r);
  b.d_act = ctx.get<bf16>(b.d_act_r);
  b.d_fc1 = ctx.get<bf16>(b.d_fc1_r);
  b.d_permuted = ctx.get<bf16>(b.d_permuted_r);
  b.dprobs = ctx.get<float>(b.dprobs_r);
  b.dlogits = ctx.get<float>(b.dlogits_r);
  b.preprocess_ws = ctx.get<void>(p.ws_preprocess);
  if (s.any_loss()) b.loss_ws = ctx.get<void>(p.ws_loss);
  if (p.gating_bytes > 0) b.gating_ws = ctx.get<void>(p.ws_gating);
  b.w_router = ctx.weight(decl_.router);
  b.w_fc1 = ctx.weight(decl_.fc1);
  b.w_fc2 = ctx.weight(decl_.fc2);
  b.g_router = ctx.grad(decl_.router);
  b.g_fc1 = ctx.grad(decl_.fc1);
  b.g_fc2 = ctx.grad(decl_.fc2);
  fc1_bias_.bind(ctx, decl_.fc1_bias);
  fc2_bias_.bind(ctx, decl_.fc2_bias);
  if (s.S > 0) {
    b.w_shared_fc1 = ctx.weight(decl_.shared_fc1);
    b.w_shared_down = ctx.weight(decl_.shared_down);
    b.g_shared_fc1 = ctx.grad(decl_.shared_fc1);
    b.g_shared_down = ctx.grad(decl_.shared_down);
  }
  if (s.expert_bias) b.expert_bias = ctx.main_weight(decl_.expert_bias);
  b.aux_loss = ctx.pointers().aux_loss;
  b.z_loss = ctx.pointers().z_loss;

  // Grouped GEMM plans: bound to their (shared) workspaces once, then initialised on those addresses.
  const auto init = [&](kernels::GroupedGemmPlan& plan, SharedBufferRef ws) {
    if (!plan.initialized()) {
      plan.bind(ctx.get<void>(ws), plan.workspace_bytes());
      plan.initialize();
    }
  };
  init(*p.fc1, p.ws_fc1);
  init(*p.fc2, p.ws_fc2);
  init(*p.fc1_dx, p.ws_fc1_dx);
  init(*p.fc2_dx, p.ws_fc2_dx);
  init(*p.fc1_dw, p.ws_fc1_dw);
  init(*p.fc2_dw, p.ws_fc2_dw);

  kernels::Blas& blas = ctx.blas();
  p.gate_forward = &blas.plan(moe_gate_forward_desc(s));
  if (s.S > 0) {
    p.shared_fc1 = std::make_unique<kernels::LinearForward>(blas, s.T, s.H, s.shared_fc1_width());
    if (s.shared_gate) {
      p.shared_down = std::make_unique<kernels::LinearForward>(blas, s.T, s.S, s.H);
    } else {
      p.shared_down_acc = &blas.plan(moe_shared_down_accumulate_desc(s));
    }
    p.shared_down_dx = std::make_unique<kernels::LinearBackwardInput>(blas, s.T, s.S, s.H);
    p.shared_down_dw = std::make_unique<kernels::LinearBackwardWeight>(blas, s.T, s.S, s.H, ctx.grad_dtype());
    p.shared_fc1_dx = std::make_unique<kernels::LinearBackwardInput>(blas, s.T, s.H, s.shared_fc1_width(), true);
    p.shared_fc1_dw =
        std::make_unique<kernels::LinearBackwardWeight>(blas, s.T, s.H, s.shared_fc1_width(), ctx.grad_dtype());
  }
}

// Evaluation (io.dropout false) adds no auxiliary loss and no token count, as a recompute.
void MoeLayer::forward(graph::Module module, cudaStream_t stream, const LayerIO& io) {
  switch (module) {
    case graph::Module::moe_router:
      router_forward(stream, io, io.dropout);
      shared_expert_forward(stream, io);
      break;
    case graph::Module::moe_preprocess: preprocess_forward(stream, io, io.dropout); break;
    case graph::Module::moe: experts_forward(stream, io, /*output=*/true); break;
    default: SG_CHECK(false, strprintf("MoE layer %d has no module %s", index(), graph::module_name(module)));
  }
}

// The step calls it for the modules with saved activations in the recompute buffer (and every module
// under full recompute); each reruns what the plan put there, from buffers that are kept or rerun first.
void MoeLayer::recompute(graph::Module module, cudaStream_t stream, const LayerIO& io) {
  const Reruns& r = reruns_;
  switch (module) {
    case graph::Module::moe_router:
      if (r.router) router_forward(stream, io, /*step_state=*/false);
      if (r.shared) shared_expert_forward(stream, io);
      break;
    case graph::Module::moe_preprocess:
      if (r.router) preprocess_forward(stream, io, /*step_state=*/false);
      break;
    case graph::Module::moe:
      if (r.experts) {
        experts_forward(stream, io, r.output);
      } else if (r.act) {
        Buffers& b = *buf_;
        activation_forward(stream, {.activation = shapes_.activation,
                                    .out = b.act,
                                    .in = b.fc1_out,
                                    .T = shapes_.rows,
                                    .F = shapes_.F});
      }
      break;
    default: SG_CHECK(false, strprintf("MoE layer %d has no module %s", index(), graph::module_name(module)));
  }
}

void MoeLayer::preprocess_forward(cudaStream_t stream, const LayerIO& io, bool step_state) {
  const MoeShapes& s = shapes_;
  Buffers& b = *buf_;
  kernels::moe_preprocess(stream, {.routing_map = b.routing_map,
                                   .probs = b.probs,
                                   .expert_counts = b.expert_counts,
                                   .dispatch = s.dispatch,
                                   .workspace = b.preprocess_ws,
                                   .workspace_bytes = plans_->preprocess_bytes,
                                   .kept_counts = b.kept_counts,
                                   .expert_rows = b.expert_rows,
                                   .expert_row_offsets = b.offsets,
                                   .slot_to_row = b.slot_to_row,
                                   .row_to_slot = b.row_to_slot,
                                   .step_counts = step_state ? b.step_counts : nullptr});
  kernels::moe_permute_forward(stream, {.permuted = b.permuted,
                                        .hidden = io.input,
                                        .row_to_slot = b.row_to_slot,
                                        .rows = s.rows,
                                        .k = s.k,
                                        .H = s.H});
}

void MoeLayer::backward(graph::Module module, cudaStream_t stream, const LayerIO& io) {
  const MoeShapes& s = shapes_;
  Buffers& b = *buf_;
  switch (module) {
    case graph::Module::moe: experts_backward(stream, io); break;
    case graph::Module::moe_preprocess:
      kernels::moe_permute_backward(stream, {.dhidden = io.d_input,
                                             .dpermuted = b.d_permuted,
                                             .slot_to_row = b.slot_to_row,
                                             .T = s.T,
                                             .k = s.k,
                                             .H = s.H});
      break;
    case graph::Module::moe_router: router_backward(stream, io); break;
    default: SG_CHECK(false, strprintf("MoE layer %d has no module %s", index(), graph::module_name(module)));
  }
}

void MoeLayer::router_forward(cudaStream_t stream, const LayerIO& io, bool step_state) {
  const MoeShapes& s = shapes_;
  Buffers& b = *buf_;
  plans_->gate_forward->run(stream, b.w_router, io.input, b.logits);
  kernels::moe_router_forward(stream, {.logits = b.logits,
                                       .expert_bias = b.expert_bias,
                                       .routing_map = b.routing_map,
                                       .probs = b.probs,
                                       .aux_routing_map = b.aux_routing_map,
                                       .routing = s.routing});
  kernels::moe_count_experts(stream, {.routing_map = b.routing_map, .counts = b.expert_counts, .T = s.T, .E = s.E,
                                      .k = s.k, .group_tokens = 0});
  if (s.losses.aux_coeff > 0.0f && !aux_counts_are_expert_counts(s)) {
    // Counts of the unbiased routing per load-balancing group.
    kernels::moe_count_experts(stream, {.routing_map = b.aux_routing_map ? b.aux_routing_map : b.routing_map,
                                        .counts = b.aux_counts,
                                        .T = s.T,
                                        .E = s.E,
                                        .k = s.k,
                                        .group_tokens = s.losses.group_tokens(s.T)});
  }
  if (s.any_loss() && step_state) {
    kernels::moe_router_loss_forward(stream, {.logits = b.logits,
                                              .aux_counts = b.aux_counts,
                                              .routing = s.routing,
                                              .losses = s.losses,
                                              .workspace = b.loss_ws,
                                              .aux_loss_sum = b.aux_loss,
                                              .z_loss_sum = b.z_loss,
                                              .value_scale = 1.0f / static_cast<float>(microbatches_)});
  }
}

void MoeLayer::shared_expert_forward(cudaStream_t stream, const LayerIO& io) {
  const MoeShapes& s = shapes_;
  if (s.S == 0) return;
  Buffers& b = *buf_;
  plans_->shared_fc1->run(stream, b.shared_fc1, io.input, b.w_shared_fc1);
  activation_forward(stream, {.activation = s.activation, .out = b.shared_act, .in = b.shared_fc1, .T = s.T, .F = s.S});
  if (s.shared_gate) plans_->shared_down->run(stream, b.shared_out, b.shared_act, b.w_shared_down);
}

// `output`: combine into the layer's output and add the shared expert's FC2 (not needed by a selective rerun).
void MoeLayer::experts_forward(cudaStream_t stream, const LayerIO& io, bool output) {
  const MoeShapes& s = shapes_;
  Buffers& b = *buf_;
  Plans& p = *plans_;
  // Both grouped GEMMs read the same counts: one setup launch for the two (kernels::GroupedGemmSetup).
  const kernels::GroupedLinearForwardParams fc1{
      .y = b.fc1_out, .x = b.permuted, .w = b.w_fc1, .counts = b.expert_rows, .offsets = b.offsets};
  const kernels::GroupedLinearForwardParams fc2{
      .y = b.expert_out, .x = b.act, .w = b.w_fc2, .counts = b.expert_rows, .offsets = b.offsets};
  kernels::GroupedGemmSetup().add(*p.fc1, fc1).add(*p.fc2, fc2).launch(stream);
  p.fc1->run_prepared(stream, fc1);
  fc1_bias_.forward(stream, b.fc1_out, b.expert_rows, b.offsets);
  activation_forward(stream, {.activation = s.activation, .out = b.act, .in = b.fc1_out, .T = s.rows, .F = s.F});
  p.fc2->run_prepared(stream, fc2);
  fc2_bias_.forward(stream, b.expert_out, b.expert_rows, b.offsets);  // before the combine weights it
  if (!output) return;
  kernels::moe_combine_forward(stream, {.out = io.output,
                                        .expert_out = b.expert_out,
                                        .probs = b.probs,
                                        .slot_to_row = b.slot_to_row,
                                        .T = s.T,
                                        .k = s.k,
                                        .H = s.H});
  if (s.shared_gate) {
    kernels::moe_shared_gate_forward(stream, {.out = io.output,
                                              .gate = b.shared_gate,
                                              .shared = b.shared_out,
                                              .input = io.input,
                                              .weight = b.w_shared_gate,
                                              .T = s.T,
                                              .H = s.H});
  } else if (s.S > 0) {
    p.shared_down_acc->run(stream, b.w_shared_down, b.shared_act, io.output);
  }
}

// The experts' grouped wgrad overwrites too (accumulate = false zero-fills an expert without rows).
std::vector<ParamRef> MoeLayer::first_written_grads() const {
  if (!decl_.shared_fc1.valid()) return {decl_.fc1, decl_.fc2};
  return {decl_.fc1, decl_.fc2, decl_.shared_fc1, decl_.shared_down};
}

void MoeLayer::experts_backward(cudaStream_t stream, const LayerIO& io) {
  const MoeShapes& s = shapes_;
  Buffers& b = *buf_;
  Plans& p = *plans_;
  if (s.S > 0) {
    // With the gate, the shared expert's output gradient is g dy, and d logit waits for the router's backward.
    const bf16* d_shared_out = io.d_output;
    if (s.shared_gate) {
      kernels::moe_shared_gate_backward(stream, {.d_shared = b.d_shared_out,
                                                 .d_logit = b.d_shared_gate,
                                                 .dy = io.d_output,
                                                 .shared = b.shared_out,
                                                 .gate = b.shared_gate,
                                                 .T = s.T,
                                                 .H = s.H});
      d_shared_out = b.d_shared_out;
    }
    p.shared_down_dx->run(stream, b.d_shared_act, d_shared_out, b.w_shared_down);
    p.shared_down_dw->run(stream, b.g_shared_down, d_shared_out, b.shared_act, io.first_microbatch);
  }
  kernels::moe_combine_backward(stream, {.dexpert_out = b.d_expert_out,
                                         .dprobs = b.dprobs,
                                         .dout = io.d_output,
                                         .expert_out = b.expert_out,
                                         .probs = b.probs,
                                         .slot_to_row = b.slot_to_row,
                                         .row_to_slot = b.row_to_slot,
                                         .T = s.T,
                                         .k = s.k,
                                         .H = s.H,
                                         .rows = s.rows});
  // The four grouped GEMMs read the same counts: one setup launch for them all (kernels::GroupedGemmSetup; it
  // also zeroes the empty experts' dW when the wgrads overwrite, which nothing else writes until their GEMMs).
  const kernels::GroupedLinearBackwardInputParams fc2_dx{
      .dx = b.d_act, .dy = b.d_expert_out, .w = b.w_fc2, .counts = b.expert_rows, .offsets = b.offsets};
  const kernels::GroupedLinearBackwardWeightParams fc2_dw{.dw = b.g_fc2, .dy = b.d_expert_out, .x = b.act,
                                                          .counts = b.expert_rows, .offsets = b.offsets,
                                                          .accumulate = !io.first_microbatch};
  const kernels::GroupedLinearBackwardInputParams fc1_dx{
      .dx = b.d_permuted, .dy = b.d_fc1, .w = b.w_fc1, .counts = b.expert_rows, .offsets = b.offsets};
  const kernels::GroupedLinearBackwardWeightParams fc1_dw{.dw = b.g_fc1, .dy = b.d_fc1, .x = b.permuted,
                                                          .counts = b.expert_rows, .offsets = b.offsets,
                                                          .accumulate = !io.first_microbatch};
  kernels::GroupedGemmSetup()
      .add(*p.fc2_dx, fc2_dx)
      .add(*p.fc2_dw, fc2_dw)
      .add(*p.fc1_dx, fc1_dx)
      .add(*p.fc1_dw, fc1_dw)
      .launch(stream);
  p.fc2_dx->run_prepared(stream, fc2_dx);
  p.fc2_dw->run_prepared(stream, fc2_dw);
  fc2_bias_.backward(stream, b.d_expert_out, b.expert_rows, b.offsets);
  activation_backward(stream, {.activation = s.activation,
                               .din = b.d_fc1,
                               .dout = b.d_act,
                               .in = b.fc1_out,
                               .T = s.rows,
                               .F = s.F});
  fc1_bias_.backward(stream, b.d_fc1, b.expert_rows, b.offsets);
  p.fc1_dx->run_prepared(stream, fc1_dx);
  p.fc1_dw->run_prepared(stream, fc1_dw);
}

void MoeLayer::router_backward(cudaStream_t stream, const LayerIO& io) {
  const MoeShapes& s = shapes_;
  Buffers& b = *buf_;
  Plans& p = *plans_;
  kernels::moe_router_backward(stream, {.dlogits = b.dlogits,
                                        .dprobs = b.dprobs,
                                        .logits = b.logits,
                                        .routing_map = b.routing_map,
                                        .aux_counts = b.aux_counts,
                                        .routing = s.routing,
                                        .losses = s.losses,
                                        .loss_grad_scale = 1.0f / static_cast<float>(microbatches_)});
  // The fp32 gating linear's gradients, from its bf16 input and weight (fp32 products and sums).
  kernels::moe_gating_backward_input(
      stream, {.dx = io.d_input, .dlogits = b.dlogits, .w = b.w_router, .T = s.T, .E = s.E, .H = s.H});
  kernels::moe_gating_backward_weight(stream, {.dw = b.g_router, .dlogits = b.dlogits, .x = io.input, .T = s.T,
                                               .E = s.E, .H = s.H, .workspace = b.gating_ws,
                                               .workspace_bytes = p.gating_bytes});
  if (s.S > 0) {
    activation_backward(stream, {.activation = s.activation,
                                 .din = b.d_shared_fc1,
                                 .dout = b.d_shared_act,
                                 .in = b.shared_fc1,
                                 .T = s.T,
                                 .F = s.S});
    p.shared_fc1_dx->run(stream, io.d_input, b.d_shared_fc1, b.w_shared_fc1);
    p.shared_fc1_dw->run(stream, b.g_shared_fc1, b.d_shared_fc1, io.input, io.first_microbatch);
  }
  if (s.shared_gate) {  // the gate's share of d n, then its weight's gradient: sum_t d logit[t] n[t]
    kernels::moe_shared_gate_input_grad(
        stream, {.d_input = io.d_input, .d_logit = b.d_shared_gate, .weight = b.w_shared_gate, .T = s.T, .H = s.H});
    kernels::column_sums(stream, {.dst = b.g_shared_gate,
                                  .scratch = b.shared_gate_partials,
                                  .scratch_bytes = p.shared_gate_bytes,
                                  .in = io.input,
                                  .rows = s.T,
                                  .cols = s.H,
                                  .row_scale = b.d_shared_gate});
  }
}

void MoeLayer::step_begin(cudaStream_t stream) {
  SG_CUDA_CHECK(cudaMemsetAsync(buf_->step_counts, 0, sz(shapes_.E) * sizeof(int32_t), stream));
}

void MoeLayer::step_end(cudaStream_t stream) {
  Buffers& b = *buf_;
  SG_CUDA_CHECK(cudaMemcpyAsync(logged_counts_, b.step_counts, sz(shapes_.E) * sizeof(int32_t),
                                cudaMemcpyDeviceToDevice, stream));
  if (shapes_.expert_bias) {
    kernels::moe_expert_bias_update(stream, {.expert_bias = b.expert_bias,
                                             .step_counts = b.step_counts,
                                             .E = shapes_.E,
                                             .rate = shapes_.bias_update_rate});
  }
}

std::vector<std::vector<int32_t>> moe_step_token_counts(const std::vector<std::unique_ptr<Layer>>& layers,
                                                         cudaStream_t stream) {
  cuda::check_host_sync_allowed("moe_step_token_counts");
  std::vector<std::vector<int32_t>> out;
  for (const auto& layer : layers) {
    const auto* moe = dynamic_cast<const MoeLayer*>(layer.get());
    if (moe == nullptr) continue;
    std::vector<int32_t> counts(sz(moe->shapes().E));
    SG_CUDA_CHECK(cudaMemcpyAsync(counts.data(), moe->step_token_counts(), counts.size() * sizeof(int32_t),
                                  cudaMemcpyDeviceToHost, stream));
    SG_CUDA_CHECK(cudaStreamSynchronize(stream));
    out.push_back(std::move(counts));
  }
  return out;
}

}  // namespace sg::model
