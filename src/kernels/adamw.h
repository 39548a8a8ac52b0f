#pragma once
// AdamW: one fused pass over the flat buffers (fp32 master weights, the main grads, both moments) that
// also writes the bf16 compute copy of the weights. CPU twin: reference/adamw.h (same formula, same order).
// Each moment is stored in fp32 or bf16 (Megatron's precision-aware optimizer: optimizer.exp_avg_dtype,
// optimizer.exp_avg_sq_dtype), and the gradients in fp32 or bf16 (ddp.grad_reduce_in_fp32); the update
// computes in fp32 either way and a bf16 moment is rounded to nearest even only when it is stored.
//
// Graph-safe: the step's constants (from lr and t) and the clip coefficient are read from device memory
// every launch. Order within a training step:
//   grad_norm_partials ; optimizer_step_scalars (kernels/optimizer_step_scalars.h: clip coefficient, lr,
//   AdamWStepConstants for update t = steps done + 1, then steps done + 1) ; adamw_step.
// The constants are computed once per step there, so no AdamW thread evaluates the fp64 pow itself.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/bf16.h"
#include "kernels/float_buffer.h"

namespace sg::kernels {

// The weight decay is no constant of the run: optimizer_step_scalars computes it from the step (Megatron's
// schedule, kernels/weight_decay_schedule.h) into AdamWStepConstants::decay_factor.
struct AdamWHyperparams {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
};

// The update's step-dependent constants, from lr and t (the 1-based update), computed as the CPU twin does
// (ref::adamw_step_constants): bias corrections in fp64, then rounded to fp32.
struct AdamWStepConstants {
  float step_size = 0.0f;              // lr / (1 - beta1^t)
  float bias_correction2_sqrt = 1.0f;  // sqrt(1 - beta2^t)
  float decay_factor = 1.0f;           // 1 - lr * weight_decay (fp32, this update's decay), on elements [0, n_decay)
};

struct AdamWParams {
  float* master_weights = nullptr;  // [n] fp32, updated in place
  bf16* compute_weights = nullptr;  // [n] bf16 copy of the updated master weights; nullptr: not written
  FloatBuffer grads;                // [n] main_grad, fp32 or bf16 (ddp.grad_reduce_in_fp32); not modified
  FloatBuffer exp_avg;             // [n] first moment, updated in place
  FloatBuffer exp_avg_sq;          // [n] second moment, updated in place
  int64_t n = 0;
  // Decoupled weight decay on elements [0, n_decay) only (the model lays out matrices first, then
  // norms/biases which are not decayed). 0 <= n_decay <= n.
  int64_t n_decay = 0;
  const AdamWStepConstants* step_constants = nullptr;  // device (optimizer_step_scalars writes them)
  const float* grad_scale = nullptr;  // device scalar (clip coefficient); nullptr means 1
  // Plan-time constants: beta1, beta2 and eps (the weight decay is in step_constants' decay_factor).
  AdamWHyperparams hyper;
};

// Per element i (fp32), with c = *step_constants:
//   g = grads[i] * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g g;
//   p = p * c.decay_factor if i < n_decay; p -= c.step_size * m / (sqrt(v) / c.bias_correction2_sqrt + eps);
//   then m and v are stored (rounded to bf16 where their buffer is bf16; the weight update above uses
//   the fp32 values).
void adamw_step(cudaStream_t stream, const AdamWParams& p);

}  // namespace sg::kernels
