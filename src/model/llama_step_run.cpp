// LlamaStep::enqueue_step and the four region bodies of a layer (see llama_step.h for the boundaries).
// Everything here only enqueues launches on the given stream with arena pointers and plan-time
// constants: no allocation, no host synchronisation, nothing read from the device.
#include <cstddef>

#include "core/strings.h"
#include "cuda/check.h"
#include "cuda/nvtx.h"
#include "kernels/adamw.h"
#include "kernels/dropout.h"
#include "kernels/embedding.h"
#include "kernels/grad_norm.h"
#include "kernels/lr_schedule.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "model/attention_dropout_seeds.h"
#include "model/dropout_sites.h"
#include "model/llama_step.h"
#include "model/llama_step_gemms.h"

namespace sg::model {

namespace {

// loss and the two NaN flags are the tail of StepScalars, so one memset clears them at the step's start.
static_assert(offsetof(StepScalars, loss_nonfinite) == offsetof(StepScalars, loss) + sizeof(float));
static_assert(offsetof(StepScalars, grad_nonfinite) == offsetof(StepScalars, loss_nonfinite) + sizeof(int32_t));
constexpr size_t kPerStepScalarBytes = offsetof(StepScalars, grad_nonfinite) + sizeof(int32_t) - offsetof(StepScalars, loss);

kernels::LrScheduleConfig lr_schedule(const OptimizerSpec& o) {
  kernels::LrScheduleConfig s;
  s.lr = static_cast<float>(o.lr);
  s.min_lr = static_cast<float>(o.min_lr);
  s.warmup_iters = o.lr_warmup_iters;
  s.decay_iters = o.lr_decay_iters;
  switch (o.lr_decay_style) {
    case LrDecayStyle::constant: s.style = kernels::LrScheduleConfig::Style::constant; break;
    case LrDecayStyle::linear: s.style = kernels::LrScheduleConfig::Style::linear; break;
    case LrDecayStyle::cosine: s.style = kernels::LrScheduleConfig::Style::cosine; break;
  }
  return s;
}

}  // namespace

void LlamaStep::enqueue_step(cudaStream_t stream, graph::RegionRunner& regions) {
  const dist::FlatRange own = dp_.owned;  // what this rank's optimizer updates (everything without DP)
  SG_CUDA_CHECK(cudaMemsetAsync(grads_, 0, static_cast<size_t>(dp_.padded_params) * sizeof(float), stream));
  SG_CUDA_CHECK(cudaMemsetAsync(&scalars_->loss, 0, kPerStepScalarBytes, stream));

  for (int64_t mb = 0; mb < batch_.num_microbatches; ++mb) {
    microbatch(stream, regions, mb);
    rng_.launch_advance(stream, kRngOffsetPerMicrobatch);
  }
  if (reducer_) {
    reducer_->reduce_gradients(stream);  // gradients and loss summed over the data-parallel ranks
    if (other_ranks_rng_offset() > 0) rng_.launch_advance(stream, other_ranks_rng_offset());
  }

  kernels::NonfiniteCheckParams loss_check;
  loss_check.values = &scalars_->loss;
  loss_check.n = 1;
  loss_check.flag = &scalars_->loss_nonfinite;
  kernels::flag_if_nonfinite(stream, loss_check);

  kernels::GradNormParams norm;
  norm.grads = grads_ + own.begin;
  norm.n = own.size;
  norm.partials = grad_norm_partials_;
  norm.norm = &scalars_->grad_norm;
  norm.clip_coefficient = &scalars_->clip_coef;
  norm.nonfinite_flag = &scalars_->grad_nonfinite;
  norm.max_norm = static_cast<float>(optimizer_.clip_grad);
  kernels::grad_norm_partials(stream, norm);
  if (reducer_) reducer_->reduce_norm_partials(stream);  // the shards' sums of squares, over ranks
  kernels::grad_norm_finalize(stream, norm);

  kernels::LrScheduleParams lr;
  lr.schedule = lr_schedule(optimizer_);
  lr.step_counter = &scalars_->steps_done;
  lr.lr = &scalars_->lr;
  kernels::lr_schedule_update(stream, lr);

  kernels::AdamWParams adam;
  adam.master_weights = main_weights_;
  adam.compute_weights = params_ + own.begin;
  adam.grads = grads_ + own.begin;
  adam.exp_avg = exp_avg_;
  adam.exp_avg_sq = exp_avg_sq_;
  adam.n = own.size;
  adam.n_decay = dist::decayed_elements_in(own, layout_.num_decay());
  adam.lr = &scalars_->lr;
  adam.step_counter = &scalars_->steps_done;
  adam.grad_scale = &scalars_->clip_coef;
  adam.hyper.beta1 = static_cast<float>(optimizer_.adam_beta1);
  adam.hyper.beta2 = static_cast<float>(optimizer_.adam_beta2);
  adam.hyper.eps = static_cast<float>(optimizer_.adam_eps);
  adam.hyper.weight_decay = static_cast<float>(optimizer_.weight_decay);
  kernels::adamw_step(stream, adam);
  if (reducer_) reducer_->gather_weights(stream);  // every shard's new bf16 weights on every rank

  kernels::increment_step_counter(stream, &scalars_->steps_done);
}

void LlamaStep::microbatch(cudaStream_t stream, graph::RegionRunner& regions, int64_t mb) {
  const cuda::NvtxRange range(strprintf("microbatch %lld", static_cast<long long>(mb)));
  const ModelSpec& m = layout_.spec();
  const int64_t T = T_, H = m.hidden_size, L = m.num_layers;
  const int64_t row0 = mb * T;
  const int32_t* tokens = tokens_ + row0;

  if (m.attention_dropout > 0.0f) {
    AttentionDropoutSeedsParams seeds;
    seeds.state = attention_rng_;
    seeds.seeds = dropout_seeds_;
    seeds.offsets = dropout_offsets_;
    seeds.num_layers = static_cast<int>(L);
    write_attention_dropout_seeds(stream, seeds);
  }

  kernels::EmbeddingForwardParams emb;
  emb.out = resid_[0];
  emb.tokens = tokens;
  emb.table = params_ + layout_.embedding();
  emb.T = T;
  emb.H = H;
  emb.vocab_size = m.vocab_size;
  kernels::embedding_forward(stream, emb);

  kernels::RmsNormForwardParams norm0;
  norm0.out = norm_in_[0];
  norm0.rstd = rstd_in_[0];
  norm0.in = resid_[0];
  norm0.weight = params_ + layout_.layer(0).input_norm;
  norm0.T = T;
  norm0.H = H;
  norm0.eps = static_cast<float>(m.layernorm_epsilon);
  kernels::rmsnorm_forward(stream, norm0);

  for (int64_t l = 0; l < L; ++l) {
    const int layer = static_cast<int>(l);
    const cuda::NvtxRange layer_range(strprintf("layer %d forward", layer));  // around its module regions
    regions.run({layer, graph::Module::attn, graph::Phase::forward}, stream,
                [this, l](cudaStream_t s) { attn_forward(s, l); });
    regions.run({layer, graph::Module::mlp, graph::Phase::forward}, stream,
                [this, l](cudaStream_t s) { mlp_forward(s, l); });
  }

  // LM head + cross-entropy: d_norm_ = d loss / d n_L; adds loss / M into scalars_->loss.
  kernels::LmHeadBuffers head;
  head.hidden = norm_in_[static_cast<size_t>(L)];
  head.weight = params_ + layout_.lm_head();
  head.targets = targets_ + row0;
  head.loss_mask = loss_mask_ + row0;
  head.dhidden = d_norm_;
  head.dweight = grads_ + layout_.lm_head();
  head.loss_accumulator = &scalars_->loss;
  head.workspace = lm_head_workspace_;
  lm_head_->execute(stream, head);

  for (int64_t l = L - 1; l >= 0; --l) {
    const int layer = static_cast<int>(l);
    const cuda::NvtxRange layer_range(strprintf("layer %d backward", layer));
    regions.run({layer, graph::Module::mlp, graph::Phase::backward}, stream,
                [this, l](cudaStream_t s) { mlp_backward(s, l); });
    regions.run({layer, graph::Module::attn, graph::Phase::backward}, stream,
                [this, l](cudaStream_t s) { attn_backward(s, l); });
  }

  // Layer 0's input norm: d x_0 = input_layernorm_0'(d n_0) + d h_0.
  norm_backward(stream, d_resid_a_, layout_.layer(0).input_norm, resid_[0], rstd_in_[0], d_resid_b_);

  kernels::EmbeddingBackwardParams eb;
  eb.dtable = grads_ + layout_.embedding();
  eb.dout = d_resid_a_;
  eb.tokens = tokens;
  eb.scratch = embedding_scratch_;
  eb.scratch_bytes = embedding_scratch_bytes_;
  eb.T = T;
  eb.H = H;
  eb.vocab_size = m.vocab_size;
  kernels::embedding_backward(stream, eb);
}

// ---- region bodies: only static buffers of layer l and the shared scratch ----

void LlamaStep::attn_forward(cudaStream_t stream, int64_t l) {
  const ModelSpec& m = layout_.spec();
  const int64_t T = T_;
  const LayerParamOffsets& o = layout_.layer(l);
  const LayerBuffers& b = layers_[static_cast<size_t>(l)];

  gemms_->qkv.run(stream, b.qkv, norm_in_[static_cast<size_t>(l)], params_ + o.qkv);

  kernels::RopeParams rope;  // q and k heads are contiguous in the QKV row: rotate them in one launch
  rope.x = b.qkv;
  rope.T = T;
  rope.S = m.seq_length;
  rope.num_heads = m.num_attention_heads + m.num_query_groups;
  rope.head_dim = m.head_dim();
  rope.row_stride = m.qkv_dim();
  rope.base = m.rotary_base;
  rope.scaling = m.rope_scaling;
  kernels::rope_forward(stream, rope);

  kernels::AttentionForwardParams ap;
  ap.out = b.attn;
  ap.lse = b.lse;
  ap.qkv = b.qkv;
  if (m.attention_dropout > 0.0f) {
    ap.dropout_seed = dropout_seeds_ + l;
    ap.dropout_offset = dropout_offsets_ + l;
  }
  ap.workspace = cudnn_workspace_;
  attention_->forward(stream, ap);

  gemms_->o_proj.run(stream, delta_, b.attn, params_ + o.o_proj);
  hidden_dropout_forward(stream, l, DropoutKind::attention_output);

  // h = x + y, m = post_attention_layernorm(h)
  add_and_norm(stream, b.h, b.m, b.rstd_m, resid_[static_cast<size_t>(l)], o.post_norm);
}

void LlamaStep::mlp_forward(cudaStream_t stream, int64_t l) {
  const ModelSpec& m = layout_.spec();
  const int64_t T = T_, F = m.ffn_hidden_size;
  const LayerParamOffsets& o = layout_.layer(l);
  const LayerBuffers& b = layers_[static_cast<size_t>(l)];
  const size_t next = static_cast<size_t>(l + 1);
  const int64_t next_norm = l + 1 < m.num_layers ? layout_.layer(l + 1).input_norm : layout_.final_norm();

  gemms_->gate_up.run(stream, b.gate_up, b.m, params_ + o.gate_up);

  kernels::SwiGluForwardParams sw;
  sw.out = b.act;
  sw.gate_up = b.gate_up;
  sw.T = T;
  sw.F = F;
  kernels::swiglu_forward(stream, sw);

  gemms_->down.run(stream, delta_, b.act, params_ + o.down_proj);
  hidden_dropout_forward(stream, l, DropoutKind::mlp_output);

  // x_{l+1} = h + z, n_{l+1} = next norm(x_{l+1})
  add_and_norm(stream, resid_[next], norm_in_[next], rstd_in_[next], b.h, next_norm);
}

void LlamaStep::mlp_backward(cudaStream_t stream, int64_t l) {
  const ModelSpec& m = layout_.spec();
  const int64_t T = T_, F = m.ffn_hidden_size;
  const LayerParamOffsets& o = layout_.layer(l);
  const LayerBuffers& b = layers_[static_cast<size_t>(l)];
  const size_t next = static_cast<size_t>(l + 1);
  const bool last = l + 1 == m.num_layers;
  const int64_t next_norm = last ? layout_.final_norm() : layout_.layer(l + 1).input_norm;

  // d x_{l+1} = next norm'(d n_{l+1}) + d h_{l+1} (the last layer's output only feeds the final norm).
  norm_backward(stream, d_resid_a_, next_norm, resid_[next], rstd_in_[next], last ? nullptr : d_resid_b_);

  const bf16* dz = hidden_dropout_backward(stream, l, DropoutKind::mlp_output, d_resid_a_);
  gemms_->down_dx.run(stream, d_act_, dz, params_ + o.down_proj);
  gemms_->down_dw.run(stream, grads_ + o.down_proj, dz, b.act);

  kernels::SwiGluBackwardParams sw;
  sw.dgate_up = d_gate_up_;
  sw.dout = d_act_;
  sw.gate_up = b.gate_up;
  sw.T = T;
  sw.F = F;
  kernels::swiglu_backward(stream, sw);

  gemms_->gate_up_dx.run(stream, d_norm_, d_gate_up_, params_ + o.gate_up);  // d m_l
  gemms_->gate_up_dw.run(stream, grads_ + o.gate_up, d_gate_up_, b.m);
}

void LlamaStep::attn_backward(cudaStream_t stream, int64_t l) {
  const ModelSpec& m = layout_.spec();
  const int64_t T = T_;
  const LayerParamOffsets& o = layout_.layer(l);
  const LayerBuffers& b = layers_[static_cast<size_t>(l)];

  // d h_l = post_attention_layernorm'(d m_l) + d x_{l+1}.
  norm_backward(stream, d_resid_b_, o.post_norm, b.h, b.rstd_m, d_resid_a_);

  const bf16* dy = hidden_dropout_backward(stream, l, DropoutKind::attention_output, d_resid_b_);
  gemms_->o_proj_dx.run(stream, d_attn_, dy, params_ + o.o_proj);
  gemms_->o_proj_dw.run(stream, grads_ + o.o_proj, dy, b.attn);

  kernels::AttentionBackwardParams ap;
  ap.dqkv = d_qkv_;
  ap.dout = d_attn_;
  ap.qkv = b.qkv;
  ap.out = b.attn;
  ap.lse = b.lse;
  if (m.attention_dropout > 0.0f) {
    ap.dropout_seed = dropout_seeds_ + l;
    ap.dropout_offset = dropout_offsets_ + l;
  }
  ap.workspace = cudnn_workspace_;
  attention_->backward(stream, ap);

  kernels::RopeParams rope;
  rope.x = d_qkv_;
  rope.T = T;
  rope.S = m.seq_length;
  rope.num_heads = m.num_attention_heads + m.num_query_groups;
  rope.head_dim = m.head_dim();
  rope.row_stride = m.qkv_dim();
  rope.base = m.rotary_base;
  rope.scaling = m.rope_scaling;
  kernels::rope_backward(stream, rope);

  gemms_->qkv_dx.run(stream, d_norm_, d_qkv_, params_ + o.qkv);  // d n_l
  gemms_->qkv_dw.run(stream, grads_ + o.qkv, d_qkv_, norm_in_[static_cast<size_t>(l)]);
}

// ---- shared pieces of the region bodies ----

void LlamaStep::hidden_dropout_forward(cudaStream_t stream, int64_t l, DropoutKind kind) {
  const ModelSpec& m = layout_.spec();
  if (m.hidden_dropout <= 0.0f) return;
  kernels::DropoutForwardParams dp;
  dp.out = delta_;
  dp.in = delta_;
  dp.state = hidden_rng_;
  dp.n = T_ * m.hidden_size;
  dp.p = m.hidden_dropout;
  dp.site = dropout_site(l, kind);
  kernels::dropout_forward(stream, dp);
}

const bf16* LlamaStep::hidden_dropout_backward(cudaStream_t stream, int64_t l, DropoutKind kind, const bf16* dout) {
  const ModelSpec& m = layout_.spec();
  if (m.hidden_dropout <= 0.0f) return dout;
  kernels::DropoutBackwardParams dp;
  dp.din = d_delta_;
  dp.dout = dout;
  dp.state = hidden_rng_;
  dp.n = T_ * m.hidden_size;
  dp.p = m.hidden_dropout;
  dp.site = dropout_site(l, kind);
  kernels::dropout_backward(stream, dp);
  return d_delta_;
}

void LlamaStep::add_and_norm(cudaStream_t stream, bf16* residual_out, bf16* norm_out, float* rstd,
                             const bf16* residual_in, int64_t norm_offset) {
  const ModelSpec& m = layout_.spec();
  kernels::ResidualRmsNormForwardParams rn;
  rn.residual_out = residual_out;
  rn.norm_out = norm_out;
  rn.rstd = rstd;
  rn.residual_in = residual_in;
  rn.delta = delta_;
  rn.weight = params_ + norm_offset;
  rn.T = T_;
  rn.H = m.hidden_size;
  rn.eps = static_cast<float>(m.layernorm_epsilon);
  kernels::residual_rmsnorm_forward(stream, rn);
}

void LlamaStep::norm_backward(cudaStream_t stream, bf16* din, int64_t norm_offset, const bf16* in, const float* rstd,
                              const bf16* dresidual) {
  kernels::RmsNormBackwardParams nb;
  nb.din = din;
  nb.dweight = grads_ + norm_offset;
  nb.scratch = rmsnorm_scratch_;
  nb.scratch_bytes = rmsnorm_scratch_bytes_;
  nb.dout = d_norm_;
  nb.in = in;
  nb.weight = params_ + norm_offset;
  nb.rstd = rstd;
  nb.dresidual = dresidual;
  nb.T = T_;
  nb.H = layout_.spec().hidden_size;
  kernels::rmsnorm_backward(stream, nb);
}

}  // namespace sg::model
