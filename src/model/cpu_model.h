#pragma once
// The CPU fp32 backend: forward, backward and the whole training step composed ONLY of the sg::ref
// functions (the CPU twins of the GPU kernels), over the stack's CPU layer twins (model/layer.h). It
// is the ground truth of the GPU step's tests, so it follows the GPU step's structure exactly: the
// same declarations (parameter layout, dropout sites) and RNG offsets (model/dropout_sites.h), the same
// loss scaling (each microbatch's mean loss times 1/num_microbatches), fp32 gradients accumulated over
// microbatches, global-norm clipping and one AdamW update with the lr of the step counter.
//
// Per layer i with residual input x_i (model/stack.h):
//   n_i = rmsnorm(x_i; layer i's pre-norm)     delta_i = layer_i(n_i)
//   x_{i+1} = x_i + dropout(delta_i)           (the layer's output dropout site)
// then the final norm, lm_head, masked mean cross-entropy.
//
// Activation recompute (model.recompute_*) follows the GPU step's schedule (model/recompute_layout.h):
// after the forward, the step's buffers that recompute gives back (pre-norm outputs, inner residuals)
// are poisoned with NaN, and each group is recomputed at the start of its last layer's backward by
// rerunning the norms, the layers' forwards (with the microbatch's RNG state) and the dropout + add &
// norm between them. A wrong schedule or different random numbers would change the results.
#include <cstdint>
#include <memory>
#include <vector>

#include "core/philox.h"
#include "model/batch.h"
#include "model/flat_view.h"
#include "model/layer.h"
#include "model/recompute_layout.h"
#include "model/spec.h"
#include "model/stack.h"

namespace sg::model {

struct CpuStepResult {
  float loss = 0.0f;       // mean over microbatches of each microbatch's masked mean loss
  float grad_norm = 0.0f;  // global L2 norm of the gradients before clipping
  float clip_coef = 1.0f;  // applied gradient scale (1 = not clipped)
  float lr = 0.0f;         // learning rate of this update
  float aux_loss = 0.0f;   // auxiliary losses (MoE), apart from `loss`: StepScalars' aux_loss / z_loss
  float z_loss = 0.0f;
  bool loss_finite = true;
  bool grads_finite = true;
};

// An evaluated batch's cross-entropy summed over its loss tokens, and the count of those tokens (the loss mask's
// sum): the numerator and denominator Bridge's evaluate() adds over an evaluation (StepScalars::eval_loss_sums).
struct TokenLossSums {
  double loss = 0.0;
  double tokens = 0.0;
};

class CpuModel {
 public:
  // Parameters start at model/init.h's values for rng.seed; dropout draws from `rng` (offset advanced
  // by kRngOffsetPerMicrobatch after each microbatch of train_step). Throws sg::Error for a layer kind
  // that is not implemented (model/layer_registry.h).
  CpuModel(const ModelSpec& model, const BatchSpec& batch, const OptimizerSpec& optimizer, rng::RngState rng);
  ~CpuModel();

  const ModelLayout& layout() const { return layout_; }
  const ModelSpec& model_spec() const { return layout_.spec; }
  const BatchSpec& batch_spec() const { return batch_; }
  int64_t tokens_per_microbatch() const { return T_; }

  // The flat buffers (layout().total() floats each; see model/param_builder.h).
  std::vector<float>& weights() { return weights_; }
  const std::vector<float>& weights() const { return weights_; }
  const std::vector<float>& grads() const { return grads_; }
  const std::vector<float>& exp_avg() const { return exp_avg_; }
  const std::vector<float>& exp_avg_sq() const { return exp_avg_sq_; }
  void zero_grads();
  // Restores a checkpointed state (each view layout().total() floats, read straight into the model's buffers);
  // throws sg::Error on a size mismatch naming the buffer and both sizes.
  void load_state(const FlatView& weights, const FlatView& exp_avg, const FlatView& exp_avg_sq, int64_t steps_done,
                  rng::RngState rng);

  // Forward (and backward when `backward`) of ONE microbatch: tokens/targets/loss_mask point at its
  // T = micro_batch_size * seq_length entries. Backward ADDS d(loss * grad_scale)/dparam into grads().
  // Returns the microbatch's masked mean loss (fp64 sum / max(mask sum, 1)); `sums`, when given, gets the
  // sum and the mask sum added.
  double microbatch(const int32_t* tokens, const int32_t* targets, const float* loss_mask, rng::RngState rng,
                    bool backward, float grad_scale, TokenLossSums* sums = nullptr);

  // Zeroes the gradients, runs every microbatch of `batch` (microbatch m with RngState{seed,
  // first_offset + m * kRngOffsetPerMicrobatch}) and leaves d(step loss)/dparam in grads().
  // Returns the step loss (mean over microbatches). Does not touch the optimizer or the RNG counter.
  float compute_gradients(const HostBatch& batch, uint64_t first_offset);
  // The same loss without the backward (grads untouched); for finite differences. `sums`, when given, gets every
  // microbatch's token loss sum and token count added.
  double compute_loss(const HostBatch& batch, uint64_t first_offset, TokenLossSums* sums = nullptr);
  // The auxiliary losses (MoE load balancing, z-loss) of the last compute_gradients / compute_loss,
  // per layer the mean over microbatches, summed over layers. The objective whose gradient
  // compute_gradients leaves is compute_loss + aux_losses().load_balancing + aux_losses().z.
  const AuxLosses& aux_losses() const { return aux_losses_; }

  // One optimizer step, as the GPU step does it: gradients of all microbatches with the current RNG
  // offset, global grad norm, clip coefficient, lr from the step counter, AdamW (decay on
  // [0, num_decay)), then steps_done()++ and the RNG offset advanced by num_microbatches.
  CpuStepResult train_step(const HostBatch& batch);

  // Forward-only evaluation (the twin of TrainStep::enqueue_eval; Megatron's model.eval()): the token loss sum and
  // token count of `batch` with dropout off (an evaluation divides the totals of its batches, as Bridge's
  // evaluate()). Changes no weight, gradient, optimizer state, step counter or RNG offset.
  TokenLossSums evaluate(const HostBatch& batch);

  int64_t steps_done() const { return steps_done_; }
  const std::vector<std::unique_ptr<CpuLayer>>& layers() const { return layers_; }
  rng::RngState rng_state() const { return rng_; }

 private:
  void recompute_group(const RecomputeGroup& group, rng::RngState rng);
  CpuLayerIO layer_io(size_t i, const float* d_output, rng::RngState rng);

  std::vector<std::unique_ptr<CpuLayer>> layers_;
  ModelLayout layout_;
  std::unique_ptr<RecomputeLayout> recompute_;
  BatchSpec batch_;
  OptimizerSpec optimizer_;
  rng::RngState rng_;
  bool dropout_on_ = true;  // false while evaluate() runs
  int64_t steps_done_ = 0;
  int64_t T_ = 0;  // tokens per microbatch
  AuxLosses aux_losses_;
  float loss_scale_ = 1.0f;  // this microbatch's grad_scale, for layer_io

  std::vector<float> weights_, grads_, exp_avg_, exp_avg_sq_;
  // The residual stream at the N + 1 layer boundaries, its pre-norm outputs and their rstd (the last
  // boundary: the final norm).
  std::vector<std::vector<float>> resid_, norm_, rstd_;
  // Scratch: a layer's output, its dropped output, and d x at two consecutive boundaries.
  std::vector<float> delta_, dropped_, d_norm_, d_resid_a_, d_resid_b_;
};

}  // namespace sg::model
