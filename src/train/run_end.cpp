#include "train/run_end.h"

#include <cmath>

#include "checkpoint/checkpoint_dir.h"
#include "core/paths.h"
#include "core/signal_name.h"
#include "core/strings.h"

namespace sg::train {

namespace {

// How a run keeps its weights: the one wording of the start note, a finished run's last line and a stop's.
constexpr const char* kSaveAdvice = "add checkpoint.save=DIR to the command to keep the weights";

// What a run that stopped after `step` kept, and how to go on.
std::string stopped_run_next_steps(const config::Config& config, int64_t step, int64_t start_step) {
  const config::CheckpointConfig& c = config.checkpoint;
  if (!c.save) {
    const std::string restart = c.load ? strprintf("a new run starts again from checkpoint.load %s (step %lld)",
                                                   c.load->c_str(), static_cast<long long>(start_step))
                                       : std::string("a new run starts again from step 0");
    return "nothing was saved (checkpoint.save is not set): " + restart + "; " + kSaveAdvice + " next time";
  }
  const std::string& save = *c.save;
  const std::string text = strprintf("saved %s/%s", save.c_str(), checkpoint::iteration_dir_name(step).c_str());
  // The same command resumes when it names checkpoint.save as the checkpoint to load (or auto_resume does).
  const bool resumes_itself = (c.load && same_directory(*c.load, save)) || (!c.load && c.auto_resume);
  if (resumes_itself) return text + ": to continue, run the same command again (it resumes from " + save + ")";
  return text + ": to continue, run the same command with checkpoint.load=" + save +
         (c.load ? std::string(" instead of checkpoint.load=") + *c.load
                 : std::string(" (or checkpoint.auto_resume=true)")) +
         (c.overwrite ? " and without checkpoint.overwrite" : "");
}

}  // namespace

std::string stopped_run_summary(int signal, int64_t step, int64_t train_iters) {
  return strprintf("interrupted by %s after step %lld of %lld",
                   signal_name(signal).c_str(), static_cast<long long>(step), static_cast<long long>(train_iters));
}

std::string unsaved_weights_note(bool ended) {
  const std::string advice = kSaveAdvice;
  if (ended) return "the weights were not saved (checkpoint.save is not set); " + advice + " next time";
  return "checkpoint.save is not set: the weights this run trains will not be saved; " + advice;
}

std::string run_end_note(const config::Config& config, const TrainSummary& s) {
  if (s.steps_done < s.train_iters) return stopped_run_next_steps(config, s.steps_done, s.start_step);
  return config.checkpoint.save ? std::string() : unsaved_weights_note(/*ended=*/true);
}

std::string run_summary_line(const TrainSummary& s) {
  const auto n = static_cast<long long>(s.steps_run());
  const char* steps = n == 1 ? "step" : "steps";
  const auto from = static_cast<long long>(s.start_step), to = static_cast<long long>(s.steps_done);
  std::string text;
  if (s.steps_done >= s.train_iters) {
    text = strprintf("trained %lld %s (%lld -> %lld)", n, steps, from, to);
  } else {  // a signal, or (data parallel) another rank's stop: the run is not complete, and says so first
    const std::string how = s.stopped_by_signal ? "stopped by " + signal_name(s.stop_signal) : "stopped early";
    text = strprintf("%s after %lld %s (%lld -> %lld of %lld)", how.c_str(), n, steps, from, to,
                     static_cast<long long>(s.train_iters));
  }
  text += strprintf(": loss %.4f -> %.4f", s.first_loss, s.last_loss);
  if (!s.val_set_losses.empty()) {
    for (const auto& [name, loss] : s.val_set_losses) text += strprintf(", val loss %s %.4f", name.c_str(), loss);
  } else if (std::isfinite(s.last_val_loss)) {
    text += strprintf(", val loss %.4f", s.last_val_loss);
  }
  if (std::isfinite(s.test_loss)) text += strprintf(", test loss %.4f", s.test_loss);
  text += "; metrics in " + s.metrics_path + ", report in " + s.report_path;
  if (!s.end_note.empty()) text += "; " + s.end_note;
  return text;
}

std::string stale_val_loss_note(double val_loss, int64_t val_step, int64_t skipped_at) {
  std::string text =
      strprintf("the last validation loss, %.4f, is from step %lld", val_loss, static_cast<long long>(val_step));
  if (skipped_at >= 0) {
    text += strprintf(
        "; the evaluation due after step %lld was skipped by the stop (a run resumed from that "
        "step's checkpoint does it first)",
        static_cast<long long>(skipped_at));
  }
  return text;
}

}  // namespace sg::train
