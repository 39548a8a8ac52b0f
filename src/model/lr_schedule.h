#pragma once
// The lr schedule of an OptimizerSpec as the step evaluates it: kernels::LrScheduleConfig for the GPU step,
// ref::LrSchedule for the CPU model (the same fields, so one template fills either).
#include "model/spec.h"

namespace sg::model {

template <class Schedule>
Schedule lr_schedule(const OptimizerSpec& o, const BatchSpec& b) {
  using Style = typename Schedule::Style;
  using WsdDecay = typename Schedule::WsdDecay;
  const auto style = [](LrDecayStyle s) {
    switch (s) {
      case LrDecayStyle::constant: return Style::constant;
      case LrDecayStyle::linear: return Style::linear;
      case LrDecayStyle::cosine: return Style::cosine;
      case LrDecayStyle::inverse_square_root: return Style::inverse_square_root;
      case LrDecayStyle::wsd: return Style::wsd;
    }
    return Style::constant;
  };
  const auto wsd_decay = [](LrWsdDecayStyle s) {
    switch (s) {
      case LrWsdDecayStyle::exponential: return WsdDecay::exponential;
      case LrWsdDecayStyle::linear: return WsdDecay::linear;
      case LrWsdDecayStyle::cosine: return WsdDecay::cosine;
      case LrWsdDecayStyle::minus_sqrt: return WsdDecay::minus_sqrt;
    }
    return WsdDecay::exponential;
  };
  return {.lr = static_cast<float>(o.lr),
          .min_lr = static_cast<float>(o.min_lr),
          .warmup_init = static_cast<float>(o.lr_warmup_init),
          .warmup_iters = o.lr_warmup_iters,
          .decay_iters = o.lr_decay_iters,
          .wsd_decay_iters = o.lr_wsd_decay_iters,
          .samples_per_step = b.micro_batch_size * b.global_microbatches(),  // the global batch
          .style = style(o.lr_decay_style),
          .wsd_decay = wsd_decay(o.lr_wsd_decay_style)};
}

}  // namespace sg::model
