#pragma once
// The weight-decay schedule of an OptimizerSpec as the step evaluates it: kernels::WeightDecayScheduleConfig for
// the GPU step, ref::WeightDecaySchedule for the CPU model (the same fields, so one template fills either).
#include "model/spec.h"

namespace sg::model {

template <class Schedule>
Schedule weight_decay_schedule(const OptimizerSpec& o, const BatchSpec& b) {
  using Style = typename Schedule::Style;
  const WeightDecayIncrStyle style = o.weight_decay_incr_style;
  return {.start = o.weight_decay,
          .end = o.end_weight_decay,
          .incr_samples = o.weight_decay_incr_samples,
          .samples_per_step = b.micro_batch_size * b.global_microbatches(),  // the global batch
          .style = style == WeightDecayIncrStyle::linear   ? Style::linear
                   : style == WeightDecayIncrStyle::cosine ? Style::cosine
                                                           : Style::constant};
}

}  // namespace sg::model
