#pragma once
// Megatron's weight-decay schedule (scheduler.start_weight_decay, end_weight_decay, weight_decay_incr_style) as the
// training step reads it. Bridge's scheduler sets every parameter group's decay from it at every step, so when its
// keys are set (Bridge's recipes set them: 0.033 with optimizer.weight_decay 0.1) they, not optimizer.weight_decay,
// are the decay AdamW applies: constant, one decay; linear or cosine, from start to end over the run
// (OptimizerParamScheduler.get_wd; kernels/weight_decay_schedule.h). validate checks Megatron's rules.
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "model/spec.h"

namespace sg::config {

// scheduler.start_weight_decay / end_weight_decay, each null taking optimizer.weight_decay.
double start_weight_decay(const Config& config);
double end_weight_decay(const Config& config);
// Whether the schedule changes the decay during the run (end != start).
bool weight_decay_changes(const Config& config);
// Megatron's weight_decay_incr_style choices.
const std::vector<std::string>& weight_decay_incr_styles();
// The style the step trains with. Throws sg::Error naming the key and the choices for another name (validation
// refuses it first; this guards a config that skipped it).
model::WeightDecayIncrStyle weight_decay_incr_style(const Config& config);
// The iterations the decay changes over (Bridge's weight_decay_iters): scheduler.max_steps, else train.train_iters as
// validation resolved it.
int64_t weight_decay_incr_iters(const Config& config);
// Megatron's wd_incr_steps, in samples: train.train_samples with sample-based training, else
// weight_decay_incr_iters x train.global_batch_size (Bridge's _calculate_scheduler_steps).
int64_t weight_decay_incr_samples(const Config& config);

}  // namespace sg::config
