#pragma once
// What a run will do, computed from a validated config on the CPU, with no device: the model and its
// parameter count, the tokens per step, the GPU memory plan (the step's own buffer declarations,
// model::TrainStep::plan_memory, with the device-sized workspaces unknown) and the CUDA-graph plan.
// `stepgraph train` prints it at start, `stepgraph validate RECIPE` and `stepgraph bench --dryrun` too.
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"

namespace sg::train {

// "model: 8 layers: (*-)x4 as 4 GPT blocks, hidden 256 (4 heads, 4 KV), ffn 704, seq 256, vocab 8192:
// 7.1 M parameters (2.1 M in the embedding); checkpoints load as LlamaForCausalLM"
std::string describe_model(const config::Config& config);
// "batch: 4 sequences x 256 tokens = 1,024 tokens per step (1 microbatch of 4); 300 steps = 307,200 tokens"
std::string describe_batch(const config::Config& config);
// "optimizer: AdamW (lr 3e-4, ...); fp32 master weights, gradients and Adam moments", or with the
// precision-aware optimizer the moments' bf16 storage, said as not what PyTorch's fused AdamW keeps.
std::string describe_optimizer(const config::Config& config);
// "lr: warmup over 100 steps from 0 to 0.0003, then cosine decay from 0.0003 to 3e-05 at step 10000", or WSD's
// stable and annealing phases, the inverse square root's floor, a constant lr.
std::string describe_lr_schedule(const config::Config& config);
// The GPU arena by category, planned without a device (a few lines).
std::string describe_gpu_memory_plan(const config::Config& config);
// Activation bytes of one microbatch per layer, with and without model.recompute_* (a few lines;
// model/activation_account.h).
std::string describe_activation_plan(const config::Config& config);
// "CUDA graphs: local (full_iteration): 1 graph of the whole step ...; 3 eager warmup steps, capture at
// step 4" and, with evaluation, the evaluation graph.
std::string describe_graph_plan(const config::Config& config);
// All of the above, one block.
std::vector<std::string> describe_run_plan(const config::Config& config);

// "1,234,567"
std::string thousands(int64_t value);

}  // namespace sg::train
