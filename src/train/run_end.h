#pragma once
// What a run says last: the step it stopped after, what was saved, how to go on, which step its last validation
// loss is from, and, without checkpoint.save, that its weights were not kept. (A signal that arrives during the
// last step or its save ends nothing: the run is complete, run_steps.cpp says so, and exits 0.)
#include <cstdint>
#include <string>

#include "config/config.h"
#include "train/trainer.h"

namespace sg::train {

// The trainer's log line for a stop, "interrupted by SIGTERM after step 37 of 60". What was saved and how to go on
// is said once, in the run's last line (run_summary_line, with run_end_note).
std::string stopped_run_summary(int signal, int64_t step, int64_t train_iters);

// TrainSummary::end_note of a run that ended (train.train_iters in `summary`): after a stop, what was saved and
// how to go on ("saved /ck/iter_0000037: to continue, run the same command with checkpoint.load=/ck", or, without
// checkpoint.save, that nothing was saved, where a new run starts and how to keep the weights next time); for a
// finished run without checkpoint.save, unsaved_weights_note(true); else empty.
std::string run_end_note(const config::Config& config, const TrainSummary& summary);

// A run without checkpoint.save: its weights are not kept, and how to keep them; said at its start (`ended`
// false) and in its last line. Not an error: a short experiment may not want them.
std::string unsaved_weights_note(bool ended);

// The line `stepgraph train` ends with: "trained 40 steps (0 -> 40): loss 9.0583 -> 6.2100, val loss 6.3012;
// metrics in M, report in R", or for a run that stopped early "stopped by SIGTERM after 37 steps (0 -> 37 of
// 60): ...", then TrainSummary::end_note.
std::string run_summary_line(const TrainSummary& summary);

// "the last validation loss, 4.2240, is from step 20; the evaluation due after step 40 was skipped by the stop
// (the resumed run does it first)": for a stopped run whose last evaluation is older than its last step.
// `skipped_at`: the step whose evaluation the stop skipped, or -1.
std::string stale_val_loss_note(double val_loss, int64_t val_step, int64_t skipped_at);

}  // namespace sg::train
