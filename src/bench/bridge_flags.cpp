#include "bench/bridge_flags.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "config/config.h"
#include "core/strings.h"

namespace sg::bench {
namespace {

using K = BridgeFlagKind;
using A = BridgeArity;

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

bool parse_int(const std::string& text, int64_t& out) {
  size_t used = 0;
  try {
    out = std::stoll(text, &used);
  } catch (const std::exception&) {
    return false;
  }
  return !text.empty() && used == text.size();
}

}  // namespace

const std::vector<BridgeFlag>& bridge_flags() {
  static const std::vector<BridgeFlag> flags = {
      // Parallelism: stepgraph runs on one GPU.
      {{"-tp", "--tensor_model_parallel_size"}, K::parallel, A::one, "tensor parallelism", "1"},
      {{"-pp", "--pipeline_model_parallel_size"}, K::parallel, A::one, "pipeline parallelism", "1"},
      {{"-cp", "--context_parallel_size"}, K::parallel, A::one, "context parallelism", "1"},
      {{"-vp", "--virtual_pipeline_model_parallel_size"}, K::parallel, A::one, "virtual pipeline parallelism",
       "1 or None"},
      {{"-ep", "--expert_model_parallel_size"}, K::parallel, A::one, "expert parallelism", "1"},
      {{"-et", "--expert_tensor_parallel_size"}, K::parallel, A::optional, "expert tensor parallelism", "1 or None"},
      // Mapped onto config keys.
      {{"-ms", "--max_steps"}, K::config, A::one, "", "optimizer steps per mode (warmup + capture + measured + floor)"},
      {{"--lr"}, K::config, A::one, "optimizer.lr", "optimizer.lr"},
      {{"--min_lr"}, K::config, A::one, "optimizer.min_lr", "optimizer.min_lr"},
      {{"--warmup_iters"}, K::config, A::one, "scheduler.lr_warmup_iters", "scheduler.lr_warmup_iters"},
      {{"--hidden_size"}, K::config, A::one, "model.hidden_size", "model.hidden_size"},
      {{"--num_layers"}, K::config, A::one, "model.num_layers", "model.num_layers"},
      {{"--num_moe_experts"}, K::config, A::one, "model.num_moe_experts", "model.num_moe_experts"},
      {{"-rl", "--recompute_num_layers"}, K::config, A::one, "model.recompute_num_layers",
       "model.recompute_granularity full, recompute_method block, recompute_num_layers N"},
      {{"--recompute_modules"}, K::config, A::one, "model.recompute_modules",
       "model.recompute_granularity selective, recompute_modules A,B"},
      {{"--packed_sequence"}, K::config, A::none, "dataset.packed_sequence", "dataset.packed_sequence=true"},
      {{"--tokenizer_type"}, K::config, A::one, "tokenizer.tokenizer_type", "tokenizer.tokenizer_type"},
      {{"--tokenizer_model"}, K::config, A::one, "tokenizer.tokenizer_model", "tokenizer.tokenizer_model"},
      {{"--vocab_size"}, K::config, A::one, "model.vocab_size", "model.vocab_size"},
      // Features stepgraph does not have: only the default is accepted.
      {{"--domain"}, K::default_only, A::one, "llm", "llm"},
      {{"--data"}, K::default_only, A::one, "mock", "mock (the bench measures on mock data)"},
      {{"--optimizer_type"}, K::default_only, A::one, "adam", "adam (AdamW)"},
      {{"--pipeline_model_parallel_layout"}, K::default_only, A::one, "none", "None"},
      {{"--first_k_dense_replace"}, K::default_only, A::one, "none|0", "None"},
      {{"--pretrained_checkpoint"}, K::default_only, A::one, "none", "not implemented yet (the bench starts from init)"},
      {{"--save_dir"}, K::default_only, A::one, "none", "not implemented yet (the bench saves nothing)"},
      {{"--load_dir"}, K::default_only, A::one, "none", "not implemented yet"},
      {{"--save_interval"}, K::default_only, A::one, "none", "not implemented yet"},
      // Bridge's checkpoint.most_recent_k, which train implements; -1 is its default (keep every checkpoint).
      {{"--most_recent_k"}, K::default_only, A::one, "none|-1",
       "not implemented yet (the bench saves nothing, so there is nothing to keep; train keeps the k newest "
       "checkpoints with checkpoint.most_recent_k)"},
      {{"--c4_root"}, K::default_only, A::one, "none", "not implemented yet (mock data)"},
      {{"--c4_train_shards"}, K::default_only, A::many, "none", "not implemented yet (mock data)"},
      {{"--dataset_paths"}, K::default_only, A::many, "none", "not implemented yet (mock data)"},
      {{"--dataset_root"}, K::default_only, A::one, "none", "not implemented yet (mock data)"},
      {{"--index_mapping_dir"}, K::default_only, A::one, "none", "not implemented yet (mock data)"},
      {{"--dataset_name"}, K::default_only, A::one, "none", "not implemented yet (mock data)"},
      {{"--head_only"}, K::default_only, A::none, "", "not implemented yet (mock data)"},
      {{"--diffusion_dataset_path"}, K::default_only, A::one, "none", "not implemented yet"},
      {{"--use_tokendrop"}, K::default_only, A::one, "false|0|no|n|f", "false"},
      {{"--use_megatron_fsdp"}, K::default_only, A::one, "false|0|no|n|f", "false"},
      {{"--nccl_ub"}, K::default_only, A::one, "false|0|no|n|f", "false"},
      {{"--moe_a2a_overlap"}, K::default_only, A::one, "false|0|no|n|f", "false"},
      {{"-ol", "--activation_offload_layers"}, K::default_only, A::one, "0", "0"},
      {{"--moe_flex_dispatcher_backend"}, K::default_only, A::one, "none", "None"},
      {{"-vb", "--enable_vboost"}, K::default_only, A::one, "false|0|no|n|f", "false"},
      {{"-lgc", "--lock_gpu_freq"}, K::default_only, A::one, "none", "not implemented yet (set clocks with nvidia-smi)"},
      {{"-lmc", "--peak_mem_clk"}, K::default_only, A::one, "none", "not implemented yet"},
      {{"-en", "--enable_nsys"}, K::default_only, A::none, "", "not implemented yet (run nsys profile stepgraph bench; "
                                                            "--trace writes a Perfetto trace)"},
      {{"--export_nsys_sqlite"}, K::default_only, A::none, "", "not implemented yet"},
      {{"-pyp", "--pytorch_profiler"}, K::default_only, A::one, "false|0|no|n|f", "false"},
      {{"--profiling_start_step"}, K::default_only, A::one, "none", "not implemented yet (use --trace)"},
      {{"--profiling_stop_step"}, K::default_only, A::one, "none", "not implemented yet (use --trace)"},
      {{"-mh", "--record_memory_history"}, K::default_only, A::one, "false|0|no|n|f", "false"},
      {{"--profiling_gpu_metrics"}, K::default_only, A::none, "", "not implemented yet"},
      {{"--profiling_ranks"}, K::default_only, A::one, "0|none", "0"},
      {{"--nsys_trace"}, K::default_only, A::one, "none", "not implemented yet"},
      {{"--nsys_extra_args"}, K::default_only, A::one, "none", "not implemented yet"},
      // The launcher's own: they do not change what runs here.
      {{"-nh", "--nemo_home"}, K::ignored, A::one, "", "launcher"},
      {{"--detach"}, K::ignored, A::one, "", "launcher"},
      {{"--max_retries"}, K::ignored, A::one, "", "launcher"},
      {{"--use_recipes"}, K::ignored, A::none, "", "stepgraph always runs its recipes"},
      {{"--distributed_timeout_minutes"}, K::ignored, A::one, "", "one process, no process group"},
      {{"--deterministic"}, K::ignored, A::none, "", "stepgraph is always deterministic"},
      {{"-hf", "--hf_token"}, K::ignored, A::one, "", "nothing is downloaded"},
      {{"--offline"}, K::ignored, A::none, "", "nothing is downloaded"},
      {{"-a", "--account"}, K::ignored, A::one, "", "Slurm"},
      {{"-p", "--partition"}, K::ignored, A::one, "", "Slurm"},
      {{"-t", "--time_limit"}, K::ignored, A::one, "", "Slurm"},
      {{"--preempt_time"}, K::ignored, A::one, "", "Slurm"},
      {{"-gn", "--gpus_per_node"}, K::ignored, A::one, "", "Slurm"},
      {{"-i", "--container_image"}, K::ignored, A::one, "", "container"},
      {{"-cm", "--custom_mounts"}, K::ignored, A::one, "", "container"},
      {{"-ce", "--custom_env_vars"}, K::ignored, A::one, "", "container"},
      {{"-E", "--env"}, K::ignored, A::one, "", "container"},
      {{"-cs", "--custom_srun_args"}, K::ignored, A::one, "", "Slurm"},
      {{"-cb", "--custom_bash_cmds"}, K::ignored, A::many, "", "Slurm"},
      {{"--gres"}, K::ignored, A::one, "", "Slurm"},
      {{"--additional_slurm_params"}, K::ignored, A::one, "", "Slurm"},
      {{"--packager"}, K::ignored, A::one, "", "launcher"},
      {{"--enable_pct_binding"}, K::ignored, A::one, "", "launcher"},
      {{"--kubeflow_namespace"}, K::ignored, A::one, "", "Kubeflow"},
      {{"--csp"}, K::ignored, A::one, "", "Kubeflow"},
      {{"--kubeflow_workdir_pvc"}, K::ignored, A::one, "", "Kubeflow"},
      {{"--kubeflow_workdir_pvc_path"}, K::ignored, A::one, "", "Kubeflow"},
      {{"--kubeflow_workdir_local_path"}, K::ignored, A::one, "", "Kubeflow"},
      {{"--kubeflow_image_pull_secrets"}, K::ignored, A::one, "", "Kubeflow"},
      {{"--kubeflow_volumes_json"}, K::ignored, A::one, "", "Kubeflow"},
      {{"--kubeflow_volume_mounts_json"}, K::ignored, A::one, "", "Kubeflow"},
      {{"--kubeflow_tolerations_json"}, K::ignored, A::one, "", "Kubeflow"},
      {{"--kubeflow_affinity_json"}, K::ignored, A::one, "", "Kubeflow"},
      {{"--kubeflow_env_list_json"}, K::ignored, A::one, "", "Kubeflow"},
      {{"--kubeflow_extra_resource_requests_json"}, K::ignored, A::one, "", "Kubeflow"},
      {{"--kubeflow_extra_resource_limits_json"}, K::ignored, A::one, "", "Kubeflow"},
      {{"--kubeflow_pod_spec_overrides_json"}, K::ignored, A::one, "", "Kubeflow"},
      {{"--kubeflow_pod_annotations_json"}, K::ignored, A::one, "", "Kubeflow"},
      {{"--kubeflow_container_kwargs_json"}, K::ignored, A::one, "", "Kubeflow"},
      {{"--kubeflow_labels_json"}, K::ignored, A::one, "", "Kubeflow"},
      {{"-wdk", "--wandb_key"}, K::ignored, A::one, "", "W&B"},
      {{"-wdp", "--wandb_project_name"}, K::ignored, A::one, "", "W&B"},
      {{"-wde", "--wandb_entity_name"}, K::ignored, A::one, "", "W&B"},
      {{"-wdj", "--wandb_experiment_name"}, K::ignored, A::one, "", "W&B"},
      {{"-wds", "--wandb_save_dir"}, K::ignored, A::one, "", "W&B"},
      {{"-l", "--log_dir"}, K::ignored, A::one, "", "launcher logs"},
      {{"--save_config_filepath"}, K::ignored, A::one, "", "launcher (stepgraph config show prints the config)"},
      {{"--dump_env"}, K::ignored, A::none, "", "launcher"},
      {{"-cv", "--config_variant"}, K::ignored, A::one, "", "launcher"},
      {{"--list_config_variants"}, K::ignored, A::none, "", "launcher"},
      {{"--is_long_convergence_run"}, K::ignored, A::none, "", "golden-value tests"},
      {{"--retry_on_testing_failure"}, K::ignored, A::none, "", "golden-value tests"},
      {{"--golden_values_path"}, K::ignored, A::one, "", "golden-value tests"},
      {{"--timing_threshold"}, K::ignored, A::one, "", "golden-value tests"},
      {{"--skip_first_percent_time"}, K::ignored, A::one, "", "golden-value tests"},
      {{"--correlation_threshold"}, K::ignored, A::one, "", "golden-value tests"},
      {{"--high_loss_tolerance"}, K::ignored, A::one, "", "golden-value tests"},
      {{"--medium_loss_tolerance"}, K::ignored, A::one, "", "golden-value tests"},
      {{"--low_loss_tolerance"}, K::ignored, A::one, "", "golden-value tests"},
      {{"--final_loss_tolerance"}, K::ignored, A::one, "", "golden-value tests"},
      {{"--max_outlier_ratio"}, K::ignored, A::one, "", "golden-value tests"},
      {{"--outlier_threshold"}, K::ignored, A::one, "", "golden-value tests"},
      {{"--skip_first_percent_loss"}, K::ignored, A::one, "", "golden-value tests"},
      {{"--memory_threshold"}, K::ignored, A::one, "", "golden-value tests"},
      {{"--eval_time_start_step"}, K::ignored, A::one, "", "golden-value tests"},
      {{"--eval_time_end_step"}, K::ignored, A::one, "", "golden-value tests"},
  };
  return flags;
}

const BridgeFlag* find_bridge_flag(const std::string& name) {
  for (const BridgeFlag& flag : bridge_flags()) {
    for (const char* n : flag.names) {
      if (name == n) return &flag;
    }
  }
  return nullptr;
}

void apply_bridge_flag(const BridgeFlag& flag, const std::string& name, const std::vector<std::string>& values,
                       BridgeFlagEffects& effects) {
  const std::string value = join(values, ",");
  const std::string shown = values.empty() ? name : name + " " + join(values, " ");
  switch (flag.kind) {
    case K::parallel: {
      if (values.empty() || lower(value) == "none") return;  // None: Bridge's "unset"
      int64_t size = 0;
      if (!parse_int(value, size)) throw config::ConfigError(name + " expects an integer, got '" + value + "'");
      if (name == "-vp" || name == "--virtual_pipeline_model_parallel_size") {
        if (size == -1) return;  // Bridge's default: unset
      }
      if (size < 1) throw config::ConfigError(strprintf("%s %lld: a parallel size is at least 1", name.c_str(),
                                                        static_cast<long long>(size)));
      if (size > 1) {
        effects.unimplemented.push_back(
            strprintf("%s %lld (%s; stepgraph runs on one GPU: use %s 1)", name.c_str(), static_cast<long long>(size),
                      flag.detail, name.c_str()));
      }
      return;
    }
    case K::config: {
      if (std::string(flag.detail).empty()) {  // -ms/--max_steps
        int64_t steps = 0;
        if (!parse_int(value, steps) || steps < 1) {
          throw config::ConfigError(name + " expects a positive integer, got '" + value + "'");
        }
        if (steps > kMaxStepsPerMode) {
          throw config::ConfigError(strprintf("%s %lld: at most %lld steps per mode", name.c_str(),
                                              static_cast<long long>(steps),
                                              static_cast<long long>(kMaxStepsPerMode)));
        }
        effects.max_steps = steps;
        return;
      }
      std::vector<std::string> sets;  // key=value, in Bridge's order
      if (std::string(flag.detail) == "model.recompute_num_layers") {
        // Bridge's _set_recompute_overrides: -rl N is full recompute of the first N layers (method block).
        int64_t layers = 0;
        if (!parse_int(value, layers) || layers < 1) {
          throw config::ConfigError(name + " expects a positive integer (layers of full recompute), got '" + value +
                                    "'");
        }
        sets = {"model.recompute_granularity=full", "model.recompute_method=block",
                "model.recompute_num_layers=" + std::to_string(layers)};
      } else if (std::string(flag.detail) == "model.recompute_modules") {
        // ... and --recompute_modules A,B is selective recompute of those modules.
        sets = {"model.recompute_modules=" + value, "model.recompute_granularity=selective"};
      } else {
        sets = {std::string(flag.detail) + "=" + (flag.arity == A::none ? "true" : value)};
      }
      for (const std::string& set : sets) {
        const std::string key = set.substr(0, set.find('='));
        for (const auto& [other_key, other_flag] : effects.key_flags) {
          if (other_key != key) continue;
          // Both recompute flags set the granularity; Megatron refuses their mix (recompute_num_layers with
          // selective), so it is refused here rather than decided by the order on the command line.
          throw config::ConfigError(other_flag + " and " + name + " both set " + key +
                                    (key == "model.recompute_granularity"
                                         ? " (-rl: full recompute of N layers, --recompute_modules: selective); give "
                                           "one, or compare both with --compare MODE+recompute_full=block/N,"
                                           "MODE+recompute_selective=A/B"
                                         : "; give one"));
        }
      }
      for (const std::string& set : sets) {
        effects.overrides.push_back(set);
        effects.key_flags.emplace_back(set.substr(0, set.find('=')), name);
      }
      return;
    }
    case K::default_only: {
      // nargs * with no value (--dataset_paths, --c4_train_shards) names nothing: Bridge's default.
      if (flag.arity == A::many && values.empty()) return;
      const std::vector<std::string> ok = split(flag.detail, '|');
      const bool accepted = flag.arity == A::none ? false
                                                  : std::find(ok.begin(), ok.end(), lower(value)) != ok.end();
      if (accepted) return;
      // The help either starts with "not implemented yet" (said once by the caller) or names the accepted value.
      const std::string help = flag.help;
      const std::string prefix = "not implemented yet";
      if (help.rfind(prefix, 0) == 0) {
        const std::string rest = trim(help.substr(prefix.size()));
        const bool wrapped = rest.size() >= 2 && rest.front() == '(' && rest.back() == ')';
        const std::string why = wrapped ? rest.substr(1, rest.size() - 2) : rest;
        effects.unimplemented.push_back(why.empty() ? shown : shown + " (" + why + ")");
      } else {
        effects.unimplemented.push_back(shown + " (accepted: " + help + ")");
      }
      return;
    }
    case K::ignored:
      effects.ignored.push_back(name);
      return;
  }
}

std::string bridge_flags_help() {
  std::map<BridgeFlagKind, std::vector<std::string>> names;
  for (const BridgeFlag& flag : bridge_flags()) names[flag.kind].push_back(flag.names.front());
  std::string out;
  out += "  parallel sizes (1 runs; more: not implemented yet, exit 1): " + join(names[K::parallel], " ") + "\n";
  out += "  mapped onto the config: -ms/--max_steps (steps per mode), --lr, --min_lr, --warmup_iters, --hidden_size,\n"
         "    --num_layers, --num_moe_experts, --packed_sequence, --tokenizer_type, --tokenizer_model, --vocab_size;\n"
         "    -rl N (full recompute, method block, N layers), --recompute_modules A,B (selective, these modules)\n";
  out += "  their default only (else not implemented yet, exit 1): --domain llm, --data mock, --optimizer_type adam,\n"
         "    false for --use_megatron_fsdp --nccl_ub --use_tokendrop --moe_a2a_overlap -vb -pyp -mh; and absent:\n"
         "    checkpoint, dataset and profiling flags (--save_dir, --c4_root, -en, ...)\n";
  out += "  ignored (Bridge's launcher: Slurm, Kubeflow, container, W&B, Hugging Face login, golden-value tests):\n"
         "    -a -p -t -gn -i -nh -hf -wdp -l ... (" +
         std::to_string(names[K::ignored].size()) + " flags)\n";
  return out;
}

}  // namespace sg::bench
