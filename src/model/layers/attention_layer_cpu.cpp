// The attention layer's CPU fp32 twin (the declarations and the GPU side: attention_layer.cpp).
#include <algorithm>

#include "model/layers/attention_layer.h"
#include "reference/attention.h"
#include "reference/column_sums.h"
#include "reference/decode_attention.h"
#include "reference/linear.h"
#include "reference/rmsnorm.h"
#include "reference/rope.h"

namespace sg::model {

namespace {
size_t sz(int64_t n) { return static_cast<size_t>(n); }

// qk_layernorm on T rows of [qkv_dim]: each query head, then each key head, RMS-normalized over head_dim into out
// (which may be in), as the GPU layer does (AttentionDeclarations::qk_norms). The values are not touched.
template <class Weights>
void qk_norm_forward(const ModelSpec& m, const AttentionDeclarations& decl, float* out, float* rstd, const float* in,
                     const Weights& weight, int64_t T) {
  const int64_t QKV = m.qkv_dim();
  for (const QkNormRows& n : decl.qk_norms(m, T)) {
    for (int64_t t = 0; t < T; ++t) {
      ref::rmsnorm_forward(out + t * QKV + n.column, rstd + n.rstd_offset + t * n.per_token, in + t * QKV + n.column,
                           weight(n.weight), n.per_token, m.head_dim(), static_cast<float>(m.layernorm_epsilon));
    }
  }
}
}  // namespace

CpuLayerFootprint AttentionLayerCpu::host_footprint(const ModelSpec& m, const BatchSpec& b) {
  const double H = static_cast<double>(m.hidden_size), QKV = static_cast<double>(m.qkv_dim());
  const double Q = static_cast<double>(m.q_dim());
  const double S = static_cast<double>(m.seq_length), T = static_cast<double>(b.micro_batch_size) * S;
  // plan()'s buffers. Saved: qkv, the attention output, the softmax statistics; scratch: their gradients.
  // The attention output and its gradient are q_dim wide (heads x kv_channels), which need not be H.
  // qk_layernorm: the norm weights, the projection before them and their rstd; one token's heads of scratch.
  // The biases: q, k and v's (add_qkv_bias or add_bias_linear), o_proj's (add_bias_linear).
  const double heads = static_cast<double>(m.num_attention_heads + m.num_query_groups);
  const double d = static_cast<double>(m.head_dim());
  const double qk = m.qk_layernorm ? 1.0 : 0.0;
  const double bias = (m.has_qkv_bias() ? QKV : 0.0) + (m.add_bias_linear ? H : 0.0);
  return {.params = QKV * H + H * Q + qk * 2.0 * d + bias,
          .saved = T * (QKV + Q) + static_cast<double>(b.micro_batch_size * m.num_attention_heads) * S +
                   qk * T * (QKV + heads),
          .scratch = T * (Q + QKV) + qk * static_cast<double>(m.num_attention_heads) * d};
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
  if (model.qk_layernorm) {
    qkv_proj_.resize(sz(T_ * model.qkv_dim()));
    qk_rstd_.resize(sz(T_ * (model.num_attention_heads + model.num_query_groups)));
    d_heads_.resize(sz(model.q_dim()));
  }
}

void AttentionLayerCpu::forward(const CpuLayerIO& io) {
  const ModelSpec& m = model_;
  const int64_t T = T_, H = m.hidden_size, Q = m.q_dim(), QKV = m.qkv_dim(), S = m.seq_length;
  const int64_t heads = m.num_attention_heads, kv_heads = m.num_query_groups, d = m.head_dim();
  if (m.qk_layernorm) {
    ref::linear_forward(qkv_proj_.data(), io.input, io.weight(decl_.qkv), T, H, QKV);
    ref::add_row_bias(qkv_proj_.data(), io.optional_weight(decl_.qkv_bias), T, QKV);
    qkv_ = qkv_proj_;  // the values as they are
    qk_norm_forward(
        m, decl_, qkv_.data(), qk_rstd_.data(), qkv_proj_.data(), [&](ParamRef w) { return io.weight(w); }, T);
  } else {
    ref::linear_forward(qkv_.data(), io.input, io.weight(decl_.qkv), T, H, QKV);
    ref::add_row_bias(qkv_.data(), io.optional_weight(decl_.qkv_bias), T, QKV);
  }
  if (m.position_embedding == PositionEmbedding::rope) {
    ref::rope_forward(qkv_.data(), T, S, heads, d, QKV, m.rotary_base, m.rope_scaling, nullptr, m.rotary_dim);
    ref::rope_forward(qkv_.data() + Q, T, S, kv_heads, d, QKV, m.rotary_base, m.rope_scaling, nullptr, m.rotary_dim);
  }
  ref::attention_forward(attn_.data(), lse_.data(), qkv_.data(), batch_.micro_batch_size, S, heads, kv_heads, d,
                         io.dropout ? m.attention_dropout : 0.0f, io.rng, decl_.probs_site);
  ref::linear_forward(io.output, attn_.data(), io.weight(decl_.o_proj), T, Q, H);
  ref::add_row_bias(io.output, io.optional_weight(decl_.o_proj_bias), T, H);
}

void AttentionLayerCpu::backward(const CpuLayerIO& io) {
  const ModelSpec& m = model_;
  const int64_t T = T_, H = m.hidden_size, Q = m.q_dim(), QKV = m.qkv_dim(), S = m.seq_length;
  const int64_t heads = m.num_attention_heads, kv_heads = m.num_query_groups, d = m.head_dim();
  ref::linear_backward_input(d_attn_.data(), io.d_output, io.weight(decl_.o_proj), T, Q, H);
  ref::linear_backward_weight(io.grad(decl_.o_proj), io.d_output, attn_.data(), T, Q, H);
  if (decl_.o_proj_bias.valid()) ref::column_sums(io.grad(decl_.o_proj_bias), io.d_output, T, H, H);
  ref::attention_backward(d_qkv_.data(), d_attn_.data(), qkv_.data(), attn_.data(), lse_.data(),
                          batch_.micro_batch_size, S, heads, kv_heads, d, m.attention_dropout, io.rng,
                          decl_.probs_site);
  if (m.position_embedding == PositionEmbedding::rope) {
    ref::rope_backward(d_qkv_.data(), T, S, heads, d, QKV, m.rotary_base, m.rope_scaling, nullptr, m.rotary_dim);
    ref::rope_backward(d_qkv_.data() + Q, T, S, kv_heads, d, QKV, m.rotary_base, m.rope_scaling, nullptr, m.rotary_dim);
  }
  if (m.qk_layernorm) {
    // Each token's query heads, then key heads, through their norms (the reference's din may not alias dout).
    for (const QkNormRows& n : decl_.qk_norms(m, T)) {
      for (int64_t t = 0; t < T; ++t) {
        float* dx = d_qkv_.data() + t * QKV + n.column;
        ref::rmsnorm_backward(d_heads_.data(), io.grad(n.weight), dx, qkv_proj_.data() + t * QKV + n.column,
                              io.weight(n.weight), qk_rstd_.data() + n.rstd_offset + t * n.per_token, n.per_token, d);
        std::copy(d_heads_.begin(), d_heads_.begin() + n.per_token * d, dx);
      }
    }
  }
  ref::linear_backward_input(io.d_input, d_qkv_.data(), io.weight(decl_.qkv), T, H, QKV);
  ref::linear_backward_weight(io.grad(decl_.qkv), d_qkv_.data(), io.input, T, H, QKV);
  if (decl_.qkv_bias.valid()) ref::column_sums(io.grad(decl_.qkv_bias), d_qkv_.data(), T, QKV, QKV);
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
  if (model.qk_layernorm) qk_rstd_.resize(sz(rows * (model.num_attention_heads + model.num_query_groups)));
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
  ref::add_row_bias(qkv_.data(), io.optional_weight(decl_.qkv_bias), r.T, m.qkv_dim());
  if (m.qk_layernorm) {
    qk_norm_forward(
        m, decl_, qkv_.data(), qk_rstd_.data(), qkv_.data(), [&](ParamRef w) { return io.weight(w); }, r.T);
  }
  if (m.position_embedding == PositionEmbedding::rope) {
    // q and k heads are contiguous in a QKV row: one rotation at each row's position covers both.
    ref::rope_forward(qkv_.data(), r.T, 1, m.num_attention_heads + m.num_query_groups, m.head_dim(), m.qkv_dim(),
                      m.rotary_base, m.rope_scaling, r.positions, m.rotary_dim);
  }
  ref::kv_cache_append(k_cache_.data(), v_cache_.data(), qkv_.data(), r.positions, shape);
  ref::decode_attention_forward(attn_.data(), qkv_.data(), k_cache_.data(), v_cache_.data(), r.positions, shape);
  ref::linear_forward(io.output, attn_.data(), io.weight(decl_.o_proj), r.T, m.q_dim(), m.hidden_size);
  ref::add_row_bias(io.output, io.optional_weight(decl_.o_proj_bias), r.T, m.hidden_size);
}

}  // namespace sg::model
