#pragma once
// `stepgraph bench` flags, compatible with Megatron-Bridge's scripts/performance/run_script.py
//   -m llama -mr 1b --task pretrain -g h200 -c bf16 -ng 1 --cuda_graph_impl transformer_engine
//   --cuda_graph_scope attn,mlp [-mb N] [-gb N] [-sl N] [section.key=value ...]
// and what they mean for the config, in Bridge's order: the recipe recipes/<-m>/<-mr>.yaml, then the
// trailing overrides (Bridge's Hydra-style overrides), then the flags (Bridge's set_user_overrides: flags
// win), then the benchmark's own settings (mock data; --warmup as model.cuda_graph_warmup_steps).
//
// The CUDA-graph flags follow Bridge's _set_cuda_graph_overrides:
//   * --cuda_graph_impl sets model.cuda_graph_impl; any impl other than none turns model.use_te_rng_tracker
//     and rng.te_rng_tracker on. When the resulting impl is none both trackers are turned off and the
//     scope flag is ignored (Bridge returns early there).
//   * --cuda_graph_scope sets model.cuda_graph_scope.
//   * Bridge also sets rerun_state_machine.check_for_nan_in_loss false for a full-iteration graph;
//     stepgraph keeps it (its NaN flags are computed inside the graph: rule 5, a note; graph_flags.h).
// The recompute flags follow Bridge's _set_recompute_overrides (bench/bridge_flags.h): -rl N is full,
// block, N layers; --recompute_modules A,B is selective with those modules.
// Whatever the result, validate() judges it afterwards: an invalid combination is refused there.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/graph_flags.h"
#include "bench/bridge_flags.h"
#include "bench/mode_list.h"

namespace sg::bench {

struct BenchOptions {
  // Megatron-Bridge run_script.py flags.
  std::string model_family;             // -m / --model_family_name (lower-cased, as Bridge does)
  std::string model_recipe;             // -mr / --model_recipe_name
  std::string task = "pretrain";        // --task: pretrain (sft, lora or peft: not implemented yet)
  std::string gpu;                      // -g / --gpu: a Bridge GPU name or h200, recorded; the peak comes from
                                        // the device name
  std::string compute_dtype = "bf16";   // -c / --compute_dtype: bf16 (fp8_*, nvfp4: not implemented yet)
  int num_gpus = 1;                     // -ng / --num_gpus: data-parallel ranks, one per GPU of this node
  std::optional<std::string> cuda_graph_impl;   // --cuda_graph_impl
  std::optional<std::string> cuda_graph_scope;  // --cuda_graph_scope a,b
  std::optional<int64_t> micro_batch_size;      // -mb
  std::optional<int64_t> global_batch_size;     // -gb
  std::optional<int64_t> seq_length;            // -sl (model.seq_length and dataset.seq_length)
  bool dryrun = false;                          // -d / --dryrun: validate and print the plan only
  std::vector<std::string> overrides;           // trailing section.key=value

  // The benchmark's own.
  std::optional<std::string> compare;  // --compare none,local,...
  int steps = 50;                      // --steps: measured steps per mode
  bool steps_given = false;            // --steps was on the command line (it excludes -ms/--max_steps)
  std::optional<int> warmup;           // --warmup: eager steps before capture (default: the recipe's)
  int floor_steps = 10;                // --floor-steps: steps traced with CUPTI for the kernel-time floor
  std::string json_path;               // --json FILE
  std::string trace_path;              // --trace FILE
  bool plain = false;                  // --plain: progress as lines, not a redrawn bar
  bool power = true;                   // --no-power: no NVML power and clock samples
  std::string html_path;               // --html FILE: the report as a self-contained HTML page

  BridgeFlagEffects bridge;  // the other run_script.py flags (bench/bridge_flags.h)
};

// Parses the arguments after `stepgraph bench`. CLI11 cannot declare Bridge's multi-letter single-dash
// flags (-mr, -ng, -mb, -gb, -sl), so the command hands its arguments over unparsed. Every flag takes
// "FLAG VALUE" or "FLAG=VALUE"; an argument with '=' that is not a flag is a section.key=value override.
// Throws ConfigError (usage error, exit 2) for an unknown flag (with the closest one), a missing or
// malformed value, or a stray argument. Does not check the values (check_bench_options does).
BenchOptions parse_bench_args(const std::vector<std::string>& args);

// The flag reference printed by `stepgraph bench --help`, one flag per line, every parse_bench_args flag.
std::string bench_flags_help();

// The CUDA-graph part of the flags (one mode of --compare, or --cuda_graph_impl/--cuda_graph_scope) and
// Bridge's side effects of them: one rule, in config/graph_flags.h, shared with `stepgraph train`.
using config::apply_cuda_graph_overrides;
using config::CudaGraphFlags;
using config::parse_scope_flag;

// Checks the values of the Bridge flags that stepgraph reads:
//   * a value Bridge does not know either (--task foo, -c fp4, -ng 0, an unknown -mr) -> ConfigError
//     (usage error, exit 2) naming the valid values;
//   * a value Bridge knows that stepgraph does not do yet (--task sft, -c fp8_cs) -> sg::Error
//     "... is not implemented yet" (exit 1).
// Also the bench settings: --steps >= 1, --floor-steps >= 0, each step count at most kMaxStepsPerMode,
// --trace needs a floor step, --compare excludes --cuda_graph_impl/--cuda_graph_scope and
// model.cuda_graph_impl/scope overrides; overrides of keys the bench never reads that ask for what it does
// not do (train.train_iters, checkpoint.*, evaluation) are refused (logger.* is accepted:
// unused_overrides_note); and the --json/--html/--trace files are probed (folder exists and is writable, not
// a folder, no file twice) before any GPU work. All ConfigError (exit 2).
// An unknown -mr that another family ships (llama/tiny_moe) names that family.
void check_bench_options(const BenchOptions& options);

// The overrides the bench accepts but does not use: logger.* (how `stepgraph train` logs), which Bridge perf
// command lines carry. They are still read and validated as train's are (plan_bench: an unknown key or a bad
// value is an error); this is the one stderr line naming them, so none is dropped silently. "" when none.
std::string unused_overrides_note(const BenchOptions& options);

// "llama/1b" from -m llama -mr 1b.
std::string recipe_name(const BenchOptions& options);

// The config of one benchmark run: recipe + overrides + flags (with `graph` as the CUDA-graph flags) +
// dataset.mock true + --warmup. Not validated yet (plan_bench does that). A dataset.mock=false override or
// a dataset.data_path (recipe or override) is a ConfigError: the bench always measures on mock data.
config::Config bench_config(const BenchOptions& options, const CudaGraphFlags& graph);

// The CUDA-graph flags of a --compare mode: impl and an explicit scope (possibly empty).
CudaGraphFlags graph_flags(const GraphMode& mode);
// The CUDA-graph flags given as --cuda_graph_impl / --cuda_graph_scope (either may be absent).
CudaGraphFlags graph_flags(const BenchOptions& options);

}  // namespace sg::bench
