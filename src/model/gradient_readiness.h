#pragma once
// When the training step's backward finishes each gradient of the flat buffer (dist/gradient_buckets.h),
// so the data-parallel reducer can reduce a bucket while the backward continues (ddp.overlap_grad_reduce).
// Ready points, in the order TrainStep::microbatch runs the backward of a microbatch (model/train_step.h),
// with N layers:
//   0        after the LM head's backward: lm_head.weight (untied)
//   N - i    after layer i's backward regions (i = N-1 down to 0): the layer's own tensors
//   N + 1    after the embedding's backward: every norm (their weight gradients are summed from partial
//            rows by one launch after layer 0's pre-norm backward), the embedding (and a tied LM head,
//            which the LM head writes first)
// The step reports each point in the last microbatch (the earlier ones add to the same gradients).
#include <cstdint>

#include "dist/gradient_buckets.h"
#include "model/stack.h"

namespace sg::model {

inline int backward_ready_points(int64_t num_layers) { return static_cast<int>(num_layers) + 2; }
inline int layer_ready_point(int64_t num_layers, int64_t layer) { return static_cast<int>(num_layers - layer); }

// The segments of every tensor of the layout with its ready point. Throws sg::Error for a tensor that is
// neither the step's nor named after a layer's param_prefix (a layer declaring outside its prefix).
dist::GradientReadiness gradient_readiness(const ModelLayout& layout);

}  // namespace sg::model
