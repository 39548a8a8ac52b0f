// The dense MLP's GPU decoding twin (model/gpu_decode_layer.h): each row alone, as the CPU twin
// (mlp_layer_cpu.cpp). A decoding step's fc1 and activation are one matrix-vector launch (model/decode_linear.h).
#include "model/layers/mlp_layer.h"
#include "model/mlp_activation.h"

namespace sg::model {

void MlpDecodeGpu::plan(const ModelSpec& model, const DecodeSpec& decode, cuda::MemoryPlan& /*memory*/) {
  rows_ = decode.max_rows();
  batch_ = decode.batch;
  const int64_t H = model.hidden_size, F = model.ffn_hidden_size;
  fc1_ = DecodeLinear(H, activation_input_width(model.mlp_activation, F), model.mlp_activation, decode.gemv,
                      model.add_bias_linear);
  fc2_ = DecodeLinear(F, H, std::nullopt, decode.gemv, model.add_bias_linear);
}

void MlpDecodeGpu::take_scratch(DecodeScratch& scratch) {
  gate_up_ = fc1_.runs_gemm(rows_) ? scratch.take<bf16>(rows_ * fc1_.weight_rows()) : nullptr;
  act_ = scratch.take<bf16>(rows_ * fc1_.out_width());
}

void MlpDecodeGpu::bind(const cuda::Arena& /*arena*/, kernels::Blas& blas) {
  fc1_.prepare(blas, batch_);
  fc2_.prepare(blas, batch_);
}

void MlpDecodeGpu::forward(cudaStream_t stream, const GpuDecodeIO& io) {
  const int64_t T = io.rows.T;
  fc1_.run(stream, io.blas, T, act_, io.input, io.weight(decl_.gate_up), gate_up_,
           io.optional_weight(decl_.gate_up_bias));
  fc2_.run(stream, io.blas, T, io.output, act_, io.weight(decl_.down_proj), nullptr,
           io.optional_weight(decl_.down_proj_bias));
}

}  // namespace sg::model
