#pragma once
// The CPU fp32 backend of the dense Llama: forward, backward and the whole training step composed ONLY
// of the sg::ref functions (the CPU twins of the GPU kernels). It is the ground truth of the GPU step's
// tests, so it follows the GPU step's structure exactly: the same parameter layout, the same dropout
// sites and RNG offsets (model/dropout_sites.h), the same loss scaling (each microbatch's mean loss
// times 1/num_microbatches), fp32 gradients accumulated over microbatches, global-norm clipping and one
// AdamW update with the lr of the step counter.
//
// Block (HF Llama, pre-norm), per layer l with input x:
//   n1 = rmsnorm(x; input_layernorm)          qkv = n1 Wqkv^T, rope on q and k
//   a  = attention(qkv)  (causal, GQA, attention_dropout)
//   h  = x + dropout(a Wo^T)                  n2 = rmsnorm(h; post_attention_layernorm)
//   x' = h + dropout(down(silu(gate(n2)) * up(n2)))
// then norm, lm_head, masked mean cross-entropy.
#include <cstdint>
#include <vector>

#include "cuda/philox.h"
#include "model/batch.h"
#include "model/param_layout.h"
#include "model/spec.h"

namespace sg::model {

struct CpuStepResult {
  float loss = 0.0f;       // mean over microbatches of each microbatch's masked mean loss
  float grad_norm = 0.0f;  // global L2 norm of the gradients before clipping
  float clip_coef = 1.0f;  // applied gradient scale (1 = not clipped)
  float lr = 0.0f;         // learning rate of this update
  bool loss_finite = true;
  bool grads_finite = true;
};

class CpuModel {
 public:
  // Parameters start at model/init.h's values for rng.seed; dropout draws from `rng` (offset advanced
  // by kRngOffsetPerMicrobatch after each microbatch of train_step).
  CpuModel(const ModelSpec& model, const BatchSpec& batch, const OptimizerSpec& optimizer, rng::RngState rng);

  const ParamLayout& layout() const { return layout_; }
  const ModelSpec& model_spec() const { return layout_.spec(); }
  const BatchSpec& batch_spec() const { return batch_; }
  int64_t tokens_per_microbatch() const { return T_; }

  // The flat buffers (layout().total() floats each; see model/param_layout.h).
  std::vector<float>& weights() { return weights_; }
  const std::vector<float>& weights() const { return weights_; }
  const std::vector<float>& grads() const { return grads_; }
  const std::vector<float>& exp_avg() const { return exp_avg_; }
  const std::vector<float>& exp_avg_sq() const { return exp_avg_sq_; }
  void zero_grads();
  // Restores a checkpointed state (each vector layout().total() floats); throws sg::Error on a size
  // mismatch naming the buffer and both sizes.
  void load_state(const std::vector<float>& weights, const std::vector<float>& exp_avg,
                  const std::vector<float>& exp_avg_sq, int64_t steps_done, rng::RngState rng);

  // Forward (and backward when `backward`) of ONE microbatch: tokens/targets/loss_mask point at its
  // T = micro_batch_size * seq_length entries. Backward ADDS d(loss * grad_scale)/dparam into grads().
  // Returns the microbatch's masked mean loss (fp64 sum / max(mask sum, 1)).
  double microbatch(const int32_t* tokens, const int32_t* targets, const float* loss_mask, rng::RngState rng,
                    bool backward, float grad_scale);

  // Zeroes the gradients, runs every microbatch of `batch` (microbatch m with RngState{seed,
  // first_offset + m * kRngOffsetPerMicrobatch}) and leaves d(step loss)/dparam in grads().
  // Returns the step loss (mean over microbatches). Does not touch the optimizer or the RNG counter.
  float compute_gradients(const HostBatch& batch, uint64_t first_offset);
  // The same loss without the backward (grads untouched); for finite differences.
  double compute_loss(const HostBatch& batch, uint64_t first_offset);

  // One optimizer step, as the GPU step does it: gradients of all microbatches with the current RNG
  // offset, global grad norm, clip coefficient, lr from the step counter, AdamW (decay on
  // [0, num_decay)), then steps_done()++ and the RNG offset advanced by num_microbatches.
  CpuStepResult train_step(const HostBatch& batch);

  // Forward-only evaluation (the twin of LlamaStep::enqueue_eval; Megatron's model.eval()): the loss
  // of `batch` as train_step computes it (mean over microbatches of each one's masked mean loss) with
  // dropout off. Changes no weight, gradient, optimizer state, step counter or RNG offset.
  float evaluate(const HostBatch& batch);

  int64_t steps_done() const { return steps_done_; }
  rng::RngState rng_state() const { return rng_; }

 private:
  struct LayerActivations {
    std::vector<float> x, n1, rstd1, qkv, attn, lse, h, n2, rstd2, gate_up, act;
  };
  void forward_layer(int64_t l, float* x_out, rng::RngState rng);  // input: acts_[l].x
  // dx [T, H]: in = d loss / d(layer output), out = d loss / d(layer input).
  void backward_layer(int64_t l, std::vector<float>& dx, rng::RngState rng);

  ParamLayout layout_;
  BatchSpec batch_;
  OptimizerSpec optimizer_;
  rng::RngState rng_;
  bool dropout_on_ = true;  // false while evaluate() runs
  int64_t steps_done_ = 0;
  int64_t T_ = 0;  // tokens per microbatch

  std::vector<float> weights_, grads_, exp_avg_, exp_avg_sq_;
  std::vector<LayerActivations> acts_;
  std::vector<float> x_final_, norm_final_, rstd_final_;  // final norm input/output, its rstd
  // Scratch reused by every layer.
  std::vector<float> tmp_a_, tmp_b_, d_a_, d_b_, d_c_, d_qkv_, d_gate_up_, d_act_;
};

}  // namespace sg::model
