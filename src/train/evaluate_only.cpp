#include "train/evaluate_only.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/durable_io.h"
#include "core/log.h"
#include "core/strings.h"
#include "train/distributed_run.h"
#include "train/metrics.h"
#include "train/progress_lines.h"

namespace sg::train {

config::CheckpointConfig checkpoint_to_evaluate(const config::CheckpointConfig& checkpoint) {
  config::CheckpointConfig reading = checkpoint;
  // auto_resume evaluates checkpoint.save's latest when it holds one; otherwise, as a run starting fresh there, the
  // initial weights.
  if (!reading.load && reading.auto_resume && reading.save && checkpoint::holds_checkpoints(*reading.save)) {
    reading.load = reading.save;
  }
  // Megatron would evaluate the initial weights here, beside a folder of trained ones: surely not what was meant.
  if (!reading.load && !reading.pretrained_checkpoint && reading.save && checkpoint::holds_checkpoints(*reading.save)) {
    throw Error(
        strprintf("validation.skip_train: checkpoint.save %s holds checkpoints, but no key loads one, so the "
                  "initial weights would be evaluated. Set checkpoint.load=%s (or checkpoint.auto_resume=true) "
                  "to evaluate its latest, or checkpoint.load=%s/iter_N for another one",
                  reading.save->c_str(), reading.save->c_str(), reading.save->c_str()));
  }
  reading.save.reset();
  reading.auto_resume = false;
  reading.overwrite = false;
  return reading;
}

std::string evaluate_only(const config::Config& config, const TrainOptions& options, TrainingBackend& backend,
                          std::optional<LoadedCheckpoint>& loaded, std::optional<PretrainedStart>& pretrained,
                          const std::vector<Evaluation*>& evaluations, Evaluation& test_evaluation) {
  log::info(backend.description());
  std::string weights;
  int64_t step = 0;
  if (loaded) {
    backend.load_state(loaded->state);
    step = loaded->state.steps_done;
    loaded->release_state();
    weights = loaded->path;
  } else if (pretrained) {
    backend.load_state(pretrained->state);
    pretrained.reset();
    weights = *config.checkpoint.pretrained_checkpoint;
  }
  log::info(strprintf("validation.skip_train: evaluating %s (step %lld); no training step, nothing saved",
                      weights.empty() ? "the initial weights (no checkpoint loaded)" : weights.c_str(),
                      static_cast<long long>(step)));
  // A signal ends the process as it would without a run to save: an evaluation has nothing to lose.
  nlohmann::json sets = nlohmann::json::array();  // one a validation set (multiple_validation_sets)
  nlohmann::json record = {{"iteration", step},
                           {"weights", weights.empty() ? nlohmann::json(nullptr) : nlohmann::json(weights)}};
  bool graphed = false;
  for (Evaluation* evaluation : evaluations) {
    const EvalResult e = evaluation->run(backend);
    EvalMetrics m = eval_metrics(step, e, /*test=*/false, 0.0, evaluation->tokens_per_evaluation());
    m.set = evaluation->set_name();
    log::info(format_eval_line(m));
    graphed = graphed || e.graphed;
    nlohmann::json result = {{"val_loss", e.loss},    {"val_ppl", m.val_ppl},
                             {"batches", e.batches},  {"tokens", m.tokens},
                             {"seconds", e.ms / 1e3}, {"validation_data", evaluation->data_description()}};
    if (m.set.empty()) {
      record.update(result);
    } else {
      result["name"] = m.set;
      sets.push_back(std::move(result));
    }
  }
  if (!sets.empty()) record["validation_sets"] = std::move(sets);
  record["graphed"] = graphed;
  std::optional<EvalResult> test;
  if (test_evaluation.enabled()) {
    test = test_evaluation.run(backend);
    log::info(format_eval_line(eval_metrics(step, *test, /*test=*/true, 0.0, test_evaluation.tokens_per_evaluation())));
  }
  if (options.distributed != nullptr && !options.distributed->is_writer()) return "";
  if (test) {
    record["test_loss"] = test->loss;
    record["test_ppl"] = std::exp(test->loss);
    record["test_batches"] = test->batches;
    record["test_data"] = test_evaluation.data_description();
  }
  const std::filesystem::path dir = std::filesystem::path(options.run_dir) / "evaluations";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(strprintf("cannot create %s: %s", dir.c_str(), ec.message().c_str()));
  const std::string path = (dir / strprintf("iter_%07lld.json", static_cast<long long>(step))).string();
  // A non-finite loss is written as null (no JSON number; the line above printed it), a path that is not UTF-8 with
  // U+FFFD in place of its invalid bytes.
  checkpoint::write_file_atomically(path, record.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  log::info("wrote " + path);
  return path;
}

}  // namespace sg::train
