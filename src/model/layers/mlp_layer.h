#pragma once
// '-': the dense MLP. On the normed input n, with ModelSpec::mlp_activation:
//   swiglu (Llama):              [gate, up] = n Wgate_up^T; act = silu(gate) * up; delta = act Wdown^T
//   squared_relu (Nemotron-H):   up = n Wup^T;             act = relu(up)^2;      delta = act Wdown^T
// with add_bias_linear (Llama's mlp_bias) a bias added to gate_up before the activation and to delta.
// Parameters: gate_proj, up_proj (one fused [2F, H] block; up_proj [F, H] alone when not gated),
// down_proj (output-projection init); with add_bias_linear their biases (gate_proj.bias and up_proj.bias one [2F]
// block, or up_proj.bias [F]; down_proj.bias [H]; zeros, no weight decay). No dropout inside (the output dropout is
// the step's). Module: mlp.
// Recompute: mlp gives back gate_up and the activation's output (rerun: the gate_up GEMM and the
// activation from the kept input n); full recompute reruns the down projection too (the next layer of
// the chunk reads it).
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/float_buffer.h"
#include "model/decode_layer.h"
#include "model/decode_linear.h"
#include "model/gpu_decode_layer.h"
#include "model/layer.h"
#include "model/linear_bias.h"

namespace sg::kernels {
class SwiGluBackwardGemm;
}  // namespace sg::kernels

namespace sg::model {

// The declarations the GPU layer and its CPU twin share.
struct MlpDeclarations {
  ParamRef gate_up, down_proj;  // gate_up: [gate; up] (gated) or up alone
  ParamRef gate_up_bias, down_proj_bias;  // add_bias_linear only
  void declare(LayerDeclarations& d);  // checks ffn_hidden_size
};

class MlpLayer final : public Layer {
 public:
  explicit MlpLayer(LayerPlace place);
  ~MlpLayer() override;
  static LayerRecompute recompute_support() { return {{RecomputeModule::mlp}, true}; }
  static LayerFlops flops_per_token(const ModelSpec& model);  // model/layer.h

  void declare(LayerDeclarations& d) override { decl_.declare(d); }
  void plan(LayerPlanContext& context) override;
  void plan_device(DevicePlanContext& context) override;
  void bind(LayerBindContext& context) override;
  std::vector<ParamRef> first_written_grads() const override { return {decl_.gate_up, decl_.down_proj}; }
  void forward(graph::Module module, cudaStream_t stream, const LayerIO& io) override;
  void backward(graph::Module module, cudaStream_t stream, const LayerIO& io) override;
  void recompute(graph::Module module, cudaStream_t stream, const LayerIO& io) override;

 private:
  struct Gemms;  // mlp_layer.cpp
  void activations_forward(cudaStream_t stream, const LayerIO& io);  // gate_up and the activation
  // d_gate_up from io.d_output in two steps: the down projection's input gradient to d_act_, then the activation's
  // backward; and the down projection's weight gradient.
  void backward_unfused(cudaStream_t stream, const LayerIO& io);

  MlpDeclarations decl_;
  bool full_recompute_ = false;
  int64_t T_ = 0, H_ = 0, F_ = 0, N_ = 0;  // N_: activation_input_width(F_)
  MlpActivation activation_ = MlpActivation::swiglu;
  cuda::MemorySlot gate_up_slot_, act_slot_;
  SharedBufferRef d_gate_up_ref_, d_act_ref_;
  std::unique_ptr<Gemms> gemms_;
  // SwiGLU's backward in the down projection's input-gradient GEMM, where it pays (kernels/swiglu_backward_gemm.h);
  // null: cuBLASLt's GEMM to d_act_, then kernels::swiglu_backward.
  std::unique_ptr<kernels::SwiGluBackwardGemm> swiglu_backward_gemm_;

  bf16* gate_up_ = nullptr;  // [T, N]
  bf16* act_ = nullptr;      // [T, F] silu(gate) * up, or relu(up)^2
  bf16* d_gate_up_ = nullptr;
  bf16* d_act_ = nullptr;
  const bf16* w_gate_up_ = nullptr;
  const bf16* w_down_ = nullptr;
  kernels::FloatBuffer g_gate_up_;
  kernels::FloatBuffer g_down_;
  LinearBias gate_up_bias_, down_bias_;  // model/linear_bias.h (absent without add_bias_linear)
};

class MlpLayerCpu final : public CpuLayer {
 public:
  using CpuLayer::CpuLayer;
  static CpuLayerFootprint host_footprint(const ModelSpec& model, const BatchSpec& batch);  // model/layer.h

  void declare(LayerDeclarations& d) override { decl_.declare(d); }
  void plan(const ModelSpec& model, const BatchSpec& batch) override;
  void forward(const CpuLayerIO& io) override;
  void backward(const CpuLayerIO& io) override;

 private:
  MlpDeclarations decl_;
  int64_t T_ = 0, H_ = 0, F_ = 0, N_ = 0;
  MlpActivation activation_ = MlpActivation::swiglu;
  std::vector<float> gate_up_, act_;   // saved
  std::vector<float> d_gate_up_, d_act_;  // scratch
};

// The decoding twin (model/decode_layer.h): each row alone, no state.
class MlpDecodeCpu final : public CpuDecodeLayer {
 public:
  using CpuDecodeLayer::CpuDecodeLayer;

  void declare(LayerDeclarations& d) override { decl_.declare(d); }
  void plan(const ModelSpec& model, const DecodeSpec& decode) override;
  void forward(const CpuDecodeIO& io) override;

 private:
  MlpDeclarations decl_;
  int64_t H_ = 0, F_ = 0, N_ = 0;
  MlpActivation activation_ = MlpActivation::swiglu;
  std::vector<float> gate_up_, act_;  // scratch
};

// The GPU decoding twin (model/gpu_decode_layer.h): each row alone, no state.
class MlpDecodeGpu final : public GpuDecodeLayer {
 public:
  using GpuDecodeLayer::GpuDecodeLayer;

  void declare(LayerDeclarations& d) override { decl_.declare(d); }
  void plan(const ModelSpec& model, const DecodeSpec& decode, cuda::MemoryPlan& memory) override;
  void take_scratch(DecodeScratch& scratch) override;
  void bind(const cuda::Arena& arena, kernels::Blas& blas) override;
  void forward(cudaStream_t stream, const GpuDecodeIO& io) override;

 private:
  MlpDeclarations decl_;
  int64_t rows_ = 0, batch_ = 0;
  DecodeLinear fc1_, fc2_;                    // fc1 with the activation
  bf16 *gate_up_ = nullptr, *act_ = nullptr;  // scratch (gate_up_: cuBLASLt's path only)
};

}  // namespace sg::model
