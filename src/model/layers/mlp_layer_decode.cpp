// The dense MLP's GPU decoding twin (model/gpu_decode_layer.h): each row alone, as the CPU twin
// (mlp_layer_cpu.cpp), with the training step's GEMMs and activation kernel.
#include "kernels/gemm.h"
#include "model/layers/mlp_layer.h"
#include "model/mlp_activation.h"

namespace sg::model {

void MlpDecodeGpu::plan(const ModelSpec& model, const DecodeSpec& decode, cuda::MemoryPlan& /*memory*/) {
  rows_ = decode.max_rows();
  batch_ = decode.batch;
  H_ = model.hidden_size;
  F_ = model.ffn_hidden_size;
  activation_ = model.mlp_activation;
  N_ = activation_input_width(activation_, F_);
}

void MlpDecodeGpu::take_scratch(DecodeScratch& scratch) {
  gate_up_ = scratch.take<bf16>(rows_ * N_);
  act_ = scratch.take<bf16>(rows_ * F_);
}

void MlpDecodeGpu::bind(const cuda::Arena& /*arena*/, kernels::Blas& blas) {
  kernels::LinearForward(blas, batch_, H_, N_);
  kernels::LinearForward(blas, batch_, F_, H_);
}

void MlpDecodeGpu::forward(cudaStream_t stream, const GpuDecodeIO& io) {
  const int64_t T = io.rows.T;
  kernels::LinearForward(io.blas, T, H_, N_).run(stream, gate_up_, io.input, io.weight(decl_.gate_up));
  activation_forward(stream, {.activation = activation_, .out = act_, .in = gate_up_, .T = T, .F = F_});
  kernels::LinearForward(io.blas, T, F_, H_).run(stream, io.output, act_, io.weight(decl_.down_proj));
}

}  // namespace sg::model
