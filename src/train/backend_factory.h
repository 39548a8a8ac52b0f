#pragma once
// Picks the backend: the GPU (bf16, CUDA graphs per model.cuda_graph_impl) when one is present,
// otherwise the CPU fp32 reference with graphs off — said in one line, never silently.
#include <memory>

#include "train/backend.h"
#include "config/config.h"

namespace sg::train {

model::OptimizerSpec optimizer_spec(const config::Config& config);

// Whether make_backend(config, force_cpu) will pick the CPU backend (no GPU, or force_cpu).
bool uses_cpu_backend(bool force_cpu);

class DistributedRun;

// `config` must be validated. force_cpu selects the CPU backend even when a GPU is present. With
// `distributed` (data parallelism) the backend is this rank's GPU backend with NCCL collectives; the CPU
// backend trains one process only.
std::unique_ptr<TrainingBackend> make_backend(const config::Config& config, bool force_cpu,
                                              DistributedRun* distributed = nullptr);

}  // namespace sg::train
