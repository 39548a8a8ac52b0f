#include "train/run_end.h"

#include "checkpoint/checkpoint_dir.h"
#include "core/paths.h"
#include "core/strings.h"

namespace sg::train {

std::string stopped_run_summary(const config::Config& config, int signal, int64_t step, int64_t train_iters,
                                int64_t start_step) {
  const auto s = static_cast<long long>(step);
  std::string text =
      strprintf("interrupted by signal %d after step %lld of %lld", signal, s, static_cast<long long>(train_iters));
  const config::CheckpointConfig& c = config.checkpoint;
  if (!c.save) {
    const std::string restart = c.load ? strprintf("a new run starts again from checkpoint.load %s (step %lld)",
                                                   c.load->c_str(), static_cast<long long>(start_step))
                                       : std::string("a new run starts again from step 0");
    return text + "; nothing was saved (checkpoint.save is not set): " + restart +
           ". Set checkpoint.save to keep a stopped run's progress";
  }
  const std::string& save = *c.save;
  text += strprintf("; saved %s/%s", save.c_str(), checkpoint::iteration_dir_name(step).c_str());
  // The same command resumes when it names checkpoint.save as the checkpoint to load (or auto_resume does).
  const bool resumes_itself = (c.load && same_directory(*c.load, save)) || (!c.load && c.auto_resume);
  if (resumes_itself) return text + ": to continue, run the same command again (it resumes from " + save + ")";
  return text + ": to continue, run the same command with checkpoint.load=" + save +
         (c.load ? std::string(" instead of checkpoint.load=") + *c.load
                 : std::string(" (or checkpoint.auto_resume=true)")) +
         (c.overwrite ? " and without checkpoint.overwrite" : "");
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
