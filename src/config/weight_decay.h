#pragma once
// Megatron's weight-decay schedule (scheduler.start_weight_decay, end_weight_decay, weight_decay_incr_style) as the
// training step reads it. Bridge's scheduler sets every parameter group's decay from it at the first step, so when
// its keys are set (Bridge's recipes set them: 0.033 with optimizer.weight_decay 0.1) they, not
// optimizer.weight_decay, are the decay AdamW applies. stepgraph's step applies one decay for the whole run: a
// schedule that changes it (end above start, linear or cosine) is named as not implemented; validate checks the rest.
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace sg::config {

// scheduler.start_weight_decay / end_weight_decay, each null taking optimizer.weight_decay.
double start_weight_decay(const Config& config);
double end_weight_decay(const Config& config);
// The decay the step applies: the schedule's start (its end too, for every schedule train accepts).
double effective_weight_decay(const Config& config);
// Whether the schedule changes the decay during the run (end != start): not implemented.
bool weight_decay_changes(const Config& config);
// Megatron's weight_decay_incr_style choices.
const std::vector<std::string>& weight_decay_incr_styles();

}  // namespace sg::config
