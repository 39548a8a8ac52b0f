#pragma once
// What a run that a signal ended says last: the step it stopped after, what was saved, how to go on, and
// which step its last validation loss is from. (A signal that arrives during the last step or its save
// ends nothing: the run is complete, trainer.cpp says so, and exits 0.)
#include <cstdint>
#include <string>

#include "config/config.h"

namespace sg::train {

// "interrupted by signal 15 after step 37 of 60; saved /ck/iter_0000037: to continue, run the same command
// with checkpoint.load=/ck", or, without checkpoint.save, that nothing was saved and where a new run starts
// (step 0, or checkpoint.load's checkpoint at `start_step`).
std::string stopped_run_summary(const config::Config& config, int signal, int64_t step, int64_t train_iters,
                                int64_t start_step);

// "the last validation loss, 4.2240, is from step 20; the evaluation due after step 40 was skipped by the stop
// (the resumed run does it first)": for a stopped run whose last evaluation is older than its last step.
// `skipped_at`: the step whose evaluation the stop skipped, or -1.
std::string stale_val_loss_note(double val_loss, int64_t val_step, int64_t skipped_at);

}  // namespace sg::train
