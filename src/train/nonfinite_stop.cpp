#include "train/nonfinite_stop.h"

#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/finite_check.h"
#include "core/strings.h"

namespace sg::train {

namespace {

std::string stopped_at(int64_t step, int64_t submitted) {
  if (submitted <= step) return "";
  return strprintf(" (found while step %lld ran: metrics are read one step behind)", static_cast<long long>(submitted));
}

// How to go on after a stop: from a checkpoint only where the run saves them (a run without checkpoint.save has
// none to resume from).
std::string restart_advice(const config::Config& config) {
  if (!config.checkpoint.save) return "start the run again (checkpoint.save is not set, so no checkpoint was saved)";
  return "resume from the last checkpoint in " + *config.checkpoint.save +
         " (checkpoint.load=" + *config.checkpoint.save + "), or start again if none was saved yet";
}

// What to change after a non-finite state: the checks that are off (naming ones already on misleads),
// or, with both on, the update itself (every step's loss and gradients were finite).
std::string nonfinite_state_advice(const config::Config& config) {
  std::vector<std::string> off;
  if (!config.rerun_state_machine.check_for_nan_in_loss) off.push_back("rerun_state_machine.check_for_nan_in_loss");
  if (!config.ddp.check_for_nan_in_grad) off.push_back("ddp.check_for_nan_in_grad");
  if (!off.empty()) return "Turn on " + join(off, " and ") + " to stop at the first bad step";
  return std::string(
             "The checks of the loss and the gradients (both on) passed, so the optimizer's update made the "
             "state non-finite: lower optimizer.lr") +
         (config.optimizer.clip_grad > 0 ? "" : " or set optimizer.clip_grad (gradient clipping is off)") + ", then " +
         restart_advice(config);
}

}  // namespace

void check_step_finite(const StepResult& r, const config::Config& config, int64_t submitted) {
  const std::string fix =
      "Nothing was saved from this point on. Lower optimizer.lr (or check the data), then " + restart_advice(config);
  if (config.rerun_state_machine.check_for_nan_in_loss && !r.loss_finite) {
    throw NonFiniteError(
        strprintf("step %lld: the loss is NaN or infinite (rerun_state_machine.check_for_nan_in_loss); "
                  "the run stopped%s. %s",
                  static_cast<long long>(r.step), stopped_at(r.step, submitted).c_str(), fix.c_str()));
  }
  if (config.ddp.check_for_nan_in_grad && !r.grads_finite) {
    throw NonFiniteError(
        strprintf("step %lld: a gradient is NaN or infinite (ddp.check_for_nan_in_grad); "
                  "the run stopped%s. %s",
                  static_cast<long long>(r.step), stopped_at(r.step, submitted).c_str(), fix.c_str()));
  }
}

namespace {

// What stays in checkpoint.save after a refused save: the iteration `latest` names there, or that none was saved.
std::string what_stays_saved(const config::Config& config) {
  if (!config.checkpoint.save) return "Nothing was saved (checkpoint.save is not set).";
  std::optional<int64_t> latest;
  try {
    latest = checkpoint::read_latest_iteration(*config.checkpoint.save);
  } catch (const Error&) {
    // an unreadable latest file: said as "no checkpoint" below would mislead; name the file instead
    return strprintf("%s/%s is unreadable; no checkpoint was written now.", config.checkpoint.save->c_str(),
                     checkpoint::kLatestFile);
  }
  if (!latest) return strprintf("Nothing was saved: %s holds no checkpoint.", config.checkpoint.save->c_str());
  return strprintf("%s/%s still names iteration %lld, the last checkpoint saved there.",
                   config.checkpoint.save->c_str(), checkpoint::kLatestFile, static_cast<long long>(*latest));
}

}  // namespace

void check_state_finite(const TrainingState& state, const model::ModelLayout& layout, const config::Config& config) {
  struct Buffer {
    const char* name;
    const std::vector<float>* values;
  };
  for (const Buffer& b : {Buffer{"fp32 main weights", &state.main_weights}, Buffer{"Adam exp_avg", &state.exp_avg},
                          Buffer{"Adam exp_avg_sq", &state.exp_avg_sq}}) {
    std::vector<checkpoint::TensorRef> refs;
    for (const auto& t : layout.tensors()) {
      refs.push_back({t.name, checkpoint::TensorDtype::F32, t.shape, b.values->data() + t.offset});
    }
    if (const auto bad = checkpoint::find_nonfinite(refs)) {
      throw NonFiniteError(
          strprintf("step %lld: not saving a checkpoint: the %s hold non-finite values (%s); a checkpoint of this "
                    "state could only resume a broken run. The run stopped. %s %s",
                    static_cast<long long>(state.steps_done), b.name, checkpoint::describe(*bad).c_str(),
                    what_stays_saved(config).c_str(), nonfinite_state_advice(config).c_str()));
    }
  }
}

}  // namespace sg::train
