#pragma once
// Bridge's newer schedule-length keys (its SchedulerConfig and _calculate_scheduler_steps):
// - scheduler.max_steps: with iteration-based training, the length the lr decays over (it replaces
//   scheduler.lr_decay_iters) and the weight decay changes over; at least train.train_iters.
// - scheduler.lr_warmup_fraction: the warmup as a fraction of the decay's length, instead of lr_warmup_iters or
//   lr_warmup_samples (Bridge refuses it beside either). stepgraph's schedule counts whole steps, so a fraction of the
//   decay that is not one is rounded to the nearest step, with a note.
// Both are resolved at validation; a run's config keeps them as written (the resolved lr_decay_iters is derived).
#include <cstdint>
#include <vector>

#include "config/config.h"
#include "config/validate.h"

namespace sg::config {

// Checks scheduler.max_steps and, when it is valid, sets scheduler.lr_decay_iters from it (a note when it replaces
// another value). Before lr_decay_iters takes its default; train.train_iters is resolved already.
void resolve_max_steps(Config& config, std::vector<Violation>& violations, std::vector<Note>& notes);

// Checks scheduler.lr_warmup_fraction against the resolved lr_decay_iters (a note when it rounds).
void check_lr_warmup_fraction(const Config& config, std::vector<Violation>& violations, std::vector<Note>& notes);

// The warmup of lr_warmup_fraction, in steps: fraction x lr_decay_iters, to the nearest step. nullopt when unset.
std::optional<int64_t> lr_warmup_fraction_iters(const Config& config);

}  // namespace sg::config
