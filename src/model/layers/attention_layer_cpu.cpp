// The attention layer's CPU fp32 twin (the declarations and the GPU side: attention_layer.cpp).
#include <algorithm>

#include "model/layers/attention_layer.h"
#include "reference/attention.h"
#include "reference/decode_attention.h"
#include "reference/linear.h"
#include "reference/rope.h"

namespace sg::model {

namespace {
size_t sz(int64_t n) { return static_cast<size_t>(n); }
}  // namespace

CpuLayerFootprint AttentionLayerCpu::host_footprint(const ModelSpec& m, const BatchSpec& b) {
  const double H = static_cast<double>(m.hidden_size), QKV = static_cast<double>(m.qkv_dim());
  const double Q = static_cast<double>(m.q_dim());
  const double S = static_cast<double>(m.seq_length), T = static_cast<double>(b.micro_batch_size) * S;
  // plan()'s buffers. Saved: qkv, the attention output, the softmax statistics; scratch: their gradients.
  // The attention output and its gradient are q_dim wide (heads x kv_channels), which need not be H.
  return {.params = QKV * H + H * Q,
          .saved = T * (QKV + Q) + static_cast<double>(b.micro_batch_size * m.num_attention_heads) * S,
          .scratch = T * (Q + QKV)};
}

void AttentionLayerCpu::plan(const ModelSpec& model, const BatchSpec& batch) {
  model_ = model;
  batch_ = batch;
  T_ = batch.tokens_per_microbatch(model);
  qkv_.resize(sz(T_ * model.qkv_dim()));
  attn_.resize(sz(T_ * model.q_dim()));
  lse_.resize(sz(batch.micro_batch_size * model.num_attention_heads * model.seq_length));
  d_attn_.resize(sz(T_ * model.q_dim()));
  d_qkv_.resize(sz(T_ * model.qkv_dim()));
}

void AttentionLayerCpu::forward(const CpuLayerIO& io) {
  const ModelSpec& m = model_;
  const int64_t T = T_, H = m.hidden_size, Q = m.q_dim(), QKV = m.qkv_dim(), S = m.seq_length;
  const int64_t heads = m.num_attention_heads, kv_heads = m.num_query_groups, d = m.head_dim();
  ref::linear_forward(qkv_.data(), io.input, io.weight(decl_.qkv), T, H, QKV);
  if (m.position_embedding == PositionEmbedding::rope) {
    ref::rope_forward(qkv_.data(), T, S, heads, d, QKV, m.rotary_base, m.rope_scaling);
    ref::rope_forward(qkv_.data() + Q, T, S, kv_heads, d, QKV, m.rotary_base, m.rope_scaling);
  }
  ref::attention_forward(attn_.data(), lse_.data(), qkv_.data(), batch_.micro_batch_size, S, heads, kv_heads, d,
                         io.dropout ? m.attention_dropout : 0.0f, io.rng, decl_.probs_site);
  ref::linear_forward(io.output, attn_.data(), io.weight(decl_.o_proj), T, Q, H);
}

void AttentionLayerCpu::backward(const CpuLayerIO& io) {
  const ModelSpec& m = model_;
  const int64_t T = T_, H = m.hidden_size, Q = m.q_dim(), QKV = m.qkv_dim(), S = m.seq_length;
  const int64_t heads = m.num_attention_heads, kv_heads = m.num_query_groups, d = m.head_dim();
  ref::linear_backward_input(d_attn_.data(), io.d_output, io.weight(decl_.o_proj), T, Q, H);
  ref::linear_backward_weight(io.grad(decl_.o_proj), io.d_output, attn_.data(), T, Q, H);
  ref::attention_backward(d_qkv_.data(), d_attn_.data(), qkv_.data(), attn_.data(), lse_.data(),
                          batch_.micro_batch_size, S, heads, kv_heads, d, m.attention_dropout, io.rng,
                          decl_.probs_site);
  if (m.position_embedding == PositionEmbedding::rope) {
    ref::rope_backward(d_qkv_.data(), T, S, heads, d, QKV, m.rotary_base, m.rope_scaling);
    ref::rope_backward(d_qkv_.data() + Q, T, S, kv_heads, d, QKV, m.rotary_base, m.rope_scaling);
  }
  ref::linear_backward_input(io.d_input, d_qkv_.data(), io.weight(decl_.qkv), T, H, QKV);
  ref::linear_backward_weight(io.grad(decl_.qkv), d_qkv_.data(), io.input, T, H, QKV);
}

double AttentionDecodeCpu::state_bytes(const ModelSpec& m, const DecodeSpec& decode) {
  return 2.0 * static_cast<double>(decode.batch) * static_cast<double>(m.num_query_groups) *
         static_cast<double>(decode.capacity()) * static_cast<double>(m.head_dim()) * sizeof(float);
}

void AttentionDecodeCpu::plan(const ModelSpec& model, const DecodeSpec& decode) {
  model_ = model;
  slots_ = decode.batch;
  capacity_ = decode.capacity();
  const int64_t rows = decode.max_rows();
  const int64_t cache = slots_ * model.num_query_groups * capacity_ * model.head_dim();
  k_cache_.assign(sz(cache), 0.0f);
  v_cache_.assign(sz(cache), 0.0f);
  qkv_.resize(sz(rows * model.qkv_dim()));
  attn_.resize(sz(rows * model.q_dim()));
}

void AttentionDecodeCpu::reset() {
  std::fill(k_cache_.begin(), k_cache_.end(), 0.0f);
  std::fill(v_cache_.begin(), v_cache_.end(), 0.0f);
}

void AttentionDecodeCpu::forward(const CpuDecodeIO& io) {
  const ModelSpec& m = model_;
  const DecodeRows& r = io.rows;
  const ref::DecodeAttentionShape shape = decode_attention_shape(m, r, slots_, capacity_);
  ref::linear_forward(qkv_.data(), io.input, io.weight(decl_.qkv), r.T, m.hidden_size, m.qkv_dim());
  if (m.position_embedding == PositionEmbedding::rope) {
    // q and k heads are contiguous in a QKV row: one rotation at each row's position covers both.
    ref::rope_forward(qkv_.data(), r.T, 1, m.num_attention_heads + m.num_query_groups, m.head_dim(), m.qkv_dim(),
                      m.rotary_base, m.rope_scaling, r.positions);
  }
  ref::kv_cache_append(k_cache_.data(), v_cache_.data(), qkv_.data(), r.positions, shape);
  ref::decode_attention_forward(attn_.data(), qkv_.data(), k_cache_.data(), v_cache_.data(), r.positions, shape);
  ref::linear_forward(io.output, attn_.data(), io.weight(decl_.o_proj), r.T, m.q_dim(), m.hidden_size);
}

}  // namespace sg::model
