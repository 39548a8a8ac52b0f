#include "model/cpu_model.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/strings.h"
#include "model/dropout_sites.h"
#include "model/init.h"
#include "reference/adamw.h"
#include "reference/attention.h"
#include "reference/cross_entropy.h"
#include "reference/dropout.h"
#include "reference/embedding.h"
#include "reference/grad_norm.h"
#include "reference/linear.h"
#include "reference/lr_schedule.h"
#include "reference/rmsnorm.h"
#include "reference/rope.h"
#include "reference/swiglu.h"

namespace sg::model {

namespace {

// Rows of logits materialised at once by the LM head + cross-entropy (as the GPU's chunked LM head).
constexpr int64_t kLmHeadChunkRows = 128;

size_t sz(int64_t n) { return static_cast<size_t>(n); }

ref::LrSchedule lr_schedule(const OptimizerSpec& o) {
  ref::LrSchedule s;
  s.lr = static_cast<float>(o.lr);
  s.min_lr = static_cast<float>(o.min_lr);
  s.warmup_iters = o.lr_warmup_iters;
  s.decay_iters = o.lr_decay_iters;
  switch (o.lr_decay_style) {
    case LrDecayStyle::constant: s.style = ref::LrSchedule::Style::constant; break;
    case LrDecayStyle::linear: s.style = ref::LrSchedule::Style::linear; break;
    case LrDecayStyle::cosine: s.style = ref::LrSchedule::Style::cosine; break;
  }
  return s;
}

void add_into(float* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

}  // namespace

CpuModel::CpuModel(const ModelSpec& model, const BatchSpec& batch, const OptimizerSpec& optimizer,
                   rng::RngState rng)
    : layout_(model), batch_(batch), optimizer_(optimizer), rng_(rng) {
  SG_CHECK(batch.micro_batch_size > 0 && batch.num_microbatches > 0,
           "micro_batch_size and num_microbatches must be positive");
  T_ = batch.tokens_per_microbatch(model);
  const int64_t H = model.hidden_size, F = model.ffn_hidden_size, QKV = model.qkv_dim();
  const int64_t heads = model.num_attention_heads;
  weights_ = initial_parameters(layout_, rng.seed);
  grads_.assign(sz(layout_.total()), 0.0f);
  exp_avg_.assign(sz(layout_.total()), 0.0f);
  exp_avg_sq_.assign(sz(layout_.total()), 0.0f);
  acts_.resize(sz(model.num_layers));
  for (auto& a : acts_) {
    a.x.resize(sz(T_ * H));
    a.n1.resize(sz(T_ * H));
    a.rstd1.resize(sz(T_));
    a.qkv.resize(sz(T_ * QKV));
    a.attn.resize(sz(T_ * H));
    a.lse.resize(sz(batch.micro_batch_size * heads * model.seq_length));
    a.h.resize(sz(T_ * H));
    a.n2.resize(sz(T_ * H));
    a.rstd2.resize(sz(T_));
    a.gate_up.resize(sz(T_ * 2 * F));
    a.act.resize(sz(T_ * F));
  }
  x_final_.resize(sz(T_ * H));
  norm_final_.resize(sz(T_ * H));
  rstd_final_.resize(sz(T_));
  tmp_a_.resize(sz(T_ * H));
  tmp_b_.resize(sz(T_ * H));
  d_a_.resize(sz(T_ * H));
  d_b_.resize(sz(T_ * H));
  d_c_.resize(sz(T_ * H));
  d_qkv_.resize(sz(T_ * QKV));
  d_gate_up_.resize(sz(T_ * 2 * F));
  d_act_.resize(sz(T_ * F));
}

void CpuModel::zero_grads() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

void CpuModel::load_state(const std::vector<float>& weights, const std::vector<float>& exp_avg,
                          const std::vector<float>& exp_avg_sq, int64_t steps_done, rng::RngState rng) {
  const auto check = [&](const char* what, const std::vector<float>& v) {
    SG_CHECK(static_cast<int64_t>(v.size()) == layout_.total(),
             strprintf("%s has %zu values; this model's flat parameter buffer has %lld (a checkpoint of another "
                       "model shape?)",
                       what, v.size(), static_cast<long long>(layout_.total())));
  };
  check("main weights", weights);
  check("exp_avg", exp_avg);
  check("exp_avg_sq", exp_avg_sq);
  SG_CHECK(steps_done >= 0, "steps_done must not be negative");
  weights_ = weights;
  exp_avg_ = exp_avg;
  exp_avg_sq_ = exp_avg_sq;
  steps_done_ = steps_done;
  rng_ = rng;
}

void CpuModel::forward_layer(int64_t l, float* x_out, rng::RngState rng) {
  const ModelSpec& m = layout_.spec();
  const int64_t T = T_, H = m.hidden_size, F = m.ffn_hidden_size, QKV = m.qkv_dim(), S = m.seq_length;
  const int64_t heads = m.num_attention_heads, kv_heads = m.num_query_groups, d = m.head_dim();
  const float eps = static_cast<float>(m.layernorm_epsilon);
  const LayerParamOffsets& o = layout_.layer(l);
  const float* W = weights_.data();
  LayerActivations& a = acts_[sz(l)];

  // Attention sub-block; the layer input is a.x.
  ref::rmsnorm_forward(a.n1.data(), a.rstd1.data(), a.x.data(), W + o.input_norm, T, H, eps);
  ref::linear_forward(a.qkv.data(), a.n1.data(), W + o.qkv, T, H, QKV);
  ref::rope_forward(a.qkv.data(), T, S, heads, d, QKV, m.rotary_base, m.rope_scaling);
  ref::rope_forward(a.qkv.data() + H, T, S, kv_heads, d, QKV, m.rotary_base, m.rope_scaling);
  ref::attention_forward(a.attn.data(), a.lse.data(), a.qkv.data(), batch_.micro_batch_size, S, heads, kv_heads,
                         d, m.attention_dropout, rng, dropout_site(l, DropoutKind::attention_probs));
  ref::linear_forward(tmp_a_.data(), a.attn.data(), W + o.o_proj, T, H, H);
  ref::dropout_forward(tmp_b_.data(), tmp_a_.data(), T * H, m.hidden_dropout, rng,
                       dropout_site(l, DropoutKind::attention_output));
  ref::residual_rmsnorm_forward(a.h.data(), a.n2.data(), a.rstd2.data(), a.x.data(), tmp_b_.data(),
                                W + o.post_norm, T, H, eps);
  // MLP sub-block.
  ref::linear_forward(a.gate_up.data(), a.n2.data(), W + o.gate_up, T, H, 2 * F);
  ref::swiglu_forward(a.act.data(), a.gate_up.data(), T, F);
  ref::linear_forward(tmp_a_.data(), a.act.data(), W + o.down_proj, T, F, H);
  ref::dropout_forward(tmp_b_.data(), tmp_a_.data(), T * H, m.hidden_dropout, rng,
                       dropout_site(l, DropoutKind::mlp_output));
  for (int64_t i = 0; i < T * H; ++i) x_out[i] = a.h[sz(i)] + tmp_b_[sz(i)];
}

void CpuModel::backward_layer(int64_t l, std::vector<float>& dx, rng::RngState rng) {
  const ModelSpec& m = layout_.spec();
  const int64_t T = T_, H = m.hidden_size, F = m.ffn_hidden_size, QKV = m.qkv_dim(), S = m.seq_length;
  const int64_t heads = m.num_attention_heads, kv_heads = m.num_query_groups, d = m.head_dim();
  const LayerParamOffsets& o = layout_.layer(l);
  const float* W = weights_.data();
  float* G = grads_.data();
  LayerActivations& a = acts_[sz(l)];

  // MLP sub-block: dx is d loss / d x' (the layer output); the result d_b_ = d loss / d h.
  ref::dropout_backward(d_a_.data(), dx.data(), T * H, m.hidden_dropout, rng, dropout_site(l, DropoutKind::mlp_output));
  ref::linear_backward_input(d_act_.data(), d_a_.data(), W + o.down_proj, T, F, H);
  ref::linear_backward_weight(G + o.down_proj, d_a_.data(), a.act.data(), T, F, H);
  ref::swiglu_backward(d_gate_up_.data(), d_act_.data(), a.gate_up.data(), T, F);
  ref::linear_backward_input(d_c_.data(), d_gate_up_.data(), W + o.gate_up, T, H, 2 * F);
  ref::linear_backward_weight(G + o.gate_up, d_gate_up_.data(), a.n2.data(), T, H, 2 * F);
  ref::rmsnorm_backward(d_b_.data(), G + o.post_norm, d_c_.data(), a.h.data(), W + o.post_norm, a.rstd2.data(), T, H);
  add_into(d_b_.data(), dx.data(), T * H);  // the residual path h -> x'

  // Attention sub-block: d_b_ = d loss / d h; the result dx = d loss / d x (the layer input).
  ref::dropout_backward(d_a_.data(), d_b_.data(), T * H, m.hidden_dropout, rng,
                        dropout_site(l, DropoutKind::attention_output));
  ref::linear_backward_input(d_c_.data(), d_a_.data(), W + o.o_proj, T, H, H);
  ref::linear_backward_weight(G + o.o_proj, d_a_.data(), a.attn.data(), T, H, H);
  ref::attention_backward(d_qkv_.data(), d_c_.data(), a.qkv.data(), a.attn.data(), a.lse.data(),
                          batch_.micro_batch_size, S, heads, kv_heads, d, m.attention_dropout, rng,
                          dropout_site(l, DropoutKind::attention_probs));
  ref::rope_backward(d_qkv_.data(), T, S, heads, d, QKV, m.rotary_base, m.rope_scaling);
  ref::rope_backward(d_qkv_.data() + H, T, S, kv_heads, d, QKV, m.rotary_base, m.rope_scaling);
  ref::linear_backward_input(d_c_.data(), d_qkv_.data(), W + o.qkv, T, H, QKV);
  ref::linear_backward_weight(G + o.qkv, d_qkv_.data(), a.n1.data(), T, H, QKV);
  ref::rmsnorm_backward(dx.data(), G + o.input_norm, d_c_.data(), a.x.data(), W + o.input_norm, a.rstd1.data(), T, H);
  add_into(dx.data(), d_b_.data(), T * H);  // the residual path x -> h
}

double CpuModel::microbatch(const int32_t* tokens, const int32_t* targets, const float* loss_mask,
                            rng::RngState rng, bool backward, float grad_scale) {
  const ModelSpec& m = layout_.spec();
  const int64_t T = T_, H = m.hidden_size, V = m.vocab_size, L = m.num_layers;
  const float eps = static_cast<float>(m.layernorm_epsilon);
  const float* W = weights_.data();
  float* G = grads_.data();

  // Forward. Layer l's input lives in acts_[l].x; the last layer writes x_final_.
  ref::embedding_forward(acts_[0].x.data(), tokens, W + layout_.embedding(), T, H);
  for (int64_t l = 0; l < L; ++l) {
    forward_layer(l, l + 1 < L ? acts_[sz(l + 1)].x.data() : x_final_.data(), rng);
  }
  ref::rmsnorm_forward(norm_final_.data(), rstd_final_.data(), x_final_.data(), W + layout_.final_norm(), T, H, eps);

  // Chunked LM head + cross-entropy; in the backward each chunk's dlogits go straight into
  // d norm_final (d_a_) and the lm_head gradient, as on the GPU.
  const double count = std::max(ref::loss_token_count(loss_mask, T), 1.0);
  const float ce_scale = static_cast<float>(static_cast<double>(grad_scale) / count);
  std::vector<float> logits(sz(std::min(T, kLmHeadChunkRows) * V)), dlogits;
  if (backward) dlogits.resize(logits.size());
  double loss_sum = 0.0;
  for (int64_t r0 = 0; r0 < T; r0 += kLmHeadChunkRows) {
    const int64_t rows = std::min(kLmHeadChunkRows, T - r0);
    ref::linear_forward(logits.data(), norm_final_.data() + r0 * H, W + layout_.lm_head(), rows, H, V);
    loss_sum += ref::cross_entropy_forward_backward(backward ? dlogits.data() : nullptr, logits.data(), targets + r0,
                                                    loss_mask + r0, rows, V, ce_scale);
    if (backward) {
      ref::linear_backward_input(d_a_.data() + r0 * H, dlogits.data(), W + layout_.lm_head(), rows, H, V);
      ref::linear_backward_weight(G + layout_.lm_head(), dlogits.data(), norm_final_.data() + r0 * H, rows, H, V);
    }
  }
  const double loss = loss_sum / count;
  if (!backward) return loss;

  // Backward.
  std::vector<float> dx(sz(T * H));
  ref::rmsnorm_backward(dx.data(), G + layout_.final_norm(), d_a_.data(), x_final_.data(), W + layout_.final_norm(),
                        rstd_final_.data(), T, H);
  for (int64_t l = L - 1; l >= 0; --l) backward_layer(l, dx, rng);
  ref::embedding_backward(G + layout_.embedding(), dx.data(), tokens, T, H);
  return loss;
}

float CpuModel::compute_gradients(const HostBatch& batch, uint64_t first_offset) {
  batch.check(layout_.spec(), batch_);
  zero_grads();
  const int64_t M = batch_.num_microbatches;
  double loss = 0.0;
  for (int64_t mb = 0; mb < M; ++mb) {
    const size_t at = sz(mb * T_);
    const rng::RngState rng{rng_.seed, first_offset + static_cast<uint64_t>(mb) * kRngOffsetPerMicrobatch};
    loss += microbatch(batch.tokens.data() + at, batch.targets.data() + at, batch.loss_mask.data() + at, rng, true,
                       1.0f / static_cast<float>(M));
  }
  return static_cast<float>(loss / static_cast<double>(M));
}

double CpuModel::compute_loss(const HostBatch& batch, uint64_t first_offset) {
  batch.check(layout_.spec(), batch_);
  const int64_t M = batch_.num_microbatches;
  double loss = 0.0;
  for (int64_t mb = 0; mb < M; ++mb) {
    const size_t at = sz(mb * T_);
    const rng::RngState rng{rng_.seed, first_offset + static_cast<uint64_t>(mb) * kRngOffsetPerMicrobatch};
    loss += microbatch(batch.tokens.data() + at, batch.targets.data() + at, batch.loss_mask.data() + at, rng, false,
                       1.0f);
  }
  return loss / static_cast<double>(M);
}

CpuStepResult CpuModel::train_step(const HostBatch& batch) {
  CpuStepResult r;
  r.loss = compute_gradients(batch, rng_.offset);
  r.loss_finite = std::isfinite(r.loss);
  const double norm = ref::grad_global_norm(grads_.data(), layout_.total());
  r.grad_norm = static_cast<float>(norm);
  r.grads_finite = std::isfinite(norm);
  r.clip_coef = ref::clip_coefficient(norm, static_cast<float>(optimizer_.clip_grad));
  r.lr = ref::lr_at(lr_schedule(optimizer_), steps_done_);
  ref::AdamWConfig adam;
  adam.beta1 = static_cast<float>(optimizer_.adam_beta1);
  adam.beta2 = static_cast<float>(optimizer_.adam_beta2);
  adam.eps = static_cast<float>(optimizer_.adam_eps);
  adam.weight_decay = static_cast<float>(optimizer_.weight_decay);
  const int64_t n_decay = layout_.num_decay(), n = layout_.total();
  ref::adamw_step(weights_.data(), grads_.data(), exp_avg_.data(), exp_avg_sq_.data(), n_decay, r.lr, r.clip_coef,
                  steps_done_ + 1, adam, true);
  ref::adamw_step(weights_.data() + n_decay, grads_.data() + n_decay, exp_avg_.data() + n_decay,
                  exp_avg_sq_.data() + n_decay, n - n_decay, r.lr, r.clip_coef, steps_done_ + 1, adam, false);
  ++steps_done_;
  rng_.offset += static_cast<uint64_t>(batch_.num_microbatches) * kRngOffsetPerMicrobatch;
  return r;
}

}  // namespace sg::model
