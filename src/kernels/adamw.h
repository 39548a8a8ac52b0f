#pragma once
// AdamW: one fused pass over the flat fp32 buffers (master weights, grads, both moments) that also
// writes the bf16 compute copy of the weights. CPU twin: reference/adamw.h (same formula, same order).
//
// Graph-safe: lr, the step counter and the clip coefficient are read from device memory every launch.
// The step counter holds the number of optimizer steps DONE; this update is step t = *step_counter + 1
// (bias correction 1 - beta^t). Order within a training step:
//   grad_global_norm (-> clip coefficient) ; lr_schedule_update (reads the counter) ; adamw_step ;
//   increment_step_counter.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/bf16.h"

namespace sg::kernels {

struct AdamWHyperparams {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
};

struct AdamWParams {
  float* master_weights = nullptr;  // [n] fp32, updated in place
  bf16* compute_weights = nullptr;  // [n] bf16 copy of the updated master weights; nullptr: not written
  const float* grads = nullptr;     // [n] fp32 main_grad (not modified)
  float* exp_avg = nullptr;         // [n] fp32 first moment, updated in place
  float* exp_avg_sq = nullptr;      // [n] fp32 second moment, updated in place
  int64_t n = 0;
  // Decoupled weight decay on elements [0, n_decay) only (the model lays out matrices first, then
  // norms/biases which are not decayed). 0 <= n_decay <= n.
  int64_t n_decay = 0;
  const float* lr = nullptr;            // device scalar (lr_schedule_update writes it)
  const int64_t* step_counter = nullptr;  // device scalar: steps done so far; this update is t = value + 1
  const float* grad_scale = nullptr;    // device scalar (clip coefficient); nullptr means 1
  AdamWHyperparams hyper;               // plan-time constants
};

// Per element i (fp32; step size lr / (1 - beta1^t) and sqrt(1 - beta2^t) in fp64 then rounded):
//   g = grads[i] * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g g;
//   p = p * (1 - lr wd) if i < n_decay; p -= step_size * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
void adamw_step(cudaStream_t stream, const AdamWParams& p);

}  // namespace sg::kernels
