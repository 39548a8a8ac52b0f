// The MLP layer's CPU fp32 twin (the declarations and the GPU side: mlp_layer.cpp).
#include "model/layers/mlp_layer.h"
#include "model/mlp_activation.h"
#include "reference/column_sums.h"
#include "reference/linear.h"

namespace sg::model {

namespace {
size_t sz(int64_t n) { return static_cast<size_t>(n); }
}  // namespace

CpuLayerFootprint MlpLayerCpu::host_footprint(const ModelSpec& m, const BatchSpec& b) {
  const double H = static_cast<double>(m.hidden_size), F = static_cast<double>(m.ffn_hidden_size);
  const double T = static_cast<double>(b.micro_batch_size) * static_cast<double>(m.seq_length);
  // gate_up (up alone when not gated) and the activation's output; scratch: their gradients. add_bias_linear: the
  // biases of both linears.
  const double up = static_cast<double>(activation_input_width(m.mlp_activation, 1));
  const double biases = m.add_bias_linear ? up * F + H : 0.0;
  return {.params = (up + 1.0) * F * H + biases, .saved = (up + 1.0) * T * F, .scratch = (up + 1.0) * T * F};
}

void MlpLayerCpu::plan(const ModelSpec& model, const BatchSpec& batch) {
  T_ = batch.tokens_per_microbatch(model);
  H_ = model.hidden_size;
  F_ = model.ffn_hidden_size;
  activation_ = model.mlp_activation;
  N_ = activation_input_width(activation_, F_);
  gate_up_.resize(sz(T_ * N_));
  act_.resize(sz(T_ * F_));
  d_gate_up_.resize(sz(T_ * N_));
  d_act_.resize(sz(T_ * F_));
}

void MlpLayerCpu::forward(const CpuLayerIO& io) {
  ref::linear_forward(gate_up_.data(), io.input, io.weight(decl_.gate_up), T_, H_, N_);
  ref::add_row_bias(gate_up_.data(), io.optional_weight(decl_.gate_up_bias), T_, N_);
  activation_forward({.activation = activation_, .out = act_.data(), .in = gate_up_.data(), .T = T_, .F = F_});
  ref::linear_forward(io.output, act_.data(), io.weight(decl_.down_proj), T_, F_, H_);
  ref::add_row_bias(io.output, io.optional_weight(decl_.down_proj_bias), T_, H_);
}

void MlpLayerCpu::backward(const CpuLayerIO& io) {
  ref::linear_backward_input(d_act_.data(), io.d_output, io.weight(decl_.down_proj), T_, F_, H_);
  ref::linear_backward_weight(io.grad(decl_.down_proj), io.d_output, act_.data(), T_, F_, H_);
  if (decl_.down_proj_bias.valid()) ref::column_sums(io.grad(decl_.down_proj_bias), io.d_output, T_, H_, H_);
  activation_backward({.activation = activation_,
                       .din = d_gate_up_.data(),
                       .dout = d_act_.data(),
                       .in = gate_up_.data(),
                       .T = T_,
                       .F = F_});
  ref::linear_backward_input(io.d_input, d_gate_up_.data(), io.weight(decl_.gate_up), T_, H_, N_);
  ref::linear_backward_weight(io.grad(decl_.gate_up), d_gate_up_.data(), io.input, T_, H_, N_);
  if (decl_.gate_up_bias.valid()) ref::column_sums(io.grad(decl_.gate_up_bias), d_gate_up_.data(), T_, N_, N_);
}

void MlpDecodeCpu::plan(const ModelSpec& model, const DecodeSpec& decode) {
  const int64_t rows = decode.max_rows();
  H_ = model.hidden_size;
  F_ = model.ffn_hidden_size;
  activation_ = model.mlp_activation;
  N_ = activation_input_width(activation_, F_);
  gate_up_.resize(sz(rows * N_));
  act_.resize(sz(rows * F_));
}

void MlpDecodeCpu::forward(const CpuDecodeIO& io) {
  const int64_t T = io.rows.T;
  ref::linear_forward(gate_up_.data(), io.input, io.weight(decl_.gate_up), T, H_, N_);
  ref::add_row_bias(gate_up_.data(), io.optional_weight(decl_.gate_up_bias), T, N_);
  activation_forward({.activation = activation_, .out = act_.data(), .in = gate_up_.data(), .T = T, .F = F_});
  ref::linear_forward(io.output, act_.data(), io.weight(decl_.down_proj), T, F_, H_);
  ref::add_row_bias(io.output, io.optional_weight(decl_.down_proj_bias), T, H_);
}

}  // namespace sg::model
