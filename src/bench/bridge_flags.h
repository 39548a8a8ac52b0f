#pragma once
// The rest of Megatron-Bridge's scripts/performance/run_script.py flags (argument_parser.py), so a
// Bridge command line pastes into `stepgraph bench` unchanged. Each is one of:
//   parallel      -tp -pp -cp -ep -et -vp: 1 (or None) is what stepgraph runs; any other size is
//                 "not implemented yet" (exit 1), like -ng
//   config        mapped onto a config key (--lr -> optimizer.lr, --num_layers -> model.num_layers, ...),
//                 applied with the other flags (after the trailing overrides: flags win, as in Bridge);
//                 -ms/--max_steps sets the optimizer steps per mode; -rl N and --recompute_modules A,B have
//                 Bridge's _set_recompute_overrides side effects (full/block/N; selective with A,B)
//   default_only  a feature stepgraph does not have: its off/default value is accepted, any other is
//                 "not implemented yet" (exit 1): --data c4, --save_dir, --use_megatron_fsdp true, ...
//   ignored       the launcher's own (Slurm, Kubeflow, containers, W&B, Hugging Face login, golden-value
//                 tests): the bench runs here and now, so they do not apply; listed in the plan as ignored
// A malformed value (-tp two) is a usage error (exit 2).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sg::bench {

// The most steps of each kind (-ms, --steps, --warmup, --floor-steps) a mode may run: a mode's steps are
// counted in int by the graph runtime, and a million steps is hours even at the smallest recipe.
inline constexpr int64_t kMaxStepsPerMode = 1000000;

enum class BridgeFlagKind : uint8_t { parallel, config, default_only, ignored };
enum class BridgeArity : uint8_t { none, one, optional, many };  // argparse store_true / 1 / nargs ? / nargs + *

struct BridgeFlag {
  std::vector<const char*> names;
  BridgeFlagKind kind;
  BridgeArity arity;
  // config: the config key ("optimizer.lr"; "" for -ms/--max_steps); default_only: the accepted values
  // separated by '|' ("mock", "false|0|no", "" for a store_true flag that must be absent).
  const char* detail;
  const char* help;
};

const std::vector<BridgeFlag>& bridge_flags();
const BridgeFlag* find_bridge_flag(const std::string& name);

// What the Bridge-only flags of one command line amount to.
struct BridgeFlagEffects {
  std::vector<std::string> overrides;      // section.key=value, applied after the trailing overrides
  std::optional<int64_t> max_steps;        // -ms/--max_steps
  std::vector<std::string> unimplemented;  // "-tp 2 (tensor parallelism)": exit 1
  std::vector<std::string> ignored;        // "--wandb_project_name": noted in the plan
  // config key -> the flag (as written) that set it, so a message can name the flag that wins over an
  // override of the same key ("-rl", "--lr").
  std::vector<std::pair<std::string, std::string>> key_flags;
};

// Records `flag` (as written, `name`) with its values. ConfigError (exit 2) for a malformed value.
void apply_bridge_flag(const BridgeFlag& flag, const std::string& name, const std::vector<std::string>& values,
                       BridgeFlagEffects& effects);

// The compact reference for `stepgraph bench --help`.
std::string bridge_flags_help();

}  // namespace sg::bench
