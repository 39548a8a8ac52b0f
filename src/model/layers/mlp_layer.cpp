// The MLP layer's declarations and its GPU side (the CPU twin: mlp_layer_cpu.cpp).
#include "model/layers/mlp_layer.h"

#include "core/error.h"
#include "core/strings.h"
#include "kernels/gemm.h"
#include "kernels/swiglu_backward_gemm.h"
#include "model/mlp_activation.h"

namespace sg::model {

namespace {
size_t sz(int64_t n) { return static_cast<size_t>(n); }
}  // namespace

void MlpDeclarations::declare(LayerDeclarations& d) {
  const ModelSpec& s = d.model;
  SG_CHECK(s.ffn_hidden_size > 0,
           strprintf("model.ffn_hidden_size = %lld: must be positive", static_cast<long long>(s.ffn_hidden_size)));
  const int64_t H = s.hidden_size, F = s.ffn_hidden_size;
  const std::string& p = d.place.param_prefix;
  if (s.mlp_activation == MlpActivation::swiglu) {
    gate_up = d.params.matrix({{p + "gate_proj.weight", {F, H}}, {p + "up_proj.weight", {F, H}}});
  } else {
    gate_up = d.params.matrix(p + "up_proj.weight", {F, H});
  }
  down_proj = d.params.matrix(p + "down_proj.weight", {H, F}, ParamInit::output_projection);
  if (s.add_bias_linear) {
    if (s.mlp_activation == MlpActivation::swiglu) {
      gate_up_bias =
          d.params.vector({{p + "gate_proj.bias", {F}, ParamInit::zeros}, {p + "up_proj.bias", {F}, ParamInit::zeros}});
    } else {
      gate_up_bias = d.params.vector(p + "up_proj.bias", {F}, ParamInit::zeros);
    }
    down_proj_bias = d.params.vector(p + "down_proj.bias", {H}, ParamInit::zeros);
  }
}

LayerFlops MlpLayer::flops_per_token(const ModelSpec& m) {
  // The first linear's columns per unit width (2 gated, 1 not) and the down projection's.
  const double linears = static_cast<double>(activation_input_width(m.mlp_activation, 1)) + 1.0;
  return {.matmul_weights = linears * static_cast<double>(m.hidden_size) * static_cast<double>(m.ffn_hidden_size)};
}

// The GEMMs of one MLP layer; their cuBLASLt plans are cached in the step's Blas.
struct MlpLayer::Gemms {
  kernels::LinearForward gate_up, down;
  kernels::LinearBackwardInput gate_up_dx, down_dx;
  kernels::LinearBackwardWeight gate_up_dw, down_dw;
  Gemms(kernels::Blas& b, int64_t T, int64_t H, int64_t F, int64_t N, bool biases, kernels::FloatDtype grad_dtype)
      : gate_up(b, T, H, N, biases),
        down(b, T, F, H, biases),
        gate_up_dx(b, T, H, N),
        down_dx(b, T, F, H),
        gate_up_dw(b, T, H, N, grad_dtype),
        down_dw(b, T, F, H, grad_dtype) {}
};

MlpLayer::MlpLayer(LayerPlace place) : Layer(std::move(place)) {}
MlpLayer::~MlpLayer() = default;

void MlpLayer::plan(LayerPlanContext& ctx) {
  T_ = ctx.tokens();
  H_ = ctx.model().hidden_size;
  F_ = ctx.model().ffn_hidden_size;
  full_recompute_ = ctx.full_recompute();
  activation_ = ctx.model().mlp_activation;
  N_ = activation_input_width(activation_, F_);
  gate_up_slot_ = ctx.saved_array<bf16>(graph::Module::mlp, "gate_up", sz(T_ * N_), RecomputeModule::mlp);
  act_slot_ = ctx.saved_array<bf16>(graph::Module::mlp, "swiglu_out", sz(T_ * F_), RecomputeModule::mlp);
  d_gate_up_ref_ = ctx.scratch("grad.d_gate_up", sz(T_ * N_) * sizeof(bf16));
  d_act_ref_ = ctx.scratch("grad.d_act", sz(T_ * F_) * sizeof(bf16));
}

void MlpLayer::plan_device(DevicePlanContext& ctx) {
  gate_up_bias_.plan_device(ctx, ctx.model().add_bias_linear, T_, N_);
  down_bias_.plan_device(ctx, ctx.model().add_bias_linear, T_, H_);
}

void MlpLayer::bind(LayerBindContext& ctx) {
  gate_up_ = ctx.get<bf16>(gate_up_slot_);
  act_ = ctx.get<bf16>(act_slot_);
  d_gate_up_ = ctx.get<bf16>(d_gate_up_ref_);
  d_act_ = ctx.get<bf16>(d_act_ref_);
  w_gate_up_ = ctx.weight(decl_.gate_up);
  w_down_ = ctx.weight(decl_.down_proj);
  g_gate_up_ = ctx.grad(decl_.gate_up);
  g_down_ = ctx.grad(decl_.down_proj);
  gate_up_bias_.bind(ctx, decl_.gate_up_bias);
  down_bias_.bind(ctx, decl_.down_proj_bias);
  gemms_ = std::make_unique<Gemms>(ctx.blas(), T_, H_, F_, N_, gate_up_bias_.present(), ctx.grad_dtype());
  swiglu_backward_gemm_.reset();
  if (activation_ == MlpActivation::swiglu && kernels::swiglu_backward_gemm_preferred(T_, H_, F_)) {
    swiglu_backward_gemm_ = std::make_unique<kernels::SwiGluBackwardGemm>(T_, H_, F_);
  }
}

void MlpLayer::activations_forward(cudaStream_t stream, const LayerIO& io) {
  gemms_->gate_up.run(stream, gate_up_, io.input, w_gate_up_, gate_up_bias_.weight());
  activation_forward(stream, {.activation = activation_, .out = act_, .in = gate_up_, .T = T_, .F = F_});
}

void MlpLayer::forward(graph::Module /*module: mlp*/, cudaStream_t stream, const LayerIO& io) {
  activations_forward(stream, io);
  gemms_->down.run(stream, io.output, act_, w_down_, down_bias_.weight());
}

void MlpLayer::recompute(graph::Module module, cudaStream_t stream, const LayerIO& io) {
  if (full_recompute_) {
    forward(module, stream, io);
  } else {
    activations_forward(stream, io);  // the output is not needed: the step adds it only in the forward
  }
}

void MlpLayer::backward(graph::Module /*module: mlp*/, cudaStream_t stream, const LayerIO& io) {
  if (swiglu_backward_gemm_) {  // d_gate_up in one kernel: the dh of the unfused path stays in registers
    swiglu_backward_gemm_->run(stream,
                               {.d_gate_up = d_gate_up_, .dy = io.d_output, .w_down = w_down_, .gate_up = gate_up_});
    gemms_->down_dw.run(stream, g_down_, io.d_output, act_, io.first_microbatch);
  } else {
    backward_unfused(stream, io);
  }
  down_bias_.backward(stream, io.d_output);
  gemms_->gate_up_dx.run(stream, io.d_input, d_gate_up_, w_gate_up_);
  gemms_->gate_up_dw.run(stream, g_gate_up_, d_gate_up_, io.input, io.first_microbatch);
  gate_up_bias_.backward(stream, d_gate_up_);
}

void MlpLayer::backward_unfused(cudaStream_t stream, const LayerIO& io) {
  gemms_->down_dx.run(stream, d_act_, io.d_output, w_down_);
  gemms_->down_dw.run(stream, g_down_, io.d_output, act_, io.first_microbatch);
  activation_backward(stream,
                      {.activation = activation_, .din = d_gate_up_, .dout = d_act_, .in = gate_up_, .T = T_, .F = F_});
}

}  // namespace sg::model
