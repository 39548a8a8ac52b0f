// The attention layer's GPU decoding twin (model/gpu_decode_layer.h): the CPU twin's KV cache
// (attention_layer_cpu.cpp) in bf16, filled and read by kernels/decode_attention.h.
#include "core/error.h"
#include "core/strings.h"
#include "kernels/decode_attention.h"
#include "kernels/decode_linear.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "model/layers/attention_layer.h"

namespace sg::model {

namespace {
size_t sz(int64_t n) {
  return static_cast<size_t>(n);
}
}  // namespace

void AttentionDecodeGpu::plan(const ModelSpec& model, const DecodeSpec& decode, cuda::MemoryPlan& memory) {
  SG_REQUIRE(
      model.head_dim() <= kernels::kDecodeAttentionMaxHeadDim,
      strprintf("generate: the GPU decoder's attention takes head_dim up to %lld; this model's is %lld",
                static_cast<long long>(kernels::kDecodeAttentionMaxHeadDim), static_cast<long long>(model.head_dim())));
  model_ = model;
  slots_ = decode.batch;
  capacity_ = decode.capacity();
  rows_ = decode.max_rows();
  qkv_proj_ = DecodeLinear(model.hidden_size, model.qkv_dim(), std::nullopt, decode.gemv, model.has_qkv_bias());
  o_proj_ = DecodeLinear(model.q_dim(), model.hidden_size, std::nullopt, decode.gemv, model.add_bias_linear);
  const int64_t cache = slots_ * model.num_query_groups * capacity_ * model.head_dim();
  const std::string prefix = strprintf("decode.layer%d.", index());
  k_slot_ = memory.add_array<bf16>(prefix + "k_cache", cuda::MemoryCategory::activations, sz(cache));
  v_slot_ = memory.add_array<bf16>(prefix + "v_cache", cuda::MemoryCategory::activations, sz(cache));
}

void AttentionDecodeGpu::take_scratch(DecodeScratch& scratch) {
  qkv_ = scratch.take<bf16>(rows_ * model_.qkv_dim());
  attn_ = scratch.take<bf16>(rows_ * model_.q_dim());
  if (model_.qk_layernorm)
    qk_rstd_ = scratch.take<float>(rows_ * (model_.num_attention_heads + model_.num_query_groups));
  attention_workspace_ =
      scratch.take<unsigned char>(static_cast<int64_t>(kernels::decode_attention_workspace_bytes(model_.head_dim())));
}

void AttentionDecodeGpu::bind(const cuda::Arena& arena, kernels::Blas& blas) {
  k_cache_ = arena.get<bf16>(k_slot_);
  v_cache_ = arena.get<bf16>(v_slot_);
  qkv_proj_.prepare(blas, slots_);
  o_proj_.prepare(blas, slots_);
}

// No reset: a row attends only over positions its sequence has written in this generation.
void AttentionDecodeGpu::forward(cudaStream_t stream, const GpuDecodeIO& io) {
  const ModelSpec& m = model_;
  const GpuDecodeRows& r = io.rows;
  const int64_t T = r.T;
  const ref::DecodeAttentionShape shape = decode_attention_shape(m, r, slots_, capacity_);
  const kernels::DecodeQkvEpilogue qkv{.k_cache = k_cache_,
                                       .v_cache = v_cache_,
                                       .positions = r.positions,
                                       .shape = shape,
                                       .rope = m.position_embedding == PositionEmbedding::rope,
                                       .base = m.rotary_base,
                                       .scaling = m.rope_scaling,
                                       .rotary_dim = m.rotary_dim};
  const bf16* bias = io.optional_weight(decl_.qkv_bias);
  if (m.qk_layernorm) {
    // The norms come between the projection and RoPE: in place on the query heads, then on the key heads.
    qkv_proj_.run(stream, io.blas, T, qkv_, io.input, io.weight(decl_.qkv), nullptr, bias);
    for (const QkNormRows& n : decl_.qk_norms(m, T)) {
      kernels::rmsnorm_forward(stream, {.out = qkv_ + n.column,
                                        .rstd = qk_rstd_ + n.rstd_offset,
                                        .in = qkv_ + n.column,
                                        .weight = io.weight(n.weight),
                                        .T = T * n.per_token,
                                        .H = m.head_dim(),
                                        .eps = static_cast<float>(m.layernorm_epsilon),
                                        .rows_per_group = n.per_token,
                                        .group_stride = m.qkv_dim()});
    }
    if (qkv.rope) kernels::rope_forward(stream, kernels::decode_qkv_rope_params(qkv_, qkv));
    kernels::kv_cache_append(stream, kernels::decode_qkv_append_params(qkv_, qkv));
  } else if (!qkv_proj_.runs_gemm(T)) {
    // A decoding step: the projection, RoPE and the cache append in one launch (kernels/decode_linear.h).
    kernels::DecodeLinearParams p = qkv_proj_.kernel_params(T, qkv_, io.input, io.weight(decl_.qkv), bias);
    p.epilogue = kernels::DecodeLinearEpilogue::kQkv;
    p.qkv = qkv;
    kernels::decode_linear_forward(stream, p);
  } else {
    qkv_proj_.run(stream, io.blas, T, qkv_, io.input, io.weight(decl_.qkv), nullptr, bias);
    if (qkv.rope) kernels::rope_forward(stream, kernels::decode_qkv_rope_params(qkv_, qkv));
    kernels::kv_cache_append(stream, kernels::decode_qkv_append_params(qkv_, qkv));
  }
  kernels::decode_attention_forward(stream,
                                    {.out = attn_,
                                     .qkv = qkv_,
                                     .k_cache = k_cache_,
                                     .v_cache = v_cache_,
                                     .positions = r.positions,
                                     .shape = shape,
                                     .workspace = attention_workspace_,
                                     .workspace_bytes = kernels::decode_attention_workspace_bytes(m.head_dim())});
  o_proj_.run(stream, io.blas, T, io.output, attn_, io.weight(decl_.o_proj), nullptr,
              io.optional_weight(decl_.o_proj_bias));
}

}  // namespace sg::model
