#pragma once
// Megatron's sample-based training (train.train_samples, scheduler.lr_warmup_samples, scheduler.lr_decay_samples),
// as Bridge reads it: the run takes train_samples / global_batch_size steps (rounded down), and the schedule's
// warmup and decay lengths count samples. stepgraph's schedule counts steps, so a length in samples must be a whole
// number of global batches (validation refuses others, naming the nearest ones); the steps then are the same
// schedule. The two modes are not mixed, as Bridge asserts.
#include <cstdint>
#include <vector>

#include "config/config.h"
#include "config/validate.h"

namespace sg::config {

// With train.train_samples: checks the sample-based keys and derives train.train_iters and scheduler.lr_decay_iters
// from them (Config::derived_keys: a run's config.yaml writes them null, so a rerun derives them again); without it,
// refuses sample-based scheduler keys. `config.train.global_batch_size` is resolved already.
void resolve_sample_based_lengths(Config& config, std::vector<Violation>& violations, std::vector<Note>& notes);

// The warmup the schedule takes, in steps: scheduler.lr_warmup_fraction's (config/schedule_lengths.h) when set, else
// lr_warmup_samples / global_batch_size with train.train_samples, else scheduler.lr_warmup_iters.
int64_t resolved_lr_warmup_iters(const Config& config);

}  // namespace sg::config
