#include "model/cpu_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/bf16_bits.h"
#include "core/error.h"
#include "core/strings.h"
#include "model/dropout_sites.h"
#include "model/init.h"
#include "model/layer_registry.h"
#include "model/lr_schedule.h"
#include "model/weight_decay_schedule.h"
#include "reference/adamw.h"
#include "reference/cross_entropy.h"
#include "reference/dropout.h"
#include "reference/embedding.h"
#include "reference/grad_norm.h"
#include "reference/linear.h"
#include "reference/lr_schedule.h"
#include "reference/rmsnorm.h"
#include "reference/weight_decay_schedule.h"

namespace sg::model {

namespace {

// Rows of logits materialised at once by the LM head + cross-entropy (as the GPU's chunked LM head).
constexpr int64_t kLmHeadChunkRows = 128;

size_t sz(int64_t n) { return static_cast<size_t>(n); }

void add_into(float* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

}  // namespace

CpuModel::CpuModel(const ModelSpec& model, const BatchSpec& batch, const OptimizerSpec& optimizer,
                   rng::RngState rng)
    : layers_(make_cpu_layers(model)),
      layout_(declare_model(model, [this](size_t i, LayerDeclarations& d) { layers_[i]->declare(d); })),
      recompute_(std::make_unique<RecomputeLayout>(model)),
      batch_(batch),
      optimizer_(optimizer),
      rng_(rng) {
  SG_CHECK(batch.micro_batch_size > 0 && batch.num_microbatches > 0,
           "micro_batch_size and num_microbatches must be positive");
  T_ = batch.tokens_per_microbatch(model);
  const int64_t H = model.hidden_size;
  for (auto& layer : layers_) layer->plan(model, batch);
  weights_ = initial_parameters(layout_, rng.seed);
  grads_.assign(sz(layout_.total()), 0.0f);
  exp_avg_.assign(sz(layout_.total()), 0.0f);
  exp_avg_sq_.assign(sz(layout_.total()), 0.0f);
  const size_t boundaries = layers_.size() + 1;
  resid_.assign(boundaries, std::vector<float>(sz(T_ * H)));
  norm_.assign(boundaries, std::vector<float>(sz(T_ * H)));
  rstd_.assign(boundaries, std::vector<float>(sz(T_)));
  for (auto* v : {&delta_, &dropped_, &d_norm_, &d_resid_a_, &d_resid_b_}) v->resize(sz(T_ * H));
}

CpuModel::~CpuModel() = default;

void CpuModel::zero_grads() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

void CpuModel::load_state(const FlatView& weights, const FlatView& exp_avg, const FlatView& exp_avg_sq,
                          int64_t steps_done, rng::RngState rng) {
  const auto check = [&](const char* what, const FlatView& v) {
    SG_CHECK(v.size() == layout_.total(),
             strprintf("%s has %lld values; this model's flat parameter buffer has %lld (a checkpoint of another "
                       "model shape?)",
                       what, static_cast<long long>(v.size()), static_cast<long long>(layout_.total())));
  };
  check("main weights", weights);
  check("exp_avg", exp_avg);
  check("exp_avg_sq", exp_avg_sq);
  SG_CHECK(steps_done >= 0, "steps_done must not be negative");
  // Into the buffers the model holds anyway: no second host copy of the state.
  const auto load = [&](const FlatView& values, std::vector<float>& into, kernels::FloatDtype dtype) {
    values.read(0, values.size(), into.data());
    // A bf16 moment holds the values rounded to nearest even, as the GPU step's upload does.
    if (dtype == kernels::FloatDtype::bf16) {
      for (float& x : into) x = round_to_bf16(x);
    }
  };
  load(weights, weights_, kernels::FloatDtype::fp32);
  load(exp_avg, exp_avg_, optimizer_.exp_avg_dtype);
  load(exp_avg_sq, exp_avg_sq_, optimizer_.exp_avg_sq_dtype);
  steps_done_ = steps_done;
  rng_ = rng;
}

double CpuModel::microbatch(const int32_t* tokens, const int32_t* targets, const float* loss_mask, rng::RngState rng,
                            bool backward, float grad_scale, TokenLossSums* sums) {
  const ModelSpec& m = layout_.spec;
  const int64_t T = T_, H = m.hidden_size, V = m.vocab_size;
  const size_t N = layers_.size();
  const float eps = static_cast<float>(m.layernorm_epsilon);
  const float* W = weights_.data();
  float* G = grads_.data();
  const auto norm_weight = [&](size_t i) { return layout_.offset(layout_.norm_before(static_cast<int64_t>(i))); };
  loss_scale_ = grad_scale;  // the layers' auxiliary losses scale their gradients like the LM loss
  const float hidden_p = dropout_on_ ? m.hidden_dropout : 0.0f;  // evaluate(): dropout off

  // Forward: x_0 = embedding, n_0 = its pre-norm; per layer the step's fused add & next norm.
  ref::embedding_forward(resid_[0].data(), tokens, W + layout_.offset(layout_.embedding), T, H);
  ref::rmsnorm_forward(norm_[0].data(), rstd_[0].data(), resid_[0].data(), W + norm_weight(0), T, H, eps);
  for (size_t i = 0; i < N; ++i) {
    layers_[i]->forward(layer_io(i, nullptr, rng));
    ref::dropout_forward(dropped_.data(), delta_.data(), T * H, hidden_p, rng, layout_.output_sites[i]);
    ref::residual_rmsnorm_forward(resid_[i + 1].data(), norm_[i + 1].data(), rstd_[i + 1].data(), resid_[i].data(),
                                  dropped_.data(), W + norm_weight(i + 1), T, H, eps);
  }
  // What recompute gives back is gone until its group is recomputed.
  if (backward) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (size_t k = 0; k < N; ++k) {
      if (recompute_->recomputes_norm(static_cast<int>(k))) std::fill(norm_[k].begin(), norm_[k].end(), nan);
      if (recompute_->recomputes_residual(static_cast<int>(k))) std::fill(resid_[k].begin(), resid_[k].end(), nan);
    }
  }

  // Chunked LM head + cross-entropy; in the backward each chunk's dlogits go straight into
  // d n_N (d_norm_) and the lm_head gradient, as on the GPU.
  const int64_t lm_head = layout_.offset(layout_.lm_head);
  const float* final_out = norm_[N].data();
  const double mask_sum = ref::loss_token_count(loss_mask, T);
  const double count = std::max(mask_sum, 1.0);
  const float ce_scale = static_cast<float>(static_cast<double>(grad_scale) / count);
  std::vector<float> logits(sz(std::min(T, kLmHeadChunkRows) * V)), dlogits;
  if (backward) dlogits.resize(logits.size());
  double loss_sum = 0.0;
  for (int64_t r0 = 0; r0 < T; r0 += kLmHeadChunkRows) {
    const int64_t rows = std::min(kLmHeadChunkRows, T - r0);
    ref::linear_forward(logits.data(), final_out + r0 * H, W + lm_head, rows, H, V);
    loss_sum += ref::cross_entropy_forward_backward(backward ? dlogits.data() : nullptr, logits.data(), targets + r0,
                                                    loss_mask + r0, rows, V, ce_scale);
    if (backward) {
      ref::linear_backward_input(d_norm_.data() + r0 * H, dlogits.data(), W + lm_head, rows, H, V);
      ref::linear_backward_weight(G + lm_head, dlogits.data(), final_out + r0 * H, rows, H, V);
    }
  }
  const double loss = loss_sum / count;
  if (sums != nullptr) {
    sums->loss += loss_sum;
    sums->tokens += mask_sum;
  }
  if (!backward) return loss;

  // Backward: d x_k lives in d_resid[k % 2]. d x_N = final_norm'(d n_N); per layer, reversed:
  // d delta_i = dropout'(d x_{i+1}); the layer gives d n_i; d x_i = norm_i'(d n_i) + d x_{i+1}.
  float* d_resid[2] = {d_resid_a_.data(), d_resid_b_.data()};
  ref::rmsnorm_backward(d_resid[N % 2], G + norm_weight(N), d_norm_.data(), resid_[N].data(), W + norm_weight(N),
                        rstd_[N].data(), T, H);
  for (size_t i = N; i-- > 0;) {
    float* d_out = d_resid[(i + 1) % 2];
    float* d_in = d_resid[i % 2];
    if (const RecomputeGroup* group = recompute_->group_ending_at(static_cast<int>(i))) recompute_group(*group, rng);
    ref::dropout_backward(dropped_.data(), d_out, T * H, m.hidden_dropout, rng, layout_.output_sites[i]);
    layers_[i]->backward(layer_io(i, dropped_.data(), rng));
    ref::rmsnorm_backward(d_in, G + norm_weight(i), d_norm_.data(), resid_[i].data(), W + norm_weight(i),
                          rstd_[i].data(), T, H);
    add_into(d_in, d_out, T * H);  // the residual path x_i -> x_{i+1}
  }
  ref::embedding_backward(G + layout_.offset(layout_.embedding), d_resid[0], tokens, T, H);
  return loss;
}

CpuLayerIO CpuModel::layer_io(size_t i, const float* d_output, rng::RngState rng) {
  CpuLayerIO io{layout_};
  io.weights = weights_.data();
  io.grads = grads_.data();
  io.input = norm_[i].data();
  io.output = delta_.data();
  io.d_output = d_output;
  io.d_input = d_norm_.data();
  io.rng = rng;
  io.dropout = dropout_on_;
  io.aux_losses = &aux_losses_;
  io.loss_scale = loss_scale_;
  return io;
}

// The GPU step's TrainStep::recompute_group, on the CPU twins. It runs before the layer's output
// dropout backward here (that writes dropped_, which the recompute uses); the GPU runs it after the
// norm backward of the boundary above, which reads nothing the recompute writes.
void CpuModel::recompute_group(const RecomputeGroup& group, rng::RngState rng) {
  const ModelSpec& m = layout_.spec;
  const int64_t T = T_, H = m.hidden_size;
  const float eps = static_cast<float>(m.layernorm_epsilon);
  const float* W = weights_.data();
  for (int i = group.begin; i < group.end; ++i) {
    const size_t at = static_cast<size_t>(i);
    if (recompute_->recomputes_norm(i)) {
      ref::rmsnorm_forward(norm_[at].data(), rstd_[at].data(), resid_[at].data(),
                           W + layout_.offset(layout_.norm_before(i)), T, H, eps);
    }
    if (recompute_->reruns_layer(i)) layers_[at]->recompute(layer_io(at, nullptr, rng));
    if (group.full && i + 1 < group.end) {
      ref::dropout_forward(dropped_.data(), delta_.data(), T * H, m.hidden_dropout, rng, layout_.output_sites[at]);
      ref::residual_rmsnorm_forward(resid_[at + 1].data(), norm_[at + 1].data(), rstd_[at + 1].data(),
                                    resid_[at].data(), dropped_.data(), W + layout_.offset(layout_.norm_before(i + 1)),
                                    T, H, eps);
    }
  }
}

float CpuModel::compute_gradients(const HostBatch& batch, uint64_t first_offset) {
  batch.check(layout_.spec, batch_);
  zero_grads();
  aux_losses_ = {};
  const int64_t M = batch_.num_microbatches;
  double loss = 0.0;
  for (int64_t mb = 0; mb < M; ++mb) {
    const size_t at = sz(mb * T_);
    const rng::RngState rng{rng_.seed, first_offset + static_cast<uint64_t>(mb) * kRngOffsetPerMicrobatch};
    loss += microbatch(batch.tokens.data() + at, batch.targets.data() + at, batch.loss_mask.data() + at, rng, true,
                       1.0f / static_cast<float>(M));
    // bf16 main gradients (ddp.grad_reduce_in_fp32=false): each microbatch's sum rounded to nearest even, as the
    // GPU's writers round where they store it.
    if (optimizer_.main_grad_dtype == kernels::FloatDtype::bf16) {
      for (float& g : grads_) g = round_to_bf16(g);
    }
  }
  return static_cast<float>(loss / static_cast<double>(M));
}

double CpuModel::compute_loss(const HostBatch& batch, uint64_t first_offset, TokenLossSums* sums) {
  batch.check(layout_.spec, batch_);
  aux_losses_ = {};
  const int64_t M = batch_.num_microbatches;
  double loss = 0.0;
  for (int64_t mb = 0; mb < M; ++mb) {
    const size_t at = sz(mb * T_);
    const rng::RngState rng{rng_.seed, first_offset + static_cast<uint64_t>(mb) * kRngOffsetPerMicrobatch};
    loss += microbatch(batch.tokens.data() + at, batch.targets.data() + at, batch.loss_mask.data() + at, rng, false,
                       1.0f, sums);
  }
  aux_losses_.load_balancing /= static_cast<double>(M);
  aux_losses_.z /= static_cast<double>(M);
  return loss / static_cast<double>(M);
}

TokenLossSums CpuModel::evaluate(const HostBatch& batch) {
  struct DropoutOff {
    bool& flag;
    explicit DropoutOff(bool& f) : flag(f) { flag = false; }
    ~DropoutOff() { flag = true; }
  } off(dropout_on_);
  TokenLossSums sums;
  compute_loss(batch, rng_.offset, &sums);
  return sums;
}

CpuStepResult CpuModel::train_step(const HostBatch& batch) {
  CpuStepResult r;
  for (auto& layer : layers_) layer->step_begin();
  r.loss = compute_gradients(batch, rng_.offset);
  r.aux_loss = static_cast<float>(aux_losses_.load_balancing);
  r.z_loss = static_cast<float>(aux_losses_.z);
  r.loss_finite = std::isfinite(r.loss);
  const double norm = ref::grad_global_norm(grads_.data(), layout_.total());
  r.grad_norm = static_cast<float>(norm);
  r.grads_finite = std::isfinite(norm);
  r.clip_coef = ref::clip_coefficient(norm, static_cast<float>(optimizer_.clip_grad));
  r.lr = ref::lr_at(lr_schedule<ref::LrSchedule>(optimizer_, batch_), steps_done_);
  // The layers' own updates (the expert bias) before AdamW, as the GPU step orders them.
  for (auto& layer : layers_) layer->step_end(layout_, weights_.data());
  ref::AdamWConfig adam;
  adam.beta1 = static_cast<float>(optimizer_.adam_beta1);
  adam.beta2 = static_cast<float>(optimizer_.adam_beta2);
  adam.eps = static_cast<float>(optimizer_.adam_eps);
  adam.weight_decay =
      ref::weight_decay_at(weight_decay_schedule<ref::WeightDecaySchedule>(optimizer_, batch_), steps_done_);
  adam.exp_avg_bf16 = optimizer_.exp_avg_dtype == kernels::FloatDtype::bf16;
  adam.exp_avg_sq_bf16 = optimizer_.exp_avg_sq_dtype == kernels::FloatDtype::bf16;
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
