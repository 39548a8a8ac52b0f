#pragma once
// CPU fp32 twin of src/kernels/cross_entropy: softmax cross-entropy over a vocabulary, loss and dlogits
// in one call (the GPU kernel does both in one pass over each row's logits).
#include <cstdint>

namespace sg::ref {

// logits [T, V]; targets [T] in [0, V) wherever loss_mask != 0 (throws sg::Error otherwise; a target of
// a masked-out row is never read); loss_mask [T] (0/1, or any weight).
// Per row: loss_t = logsumexp(logits_t) - logits_t[target_t], accumulated in fp64.
// Returns sum_t mask_t * loss_t (unscaled; the caller divides by max(sum(mask),1) for the mean).
// dlogits [T, V] is OVERWRITTEN with scale * mask_t * (softmax(logits_t) - onehot(target_t));
// for the mean loss of one microbatch out of M: scale = 1 / (M * max(sum(mask), 1)).
// dlogits may be nullptr (loss only).
double cross_entropy_forward_backward(float* dlogits, const float* logits, const int32_t* targets,
                                      const float* loss_mask, int64_t T, int64_t V, float scale);

// sum(mask) over T rows, in fp64 (the token count of the per-microbatch mean).
double loss_token_count(const float* loss_mask, int64_t T);

}  // namespace sg::ref
