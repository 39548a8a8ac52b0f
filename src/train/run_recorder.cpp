#include "train/run_recorder.h"

#include <cmath>
#include <filesystem>

#include "checkpoint/durable_io.h"
#include "config/checkpoint_overrides.h"
#include "core/log.h"
#include "core/strings.h"
#include "train/run_folder.h"
#include "train/svg_chart.h"

namespace sg::train {

std::string start_over_hint(const config::CheckpointConfig& checkpoint) {
  const std::string start_over = join(config::start_over_overrides(checkpoint), " ");
  const std::vector<std::string> resume = config::continue_overrides(checkpoint);
  if (resume.empty()) return "\n(it continues from its checkpoints as it is; add " + start_over + " to start over)";
  return "\n(add " + join(resume, " ") + " to continue from its checkpoints, or " + start_over + " to start over)";
}

RunRecorder::RunRecorder(const config::Config& config, const std::string& run_dir, const RecorderStart& start,
                         const std::string& run_id, RunReportInfo report)
    : run_dir_(run_dir), report_(std::move(report)), last_step_(start.start_step) {
  std::filesystem::create_directories(run_dir);
  write_run_id(run_dir, run_id);
  const std::string header =
      "the resolved configuration of this run (defaults filled in, validated; a key derived from others is null,\n"
      "its value in a comment, so overriding what it derives from derives it again);\n"
      "run it again with: stepgraph train " +
      (std::filesystem::path(run_dir) / kConfigYaml).string() +
      (config.checkpoint.save ? start_over_hint(config.checkpoint) : "");
  report_.config_yaml = config::emit_yaml(config, header, config::EmitDerived::as_null);
  const std::string config_path = (std::filesystem::path(run_dir) / kConfigYaml).string();
  // The records this run continues keep the configuration they ran with.
  if (start.resumed && !start.config_kept) {
    if (const auto kept = keep_changed_config(run_dir, report_.config_yaml)) {
      log::info(strprintf("%s: the configuration changed since the earlier steps of this run; kept the one they ran "
                          "with in %s",
                          config_path.c_str(), (std::filesystem::path(*kept) / kConfigYaml).string().c_str()));
    }
  }
  checkpoint::write_file_atomically(config_path, report_.config_yaml);
  metrics_path_ = (std::filesystem::path(run_dir) / kMetricsJsonl).string();
  metrics_ = std::make_unique<MetricsLog>(metrics_path_, start.resumed);
  if (config.logger.tensorboard_dir) {
    tensorboard_ = std::make_unique<TensorBoardWriter>(*config.logger.tensorboard_dir);
    tensorboard_->session_start(start.start_step + 1);
  }
}

RunRecorder::~RunRecorder() {
  if (finished_) return;
  try {
    finish(strprintf("ended early, after step %lld (see the log for why)", static_cast<long long>(last_step_)));
  } catch (...) {
    // A report is a convenience; the run's own error is what the user must see.
  }
}

std::string RunRecorder::report_path() const { return (std::filesystem::path(run_dir_) / kReportHtml).string(); }

void RunRecorder::step(const StepMetrics& m) {
  last_step_ = m.step;
  metrics_->write(m);
  if (!tensorboard_) return;
  tensorboard_->scalar("lm loss", m.step, m.loss);
  tensorboard_->scalar("learning-rate", m.step, m.lr);
  tensorboard_->scalar("grad-norm", m.step, m.grad_norm);
  if (!m.capture) {  // the capture step's time includes the capture
    tensorboard_->scalar("iteration-time", m.step, m.step_ms);
    tensorboard_->scalar("tokens-per-second", m.step, m.tokens_per_s);
    tensorboard_->scalar("throughput", m.step, m.tflops_per_gpu);
  }
  tensorboard_->scalar("mem-allocated-bytes", m.step, static_cast<double>(m.device_memory_used));
  if (m.moe) {  // Megatron's MoE tags
    tensorboard_->scalar("load_balancing_loss", m.step, m.aux_loss);
    tensorboard_->scalar("z_loss", m.step, m.z_loss);
  }
  tensorboard_->flush();
}

void RunRecorder::eval(const EvalMetrics& m) {
  metrics_->write(m);
  if (!tensorboard_) return;
  // Megatron's tags; a validation set's with its "-NAME" suffix (evaluate_and_print_results).
  const std::string tag = m.test ? "lm loss test" : "lm loss validation" + (m.set.empty() ? "" : "-" + m.set);
  tensorboard_->scalar(tag, m.step, m.val_loss);
  tensorboard_->scalar(tag + " ppl", m.step, m.val_ppl);
  tensorboard_->flush();
}

void RunRecorder::finish(const std::string& status) {
  finished_ = true;
  report_.status = status;
  write_run_report(metrics_path_, report_path(), report_);
}

}  // namespace sg::train
