#include "train/nonfinite_stop.h"

#include "checkpoint/finite_check.h"
#include "core/strings.h"

namespace sg::train {

namespace {

std::string stopped_at(int64_t step, int64_t submitted) {
  if (submitted <= step) return "";
  return strprintf(" (found while step %lld ran: metrics are read one step behind)", static_cast<long long>(submitted));
}

}  // namespace

void check_step_finite(const StepResult& r, const config::Config& config, int64_t submitted) {
  const char* fix = "Nothing was saved from this point on. Lower optimizer.lr (or check the data), then resume "
                    "from the last checkpoint";
  if (config.rerun_state_machine.check_for_nan_in_loss && !r.loss_finite) {
    throw NonFiniteError(strprintf("step %lld: the loss is NaN or infinite (rerun_state_machine.check_for_nan_in_loss); "
                                   "the run stopped%s. %s",
                                   static_cast<long long>(r.step), stopped_at(r.step, submitted).c_str(), fix));
  }
  if (config.ddp.check_for_nan_in_grad && !r.grads_finite) {
    throw NonFiniteError(strprintf("step %lld: a gradient is NaN or infinite (ddp.check_for_nan_in_grad); "
                                   "the run stopped%s. %s",
                                   static_cast<long long>(r.step), stopped_at(r.step, submitted).c_str(), fix));
  }
}

void check_state_finite(const TrainingState& state, const model::ModelLayout& layout) {
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
      throw NonFiniteError(strprintf(
          "step %lld: not saving a checkpoint: the %s hold non-finite values (%s); a checkpoint of this "
          "state could only resume a broken run. The run stopped; the last checkpoint saved before stays "
          "`latest`. Turn on rerun_state_machine.check_for_nan_in_loss and ddp.check_for_nan_in_grad to stop "
          "at the first bad step",
          static_cast<long long>(state.steps_done), b.name, checkpoint::describe(*bad).c_str()));
    }
  }
}

}  // namespace sg::train
