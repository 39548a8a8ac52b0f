#pragma once
// The overrides that rerun a configuration with checkpoint.save from its checkpoints, or over: one source for
// the run's config.yaml header (train/run_recorder.h) and rule 16's fix when overwrite meets a resume.
#include <string>
#include <vector>

#include "config/config.h"

namespace sg::config {

// Starting over: checkpoint.overwrite, with the resume keys this configuration sets turned off (overwrite with
// auto_resume, or with load = save, is refused) and nothing loaded.
std::vector<std::string> start_over_overrides(const CheckpointConfig& checkpoint);
// Continuing from checkpoint.save's latest iteration (auto_resume with load unset); none when it already does.
std::vector<std::string> continue_overrides(const CheckpointConfig& checkpoint);

}  // namespace sg::config
