#pragma once
// 'M': the Mamba2 mixer (Megatron's MambaMixer, Hugging Face's NemotronHMamba2Mixer). On the normed
// input n [T, H], with d = d_inner = heads * head_dim, xBC = d + 2 groups * state channels:
//   zxbcdt = n Win^T                                   [T, d | xBC | heads]  (one GEMM)
//   xbc    = silu(causal_conv1d_4(xBC) + conv_bias)    x [T, heads, head_dim], B, C [T, groups, state]
//   dt     = clamp(softplus(dt_raw + dt_bias), dt_limit);  A = -exp(A_log)
//   y      = SSD scan(x, dt, A, B, C) + D x            (kernels/ssd_scan.h)
//   g      = gated grouped RMSNorm(y * silu(z)) * norm_weight   (norm after the gate)
//   delta  = g Wout^T
// Parameters (NemotronH names under backbone.layers.i.mixer.): in_proj.weight [P, H], conv1d.weight
// [xBC, 1, 4], out_proj.weight [H, d] (output-projection init) with weight decay; conv1d.bias [xBC],
// dt_bias, A_log, D [heads], norm.weight [d] without. Megatron's init (reference/mamba_init.h).
// dt_bias, A_log and D are read in fp32 (the master weights); the rest in bf16. No dropout inside.
// Module: mamba. Recompute: mamba gives back every saved activation (the mixer reruns from the kept n, up
// to the gated norm); full recompute reruns out_proj too (the next layer of the chunk reads it).
// Every weight gradient is a fixed-order reduction (no float atomics).
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/float_buffer.h"
#include "model/decode_layer.h"
#include "model/decode_linear.h"
#include "model/gpu_decode_layer.h"
#include "model/layer.h"

namespace sg::model {

// The declarations the GPU layer and its CPU twin share.
struct MambaDeclarations {
  ParamRef in_proj, conv_weight, out_proj;
  ParamRef conv_bias, dt_bias, A_log, D, norm;
  void declare(LayerDeclarations& d);  // checks the Mamba shapes (naming the model.mamba_* keys)
};

// The widths of one mixer (ModelSpec's mamba_* helpers, as plain numbers).
struct MambaDims {
  int64_t T = 0, H = 0;  // tokens of a microbatch, hidden size
  int64_t batch = 0, seq = 0;
  int64_t heads = 0, head_dim = 0, groups = 0, state = 0;
  int64_t inner = 0, conv = 0, in_proj = 0;  // d, xBC channels, [z | xBC | dt]
  static MambaDims of(const ModelSpec& m, const BatchSpec& b);
};

class MambaLayer final : public Layer {
 public:
  explicit MambaLayer(LayerPlace place);
  ~MambaLayer() override;
  static LayerRecompute recompute_support() { return {{RecomputeModule::mamba}, true}; }
  static LayerFlops flops_per_token(const ModelSpec& model);  // model/layer.h

  void declare(LayerDeclarations& d) override { decl_.declare(d); }
  void plan(LayerPlanContext& context) override;
  void plan_device(DevicePlanContext& context) override;
  void bind(LayerBindContext& context) override;
  // The projections' wgrad GEMMs; the conv, norm and per-head gradients come from reductions that add.
  std::vector<ParamRef> first_written_grads() const override { return {decl_.in_proj, decl_.out_proj}; }
  void forward(graph::Module module, cudaStream_t stream, const LayerIO& io) override;
  void backward(graph::Module module, cudaStream_t stream, const LayerIO& io) override;
  void recompute(graph::Module module, cudaStream_t stream, const LayerIO& io) override;

 private:
  struct Gemms;  // mamba_layer.cpp
  void mixer_forward(cudaStream_t stream, const LayerIO& io);  // everything up to out_proj's input
  // The scan's inputs, shape and workspace, common to its forward and backward parameters.
  struct ScanInputs;  // mamba_layer.cpp
  ScanInputs scan_inputs() const;

  MambaDeclarations decl_;
  MambaDims dims_;
  ModelSpec model_;
  bool full_recompute_ = false;
  cuda::MemorySlot zxbcdt_slot_, xbc_slot_, dt_slot_, A_slot_, y_slot_, normed_slot_, rstd_slot_;
  SharedBufferRef d_normed_ref_, d_xbc_ref_, d_zxbcdt_ref_, ddt_ref_, dA_dD_ref_;
  SharedBufferRef ssd_ws_ref_, conv_ws_ref_, dt_ws_ref_, norm_ws_ref_;
  size_t ssd_ws_bytes_ = 0, conv_ws_bytes_ = 0, dt_ws_bytes_ = 0, norm_ws_bytes_ = 0;
  std::unique_ptr<Gemms> gemms_;

  // Saved for the backward (one microbatch).
  bf16* zxbcdt_ = nullptr;  // [T, in_proj]
  bf16* xbc_ = nullptr;     // [T, conv] after conv + SiLU
  float* dt_ = nullptr;     // [T, heads]
  float* A_ = nullptr;      // [heads]
  bf16* y_ = nullptr;       // [T, inner] scan output
  bf16* normed_ = nullptr;  // [T, inner] gated norm output (out_proj input)
  float* rstd_ = nullptr;   // [T, groups]
  // Scratch.
  bf16* d_normed_ = nullptr;  // [T, inner]; also dy (the gated norm's backward may alias them)
  bf16* d_xbc_ = nullptr;     // [T, conv]
  bf16* d_zxbcdt_ = nullptr;  // [T, in_proj]
  float* ddt_ = nullptr;      // [T, heads]
  float* dA_ = nullptr;       // [heads]
  float* dD_ = nullptr;       // [heads]
  void* ssd_ws_ = nullptr;
  float* conv_ws_ = nullptr;
  float* dt_ws_ = nullptr;
  float* norm_ws_ = nullptr;
  // Parameters.
  const bf16 *w_in_ = nullptr, *w_conv_ = nullptr, *b_conv_ = nullptr, *w_norm_ = nullptr, *w_out_ = nullptr;
  const float *dt_bias_ = nullptr, *A_log_ = nullptr, *D_ = nullptr;  // fp32 master weights
  kernels::FloatBuffer g_in_, g_conv_, g_conv_bias_, g_norm_, g_out_;  // main_grad, fp32 or bf16
  kernels::FloatBuffer g_dt_bias_, g_A_log_, g_D_;
};

class MambaLayerCpu final : public CpuLayer {
 public:
  using CpuLayer::CpuLayer;
  static CpuLayerFootprint host_footprint(const ModelSpec& model, const BatchSpec& batch);  // model/layer.h

  void declare(LayerDeclarations& d) override { decl_.declare(d); }
  void plan(const ModelSpec& model, const BatchSpec& batch) override;
  void forward(const CpuLayerIO& io) override;
  void backward(const CpuLayerIO& io) override;

 private:
  MambaDeclarations decl_;
  MambaDims dims_;
  ModelSpec model_;
  // Saved (x, B, C: the conv output's column slices, contiguous for the reference scan).
  std::vector<float> zxbcdt_, xbc_, x_, Bm_, Cm_, dt_, A_, y_, normed_, rstd_;
  // Scratch.
  std::vector<float> d_normed_, d_y_, d_x_, d_Bm_, d_Cm_, d_xbc_, d_zxbcdt_, ddt_, dA_, dD_;
};

// The decoding twin (model/decode_layer.h): the mixer continued from each sequence's kept state, the last
// 3 conv inputs and the SSM state (ref::causal_conv1d_silu_forward_continued, ref::ssd_scan_forward_continued:
// the training twin's arithmetic, so a prompt and its tokens one at a time give the full sequence's rows).
class MambaDecodeCpu final : public CpuDecodeLayer {
 public:
  using CpuDecodeLayer::CpuDecodeLayer;
  static double state_bytes(const ModelSpec& model, const DecodeSpec& decode);  // conv and SSM states

  void declare(LayerDeclarations& d) override { decl_.declare(d); }
  void plan(const ModelSpec& model, const DecodeSpec& decode) override;
  void reset() override;
  void forward(const CpuDecodeIO& io) override;

 private:
  MambaDeclarations decl_;
  MambaDims dims_;  // T: the most rows a call has
  ModelSpec model_;
  std::vector<float> conv_state_;  // [slots, conv, 3]
  std::vector<float> ssm_state_;   // [slots, heads, head_dim, state]
  // Scratch.
  std::vector<float> zxbcdt_, xbc_, x_, Bm_, Cm_, dt_, A_, y_, normed_, rstd_;
};

// The GPU decoding twin (model/gpu_decode_layer.h): the same kept states (the conv's last 3 inputs in bf16, as
// its inputs are; the SSM state in fp32), continued by kernels/mamba_decode.h.
class MambaDecodeGpu final : public GpuDecodeLayer {
 public:
  using GpuDecodeLayer::GpuDecodeLayer;

  void declare(LayerDeclarations& d) override { decl_.declare(d); }
  std::vector<ParamRef> fp32_params() const override { return {decl_.dt_bias, decl_.A_log, decl_.D}; }
  void plan(const ModelSpec& model, const DecodeSpec& decode, cuda::MemoryPlan& memory) override;
  void take_scratch(DecodeScratch& scratch) override;
  void bind(const cuda::Arena& arena, kernels::Blas& blas) override;
  void reset(cudaStream_t stream) override;
  void forward(cudaStream_t stream, const GpuDecodeIO& io) override;

 private:
  MambaDeclarations decl_;
  MambaDims dims_;  // the widths
  DecodeLinear in_proj_, out_proj_;
  ModelSpec model_;
  int64_t rows_ = 0, batch_ = 0;
  cuda::MemorySlot conv_state_slot_, ssm_state_slot_;
  bf16* conv_state_ = nullptr;  // [slots, conv, 3]
  float* ssm_state_ = nullptr;  // [slots, heads, head_dim, state]
  // Scratch.
  bf16 *zxbcdt_ = nullptr, *xbc_ = nullptr, *y_ = nullptr, *normed_ = nullptr;
  float *dt_ = nullptr, *A_ = nullptr, *rstd_ = nullptr;
};

}  // namespace sg::model
