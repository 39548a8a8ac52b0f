#pragma once
// Softmax cross-entropy over the vocabulary: loss and dlogits in one kernel. For V <= 32768 each row is
// read from HBM once: fp32 logits into registers (max, sum of exps, dlogits from the kept exps), bf16
// logits into shared memory (kernels/cross_entropy_registers.cuh); above that, one pass for the online
// max/sum and one more read for dlogits. Works on a chunk of rows at a time so the caller never
// holds all T x V logits (see kernels/lm_head.h).
// CPU twin: reference/cross_entropy.h.
//
// The mean loss of one microbatch, graph-safe (nothing read on the host):
//   1. loss_token_count            token_count = sum(loss_mask[0..T))                once per microbatch
//   2. cross_entropy_forward_backward  for each chunk of rows: dlogits (bf16) and row_loss (fp32)
//   3. cross_entropy_loss_reduce   *loss_accumulator += loss_scale * sum(row_loss) / max(token_count, 1)
// loss_scale = 1 / num_microbatches is a plan-time constant; the step zeroes *loss_accumulator once at
// its start, so after the last microbatch it holds the step loss. The reduction runs over the whole
// microbatch's row_loss (not per chunk), so the loss does not depend on the chunk size.
// Evaluation instead adds the unscaled token sum and the token count into loss_sums (Bridge's evaluate() divides
// the two totals of the whole evaluation, so its loss is a mean over tokens, however the rows are grouped).
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/bf16.h"

namespace sg::kernels {

enum class LogitsDtype { bf16, fp32 };

struct LossTokenCountParams {
  const float* loss_mask = nullptr;  // [T]
  int64_t T = 0;
  float* token_count = nullptr;  // device scalar, OVERWRITTEN with sum(mask) (fp64 sum, exact for 0/1 masks)
};
void loss_token_count(cudaStream_t stream, const LossTokenCountParams& p);

struct CrossEntropyParams {
  const void* logits = nullptr;  // [rows, logits_stride] of logits_dtype; columns [0, V) are read
  LogitsDtype logits_dtype = LogitsDtype::fp32;
  const int32_t* targets = nullptr;  // [rows]; in [0, V) where loss_mask != 0
  const float* loss_mask = nullptr;  // [rows]
  bf16* dlogits = nullptr;           // [rows, dlogits_stride]: columns [0, V) OVERWRITTEN
  float* row_loss = nullptr;         // [rows] OVERWRITTEN with mask * (logsumexp - logit[target]), fp32
  int64_t rows = 0;
  int64_t V = 0;
  int64_t logits_stride = 0;   // elements between rows; 0 means V
  int64_t dlogits_stride = 0;  // elements between rows; 0 means V
  // dlogits = (loss_scale / max(*token_count, 1)) * mask * (softmax - onehot)
  const float* token_count = nullptr;  // device scalar from loss_token_count
  float loss_scale = 1.0f;             // plan-time: 1 / num_microbatches
};
// One block per row. A row whose mask != 0 and whose target is outside [0, V) gets row_loss = NaN (so
// check_for_nan_in_loss reports it) and no onehot term; a masked-out row (mask == 0) gets row_loss 0
// and dlogits 0, and its target is never read.
void cross_entropy_forward_backward(cudaStream_t stream, const CrossEntropyParams& p);

struct CrossEntropyLossReduceParams {
  const float* row_loss = nullptr;  // [T] from cross_entropy_forward_backward over all chunks
  int64_t T = 0;
  const float* token_count = nullptr;  // device scalar from loss_token_count
  float loss_scale = 1.0f;             // plan-time: 1 / num_microbatches
  // Exactly one of the two outputs:
  float* loss_accumulator = nullptr;   // device scalar: += loss_scale * sum(row_loss) / max(count, 1)
  double* loss_sums = nullptr;         // device [2]: += {sum(row_loss), count} (evaluation; loss_scale unused)
};
// One block, fixed-order fp64 sum; one thread does the read-modify-write (no atomics).
void cross_entropy_loss_reduce(cudaStream_t stream, const CrossEntropyLossReduceParams& p);

}  // namespace sg::kernels
