// The MoE layer's GPU decoding twin (model/gpu_decode_layer.h): the training forward's kernels (router,
// dispatch, grouped GEMMs, combine, shared expert; moe_layer.cpp) on a call's rows, with no capacity
// (nothing is dropped: a decoding row is not a training microbatch, as the CPU twin), no auxiliary loss and
// no token count.
#include "core/error.h"
#include "core/strings.h"
#include "kernels/gemm.h"
#include "kernels/grouped_gemm.h"
#include "kernels/grouped_linear_bias.h"
#include "kernels/moe_combine.h"
#include "kernels/moe_permute.h"
#include "kernels/moe_router.h"
#include "kernels/moe_shared_gate.h"
#include "model/layers/moe_layer.h"

namespace sg::model {

namespace {

// The shapes of one call of T rows: every token to its top-k experts.
MoeShapes dropless_shapes(const ModelSpec& model, int64_t T) {
  MoeShapes s = moe_shapes(model, T);
  s.dispatch.capacity = 0;
  s.dispatch.pad_to_capacity = false;
  s.rows = s.dispatch.permuted_rows();
  return s;
}

}  // namespace

MoeDecodeGpu::MoeDecodeGpu(LayerPlace place) : GpuDecodeLayer(std::move(place)) {}
MoeDecodeGpu::~MoeDecodeGpu() = default;

void MoeDecodeGpu::declare(LayerDeclarations& d) {
  decl_.declare(d);
  bias_routes_ = d.model.moe.enable_expert_bias;
}

// Asked before plan(): what declare() saw.
std::vector<ParamRef> MoeDecodeGpu::fp32_params() const {
  if (bias_routes_) return {decl_.expert_bias};
  return {};
}

void MoeDecodeGpu::plan(const ModelSpec& model, const DecodeSpec& decode, cuda::MemoryPlan& memory) {
  model_ = model;
  batch_ = decode.batch;
  most_ = dropless_shapes(model, decode.max_rows());
  const MoeShapes& s = most_;
  const auto grouped = [&](int64_t N, int64_t K) {
    return std::make_unique<kernels::GroupedLinearForward>(
        kernels::GroupedGemmDims{.num_groups = static_cast<int>(s.E), .max_total_rows = s.rows, .N = N, .K = K});
  };
  fc1_ = grouped(s.fc1_width(), s.H);
  if (s.S > 0) shared_fc1_proj_ = DecodeLinear(s.H, s.shared_fc1_width(), s.activation, decode.gemv);
  fc2_ = grouped(s.H, s.F);
  const std::string prefix = strprintf("decode.layer%d.", index());
  fc1_ws_ = memory.add(prefix + "grouped_fc1", cuda::MemoryCategory::workspaces, fc1_->workspace_bytes());
  fc2_ws_ = memory.add(prefix + "grouped_fc2", cuda::MemoryCategory::workspaces, fc2_->workspace_bytes());
  preprocess_bytes_ = kernels::moe_preprocess_workspace_bytes(s.dispatch);
}

void MoeDecodeGpu::take_scratch(DecodeScratch& scratch) {
  const MoeShapes& s = most_;
  const int64_t Tk = s.T * s.k;
  logits_ = scratch.take<float>(s.T * s.E);
  routing_map_ = scratch.take<int32_t>(Tk);
  probs_ = scratch.take<float>(Tk);
  expert_counts_ = scratch.take<int32_t>(s.E);
  kept_counts_ = scratch.take<int32_t>(s.E);
  expert_rows_ = scratch.take<int32_t>(s.E);
  offsets_ = scratch.take<int32_t>(s.E + 1);
  slot_to_row_ = scratch.take<int32_t>(Tk);
  row_to_slot_ = scratch.take<int32_t>(s.rows);
  preprocess_ws_ = scratch.take<char>(static_cast<int64_t>(preprocess_bytes_));
  permuted_ = scratch.take<bf16>(s.rows * s.H);
  fc1_out_ = scratch.take<bf16>(s.rows * s.fc1_width());
  act_ = scratch.take<bf16>(s.rows * s.F);
  expert_out_ = scratch.take<bf16>(s.rows * s.H);
  if (s.S > 0) {
    shared_fc1_ = scratch.take<bf16>(s.T * s.shared_fc1_width());
    shared_act_ = scratch.take<bf16>(s.T * s.S);
  }
  if (s.shared_gate) {
    shared_out_ = scratch.take<bf16>(s.T * s.H);
    shared_gate_ = scratch.take<float>(s.T);
  }
}

void MoeDecodeGpu::bind(const cuda::Arena& arena, kernels::Blas& blas) {
  fc1_->bind(arena.raw(fc1_ws_), fc1_->workspace_bytes());
  fc1_->initialize();
  fc2_->bind(arena.raw(fc2_ws_), fc2_->workspace_bytes());
  fc2_->initialize();
  const MoeShapes step = dropless_shapes(model_, batch_);
  blas.plan(moe_gate_forward_desc(step));
  if (step.S > 0) {
    shared_fc1_proj_.prepare(blas, step.T);
    if (step.shared_gate) {
      kernels::LinearForward(blas, step.T, step.S, step.H);  // plans the ungated FC2 for a decoding step's rows
    } else {
      blas.plan(moe_shared_down_accumulate_desc(step));
    }
  }
}

void MoeDecodeGpu::forward(cudaStream_t stream, const GpuDecodeIO& io) {
  const MoeShapes s = dropless_shapes(model_, io.rows.T);
  io.blas.plan(moe_gate_forward_desc(s)).run(stream, io.weight(decl_.router), io.input, logits_);
  kernels::moe_router_forward(stream, {.logits = logits_,
                                       .expert_bias = s.expert_bias ? io.fp32_weight(decl_.expert_bias) : nullptr,
                                       .routing_map = routing_map_,
                                       .probs = probs_,
                                       .routing = s.routing});
  kernels::moe_count_experts(
      stream, {.routing_map = routing_map_, .counts = expert_counts_, .T = s.T, .E = s.E, .k = s.k, .group_tokens = 0});
  kernels::moe_preprocess(stream, {.routing_map = routing_map_,
                                   .probs = probs_,
                                   .expert_counts = expert_counts_,
                                   .dispatch = s.dispatch,
                                   .workspace = preprocess_ws_,
                                   .workspace_bytes = preprocess_bytes_,
                                   .kept_counts = kept_counts_,
                                   .expert_rows = expert_rows_,
                                   .expert_row_offsets = offsets_,
                                   .slot_to_row = slot_to_row_,
                                   .row_to_slot = row_to_slot_});
  kernels::moe_permute_forward(
      stream,
      {.permuted = permuted_, .hidden = io.input, .row_to_slot = row_to_slot_, .rows = s.rows, .k = s.k, .H = s.H});
  const kernels::GroupedLinearForwardParams fc1{
      .y = fc1_out_, .x = permuted_, .w = io.weight(decl_.fc1), .counts = expert_rows_, .offsets = offsets_};
  const kernels::GroupedLinearForwardParams fc2{
      .y = expert_out_, .x = act_, .w = io.weight(decl_.fc2), .counts = expert_rows_, .offsets = offsets_};
  kernels::GroupedGemmSetup().add(*fc1_, fc1).add(*fc2_, fc2).launch(stream);
  fc1_->run_prepared(stream, fc1);
  // With add_bias_linear each expert's biases join its rows (kernels/grouped_linear_bias.h), FC2's before the combine.
  const auto add_biases = [&](bf16* y, ParamRef bias, int64_t cols) {
    if (!bias.valid()) return;
    kernels::grouped_bias_forward(stream, {.y = y,
                                           .bias = io.weight(bias),
                                           .counts = expert_rows_,
                                           .offsets = offsets_,
                                           .num_groups = static_cast<int>(s.E),
                                           .max_rows = s.rows,
                                           .cols = cols});
  };
  add_biases(fc1_out_, decl_.fc1_bias, s.fc1_width());
  activation_forward(stream, {.activation = s.activation, .out = act_, .in = fc1_out_, .T = s.rows, .F = s.F});
  fc2_->run_prepared(stream, fc2);
  add_biases(expert_out_, decl_.fc2_bias, s.H);
  kernels::moe_combine_forward(stream, {.out = io.output,
                                        .expert_out = expert_out_,
                                        .probs = probs_,
                                        .slot_to_row = slot_to_row_,
                                        .T = s.T,
                                        .k = s.k,
                                        .H = s.H});
  if (s.S > 0) {
    shared_fc1_proj_.run(stream, io.blas, s.T, shared_act_, io.input, io.weight(decl_.shared_fc1), shared_fc1_);
    if (s.shared_gate) {  // out += sigmoid(n w) * the shared expert's output
      kernels::LinearForward(io.blas, s.T, s.S, s.H)
          .run(stream, shared_out_, shared_act_, io.weight(decl_.shared_down));
      kernels::moe_shared_gate_forward(stream, {.out = io.output,
                                                .gate = shared_gate_,
                                                .shared = shared_out_,
                                                .input = io.input,
                                                .weight = io.weight(decl_.shared_gate),
                                                .T = s.T,
                                                .H = s.H});
    } else {
      io.blas.plan(moe_shared_down_accumulate_desc(s))
          .run(stream, io.weight(decl_.shared_down), shared_act_, io.output);
    }
  }
}

}  // namespace sg::model
