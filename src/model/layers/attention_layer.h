#pragma once
// '*': causal self-attention with grouped-query heads and RoPE (Llama). On the normed input n:
//   qkv = n Wqkv^T (+ b with add_qkv_bias or add_bias_linear: Qwen2, Llama's attention_bias); with qk_layernorm
//   (Qwen3) every query head and every key head RMS-normalized over head_dim;
//   RoPE on q and k (unless position_embedding is none); a = attention(qkv) (cuDNN flash attention,
//   attention_dropout inside); delta = a Wo^T (+ bo with add_bias_linear).
// Parameters: q_proj, k_proj, v_proj (one fused [qkv_dim, H] block), o_proj (output-projection init); with
// qk_layernorm q_norm and k_norm ([head_dim] each, ones, no weight decay); with either bias key q_proj.bias,
// k_proj.bias, v_proj.bias (one fused [qkv_dim] block, zeros, no weight decay: Megatron's); with add_bias_linear
// o_proj.bias ([H], zeros, no weight decay).
// Dropout site: the attention probabilities (one; the output dropout is the step's).
// Module: attn.
// qk_layernorm keeps the projection before the norms (the norms' backward reads it) and their rstd; v is copied
// from it into the normed qkv, which cuDNN reads packed.
// Recompute: core_attn gives back the attention output and its softmax statistics (qkv is kept, so only
// the attention kernel reruns, with the microbatch's cuDNN seeds: the same dropout mask); full
// recompute gives back qkv too and reruns the whole module.
// RoPE reads its cos/sin from one table of seq_length positions (state.rope_cos_sin, shared by every
// attention layer), built once at bind: eager, graph replay and recompute all rotate from it.
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "cuda/library_workspaces.h"
#include "kernels/attention.h"
#include "kernels/float_buffer.h"
#include "kernels/rope.h"
#include "model/decode_layer.h"
#include "model/decode_linear.h"
#include "model/gpu_decode_layer.h"
#include "model/layer.h"
#include "model/linear_bias.h"
#include "reference/decode_attention.h"

namespace sg::model {

// qk_layernorm's norms as rows of head_dim inside T rows of [qkv_dim] (kernels/rmsnorm.h's packed rows): the query
// heads from column 0, the key heads from q_dim; their rstd [T, heads] then [T, kv_heads]. Every twin reads this.
struct QkNormRows {
  ParamRef weight;          // q_norm or k_norm
  int64_t column = 0;       // of the first head in a QKV row
  int64_t per_token = 0;    // heads per row
  int64_t rstd_offset = 0;  // where this norm's rstd starts
};

// The declarations the GPU layer and its CPU twin share.
struct AttentionDeclarations {
  ParamRef qkv, o_proj;
  ParamRef q_norm, k_norm;  // qk_layernorm only
  ParamRef qkv_bias;        // ModelSpec::has_qkv_bias() only: q_proj, k_proj, v_proj's biases, one [qkv_dim] block
  ParamRef o_proj_bias;     // add_bias_linear only: [H]
  uint32_t probs_site = 0;
  void declare(LayerDeclarations& d);  // checks the head shapes
  std::array<QkNormRows, 2> qk_norms(const ModelSpec& m, int64_t T) const;  // the query norm, then the key norm
};

// One decoding call's attention shape (rows: DecodeRows on the CPU, GpuDecodeRows on the GPU), so that both
// decoding twins read the same cache layout: `slots` sequences of `capacity` positions.
template <class Rows>
ref::DecodeAttentionShape decode_attention_shape(const ModelSpec& m, const Rows& rows, int64_t slots,
                                                 int64_t capacity) {
  return {.T = rows.T,
          .rows_per_slot = rows.rows_per_slot,
          .first_slot = rows.first_slot,
          .slots = slots,
          .capacity = capacity,
          .heads = m.num_attention_heads,
          .kv_heads = m.num_query_groups,
          .head_dim = m.head_dim()};
}

class AttentionLayer final : public Layer {
 public:
  explicit AttentionLayer(LayerPlace place);
  ~AttentionLayer() override;
  static LayerRecompute recompute_support() { return {{RecomputeModule::core_attn}, true}; }
  static LayerFlops flops_per_token(const ModelSpec& model);  // model/layer.h

  void declare(LayerDeclarations& d) override { decl_.declare(d); }
  void plan(LayerPlanContext& context) override;
  void plan_device(DevicePlanContext& context) override;
  void bind(LayerBindContext& context) override;
  std::vector<ParamRef> first_written_grads() const override { return {decl_.qkv, decl_.o_proj}; }
  void forward(graph::Module module, cudaStream_t stream, const LayerIO& io) override;
  void backward(graph::Module module, cudaStream_t stream, const LayerIO& io) override;
  void recompute(graph::Module module, cudaStream_t stream, const LayerIO& io) override;

 private:
  struct Gemms;  // attention_layer.cpp
  void attention_forward(cudaStream_t stream, bool dropout);
  void qk_norm_forward(cudaStream_t stream);   // qkv_proj_ -> qkv_ (qk_layernorm)
  void qk_norm_backward(cudaStream_t stream);  // d_qkv_ in place
  kernels::RopeTable rope_cos_sin_table(LayerBindContext& context) const;

  AttentionDeclarations decl_;
  bool full_recompute_ = false;
  ModelSpec model_;
  int64_t T_ = 0;
  int dropout_slot_ = -1;  // cuDNN seed slot; -1 without attention dropout
  cuda::MemorySlot qkv_slot_, attn_slot_, lse_slot_;
  cuda::MemorySlot qkv_proj_slot_, qk_rstd_slot_;  // qk_layernorm only
  SharedBufferRef d_attn_ref_, d_qkv_ref_, workspace_ref_;
  SharedBufferRef qk_norm_partials_ref_;  // qk_layernorm only: the norms' dweight partial rows
  SharedBufferRef rope_table_ref_;  // the cos/sin table every attention layer reads (RoPE only)
  const kernels::AttentionPlan* attention_ = nullptr;  // shared by every attention layer
  const kernels::AttentionPlan* eval_attention_ = nullptr;  // dropout off (evaluation); only with attention dropout
  std::unique_ptr<Gemms> gemms_;
  kernels::RopeTable rope_table_;  // built once, by the first layer bound (rope_cos_sin_table())

  bf16* qkv_ = nullptr;  // [T, qkv_dim] after RoPE
  bf16* qkv_proj_ = nullptr;  // [T, qkv_dim] the projection before the qk norms (qk_layernorm only)
  float* qk_rstd_ = nullptr;  // [T, heads] then [T, kv_heads]: the qk norms' rstd
  float* qk_norm_partials_ = nullptr;
  size_t qk_norm_partials_bytes_ = 0;
  bf16* attn_ = nullptr;  // [T, q_dim] attention output
  float* lse_ = nullptr;  // [B, heads, S]
  bf16* d_attn_ = nullptr;
  bf16* d_qkv_ = nullptr;
  void* workspace_ = nullptr;
  cuda::LibraryWorkspace workspace_registration_;  // cuDNN's alone (graph/workspace_memsets.h)
  const bf16* w_qkv_ = nullptr;
  const bf16* w_o_ = nullptr;
  std::array<const bf16*, 2> qk_norm_weights_{};  // qk_layernorm: in decl_.qk_norms()'s order
  kernels::FloatBuffer g_qkv_;
  kernels::FloatBuffer g_o_;
  LinearBias qkv_bias_, o_proj_bias_;  // model/linear_bias.h (absent without their keys)
  std::array<kernels::FloatBuffer, 2> qk_norm_grads_{};
  int64_t* dropout_seed_ = nullptr;
  int64_t* dropout_offset_ = nullptr;
};

class AttentionLayerCpu final : public CpuLayer {
 public:
  using CpuLayer::CpuLayer;
  static CpuLayerFootprint host_footprint(const ModelSpec& model, const BatchSpec& batch);  // model/layer.h

  void declare(LayerDeclarations& d) override { decl_.declare(d); }
  void plan(const ModelSpec& model, const BatchSpec& batch) override;
  void forward(const CpuLayerIO& io) override;
  void backward(const CpuLayerIO& io) override;

 private:
  AttentionDeclarations decl_;
  ModelSpec model_;
  BatchSpec batch_;
  int64_t T_ = 0;
  std::vector<float> qkv_, attn_, lse_;  // saved
  std::vector<float> qkv_proj_, qk_rstd_;  // saved with qk_layernorm: before the norms, their rstd
  std::vector<float> d_attn_, d_qkv_;    // scratch
  std::vector<float> d_heads_;           // scratch: one token's normed heads' gradient (qk_layernorm)
};

// The decoding twin (model/decode_layer.h): the keys and values of every position so far in a cache of
// decode.capacity() positions per sequence; each row attends over its sequence up to its own position.
class AttentionDecodeCpu final : public CpuDecodeLayer {
 public:
  using CpuDecodeLayer::CpuDecodeLayer;
  static double state_bytes(const ModelSpec& model, const DecodeSpec& decode);  // the KV cache

  void declare(LayerDeclarations& d) override { decl_.declare(d); }
  void plan(const ModelSpec& model, const DecodeSpec& decode) override;
  void reset() override;
  void forward(const CpuDecodeIO& io) override;

 private:
  AttentionDeclarations decl_;
  ModelSpec model_;
  int64_t slots_ = 0, capacity_ = 0;
  std::vector<float> k_cache_, v_cache_;  // [slots, kv_heads, capacity, head_dim]
  std::vector<float> qkv_, attn_;         // scratch
  std::vector<float> qk_rstd_;            // scratch (qk_layernorm)
};

// The GPU decoding twin (model/gpu_decode_layer.h): the same KV cache in bf16 (kernels/decode_attention.h).
class AttentionDecodeGpu final : public GpuDecodeLayer {
 public:
  using GpuDecodeLayer::GpuDecodeLayer;

  void declare(LayerDeclarations& d) override { decl_.declare(d); }
  void plan(const ModelSpec& model, const DecodeSpec& decode, cuda::MemoryPlan& memory) override;
  void take_scratch(DecodeScratch& scratch) override;
  void bind(const cuda::Arena& arena, kernels::Blas& blas) override;
  void forward(cudaStream_t stream, const GpuDecodeIO& io) override;

 private:
  AttentionDeclarations decl_;
  ModelSpec model_;
  int64_t slots_ = 0, capacity_ = 0, rows_ = 0;
  DecodeLinear qkv_proj_, o_proj_;
  cuda::MemorySlot k_slot_, v_slot_;
  bf16 *k_cache_ = nullptr, *v_cache_ = nullptr;  // [slots, kv_heads, capacity, head_dim]
  bf16 *qkv_ = nullptr, *attn_ = nullptr;         // scratch
  float* qk_rstd_ = nullptr;                      // scratch (qk_layernorm)
  void* attention_workspace_ = nullptr;           // scratch: kernels::decode_attention_workspace_bytes
};

}  // namespace sg::model
