#include "bench/bench_options.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <exception>
#include <utility>

#include "core/error.h"
#include "core/strings.h"

namespace sg::bench {
namespace {

// Bridge's argparse choices (scripts/performance/argument_parser.py).
const std::vector<std::string> kTasks = {"pretrain", "sft", "peft"};
const std::vector<std::string> kComputeDtypes = {"bf16", "fp8_cs", "fp8_mx", "fp8_sc", "nvfp4"};

bool contains(const std::vector<std::string>& values, const std::string& value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string close = closest_match(word, candidates);
  return close.empty() ? std::string() : " (did you mean '" + close + "'?)";
}

// The key of an override ("model.cuda_graph_impl" of "model.cuda_graph_impl=local"), trimmed.
std::string override_key(const std::string& text) { return trim(text.substr(0, text.find('='))); }

enum class FlagType : uint8_t { text, integer, boolean };

struct FlagSpec {
  std::vector<const char*> names;  // first: Bridge's short form where it has one
  FlagType type;
  const char* value_name;
  std::string help;
};

const std::vector<FlagSpec>& flag_specs() {
  static const std::vector<FlagSpec> specs = {
      {{"-m", "--model_family_name"}, FlagType::text, "FAMILY", "model family: recipes/<FAMILY>/ (llama, moe, hybrid)"},
      {{"-mr", "--model_recipe_name"}, FlagType::text, "NAME", "recipe: recipes/<FAMILY>/<NAME>.yaml (`stepgraph --help` lists the shipped ones)"},
      {{"--task"}, FlagType::text, "TASK", "pretrain (sft, peft: not implemented yet)"},
      {{"-g", "--gpu"}, FlagType::text, "GPU", "target GPU, recorded (h200); the peak comes from the device name"},
      {{"-c", "--compute_dtype"}, FlagType::text, "DTYPE", "bf16 (fp8_cs, fp8_mx, fp8_sc, nvfp4: not implemented yet)"},
      {{"-ng", "--num_gpus"}, FlagType::integer, "N",
       "GPUs of this node, one data-parallel rank each (global batch = -mb x microbatches x N)"},
      {{"--cuda_graph_impl"}, FlagType::text, "IMPL",
       join(config::cuda_graph_impl_names(), ", ") + "; not none turns both RNG-tracker flags on"},
      {{"--cuda_graph_scope"}, FlagType::text, "A,B", config::cuda_graph_scope_list()},
      {{"-mb", "--micro_batch_size"}, FlagType::integer, "N", "train.micro_batch_size"},
      {{"-gb", "--global_batch_size"}, FlagType::integer, "N", "train.global_batch_size"},
      {{"-sl", "--seq_length"}, FlagType::integer, "N", "model.seq_length and dataset.seq_length"},
      {{"-d", "--dryrun"}, FlagType::boolean, "", "validate and print the plan; run nothing (no GPU needed)"},
      {{"--compare"}, FlagType::text, "MODES",
       "modes to run back to back on one model, IMPL[:SCOPE[+SCOPE...]][+RECOMPUTE] comma-separated, e.g. "
       "none,local,transformer_engine:attn+mlp; RECOMPUTE is recompute_none, recompute_full[=uniform|block[/N]] "
       "or recompute_selective[=MODULE/MODULE...] (modules joined by '/'), e.g. local+recompute_full,"
       "transformer_engine:attn+mlp+recompute_selective=core_attn/mlp; each recompute setting gets its own "
       "arena, so peak memory compares"},
      {{"--steps"}, FlagType::integer, "N", "measured steps per mode (default 50)"},
      {{"--warmup"}, FlagType::integer, "N", "eager steps before the capture step (default: the recipe's "
                                             "model.cuda_graph_warmup_steps)"},
      {{"--floor-steps"}, FlagType::integer, "N", "steps per mode traced with CUPTI for the kernel-time floor "
                                                  "(default 10; 0: no CUPTI)"},
      {{"--json"}, FlagType::text, "FILE", "write every number (and every per-step sample) as JSON"},
      {{"--trace"}, FlagType::text, "FILE", "write one steady-state step per mode as Chrome trace JSON (Perfetto)"},
      {{"--plain"}, FlagType::boolean, "", "progress as plain lines instead of a redrawn bar"},
      {{"--no-power"}, FlagType::boolean, "",
       "do not sample board power and SM clock (NVML, every 20 ms) during the measured steps"},
      {{"--html"}, FlagType::text, "FILE",
       "write the report as one self-contained HTML page (per-mode bars, step-time histograms; no network)"},
  };
  return specs;
}

const FlagSpec* find_flag(const std::string& name) {
  for (const FlagSpec& spec : flag_specs()) {
    for (const char* n : spec.names) {
      if (name == n) return &spec;
    }
  }
  return nullptr;
}

int64_t parse_integer(const std::string& flag, const std::string& value) {
  size_t used = 0;
  int64_t out = 0;
  try {
    out = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (value.empty() || used != value.size()) {
    throw config::ConfigError(flag + " expects an integer, got '" + value + "'");
  }
  return out;
}

int to_int(const std::string& flag, int64_t value) {
  if (value < INT32_MIN || value > INT32_MAX) throw config::ConfigError(strprintf("%s %lld is out of range", flag.c_str(),
                                                                          static_cast<long long>(value)));
  return static_cast<int>(value);
}

void set_flag(BenchOptions& o, const std::string& canonical, const std::string& flag, const std::string& value) {
  const auto integer = [&]() { return parse_integer(flag, value); };
  if (canonical == "--model_family_name") o.model_family = lower(value);
  else if (canonical == "--model_recipe_name") o.model_recipe = lower(value);
  else if (canonical == "--task") o.task = lower(value);
  else if (canonical == "--gpu") o.gpu = lower(value);
  else if (canonical == "--compute_dtype") o.compute_dtype = lower(value);
  else if (canonical == "--num_gpus") o.num_gpus = to_int(flag, integer());
  else if (canonical == "--cuda_graph_impl") o.cuda_graph_impl = value;
  else if (canonical == "--cuda_graph_scope") o.cuda_graph_scope = value;
  else if (canonical == "--micro_batch_size") o.micro_batch_size = integer();
  else if (canonical == "--global_batch_size") o.global_batch_size = integer();
  else if (canonical == "--seq_length") o.seq_length = integer();
  else if (canonical == "--dryrun") o.dryrun = true;
  else if (canonical == "--compare") o.compare = value;
  else if (canonical == "--steps") {
    o.steps = to_int(flag, integer());
    o.steps_given = true;
  }
  else if (canonical == "--warmup") o.warmup = to_int(flag, integer());
  else if (canonical == "--floor-steps") o.floor_steps = to_int(flag, integer());
  else if (canonical == "--json") o.json_path = value;
  else if (canonical == "--trace") o.trace_path = value;
  else if (canonical == "--plain") o.plain = true;
  else if (canonical == "--no-power") o.power = false;
  else if (canonical == "--html") o.html_path = value;
}

}  // namespace

namespace {

// The values of a Bridge-only flag at args[i] (name [= value]); advances i past what it consumed.
std::vector<std::string> bridge_flag_values(const BridgeFlag& flag, const std::string& name, size_t eq,
                                            const std::vector<std::string>& args, size_t& i) {
  const std::string& arg = args[i];
  const auto is_flag = [](const std::string& a) {
    return a.size() > 1 && a[0] == '-' && !std::isdigit(static_cast<unsigned char>(a[1]));
  };
  std::vector<std::string> values;
  if (eq != std::string::npos) {
    if (flag.arity == BridgeArity::none) throw config::ConfigError(name + " is a flag and takes no value");
    values.push_back(arg.substr(eq + 1));
    return values;
  }
  switch (flag.arity) {
    case BridgeArity::none:
      break;
    case BridgeArity::one:
      if (i + 1 >= args.size() || (is_flag(args[i + 1]) && args[i + 1] != "-1")) {
        throw config::ConfigError(name + " needs a value");
      }
      values.push_back(args[++i]);
      break;
    case BridgeArity::optional:
      if (i + 1 < args.size() && !is_flag(args[i + 1]) && !config::looks_like_override(args[i + 1])) {
        values.push_back(args[++i]);
      }
      break;
    case BridgeArity::many:
      while (i + 1 < args.size() && !is_flag(args[i + 1]) && !config::looks_like_override(args[i + 1])) {
        values.push_back(args[++i]);
      }
      break;
  }
  return values;
}

}  // namespace

BenchOptions parse_bench_args(const std::vector<std::string>& args) {
  BenchOptions options;
  std::vector<std::string> all_names;
  for (const FlagSpec& spec : flag_specs()) {
    for (const char* n : spec.names) all_names.emplace_back(n);
  }
  for (const BridgeFlag& flag : bridge_flags()) {
    for (const char* n : flag.names) all_names.emplace_back(n);
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() > 1 && arg[0] == '-' && !(arg.size() > 1 && std::isdigit(static_cast<unsigned char>(arg[1])))) {
      const size_t eq = arg.find('=');
      const std::string name = arg.substr(0, eq);
      const FlagSpec* spec = find_flag(name);
      if (spec == nullptr) {
        if (const BridgeFlag* bridge = find_bridge_flag(name)) {
          apply_bridge_flag(*bridge, name, bridge_flag_values(*bridge, name, eq, args, i), options.bridge);
          continue;
        }
        throw config::ConfigError("stepgraph bench: unknown option '" + name + "'" + did_you_mean(name, all_names) +
                          "; see stepgraph bench --help");
      }
      const std::string canonical = spec->names.back();
      std::string value;
      if (spec->type == FlagType::boolean) {
        if (eq != std::string::npos) throw config::ConfigError(name + " is a flag and takes no value");
      } else if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
      } else {
        if (i + 1 >= args.size() || find_flag(args[i + 1].substr(0, args[i + 1].find('='))) != nullptr) {
          throw config::ConfigError(name + " needs a value: " + name + " " + spec->value_name);
        }
        value = args[++i];
      }
      set_flag(options, canonical, name, value);
    } else if (config::looks_like_override(arg)) {
      options.overrides.push_back(arg);
    } else {
      throw config::ConfigError("stepgraph bench: unexpected argument '" + arg +
                        "'; the recipe is chosen with -m FAMILY -mr NAME, overrides look like section.key=value");
    }
  }
  return options;
}

std::string bench_flags_help() {
  std::vector<std::pair<std::string, std::string>> rows;
  size_t width = 0;
  for (const FlagSpec& spec : flag_specs()) {
    std::vector<std::string> names(spec.names.begin(), spec.names.end());
    std::string left = join(names, ", ");
    if (spec.type != FlagType::boolean) left += std::string(" ") + spec.value_name;
    width = std::max(width, left.size());
    rows.emplace_back(left, spec.help);
  }
  std::string out;
  for (const auto& [left, help] : rows) out += "  " + left + std::string(width - left.size() + 2, ' ') + help + "\n";
  out += "\nThe other Megatron-Bridge run_script.py flags are accepted, so a Bridge command line pastes unchanged:\n";
  out += bridge_flags_help();
  return out;
}

std::string recipe_name(const BenchOptions& options) {
  return lower(trim(options.model_family)) + "/" + lower(trim(options.model_recipe));
}

void check_bench_options(const BenchOptions& o) {
  if (trim(o.model_family).empty() || trim(o.model_recipe).empty()) {
    throw config::ConfigError("stepgraph bench needs -m (model family) and -mr (model recipe), e.g. -m llama -mr tiny; "
                      "shipped recipes: " + join(config::shipped_recipe_names(), ", "));
  }
  const std::string task = lower(o.task);
  if (!contains(kTasks, task)) {
    throw config::ConfigError("--task " + o.task + " is not a Megatron-Bridge task" + did_you_mean(task, kTasks) +
                      "; use pretrain");
  }
  if (task != "pretrain") {
    throw Error("--task " + task + " is not implemented yet: stepgraph bench measures pretraining steps; "
                "use --task pretrain");
  }
  const std::string dtype = lower(o.compute_dtype);
  if (!contains(kComputeDtypes, dtype)) {
    throw config::ConfigError("-c " + o.compute_dtype + " is not a Megatron-Bridge compute dtype" +
                      did_you_mean(dtype, kComputeDtypes) + "; use bf16");
  }
  if (dtype != "bf16") {
    throw Error("-c " + dtype + " is not implemented yet: stepgraph computes in bf16 (fp32 main weights); use -c bf16");
  }
  if (o.num_gpus < 1) throw config::ConfigError(strprintf("-ng %d: the number of GPUs must be at least 1", o.num_gpus));
  if (!o.bridge.unimplemented.empty()) {
    throw Error("not implemented yet: " + join(o.bridge.unimplemented, "; ") +
                ". stepgraph bench accepts these Megatron-Bridge flags only at their defaults");
  }
  if (o.bridge.max_steps && o.steps_given) {
    throw config::ConfigError("-ms/--max_steps and --steps both set the length of each mode; give one");
  }
  if (o.cuda_graph_impl) config::check_impl_flag(*o.cuda_graph_impl);
  if (o.cuda_graph_scope) parse_scope_flag(*o.cuda_graph_scope);
  if (o.micro_batch_size && *o.micro_batch_size < 1) throw config::ConfigError("-mb must be at least 1");
  if (o.global_batch_size && *o.global_batch_size < 1) throw config::ConfigError("-gb must be at least 1");
  if (o.seq_length && *o.seq_length < 1) throw config::ConfigError("-sl must be at least 1");
  if (o.steps < 1) throw config::ConfigError(strprintf("--steps %d: measure at least 1 step per mode", o.steps));
  if (o.warmup && *o.warmup < 0) throw config::ConfigError(strprintf("--warmup %d: must be >= 0", *o.warmup));
  if (o.floor_steps < 0) throw config::ConfigError(strprintf("--floor-steps %d: must be >= 0 (0 skips CUPTI)", o.floor_steps));
  if (!o.trace_path.empty() && o.floor_steps < 1) {
    throw config::ConfigError("--trace records the first CUPTI floor step: it needs --floor-steps >= 1");
  }
  if (o.compare) {
    if (o.cuda_graph_impl || o.cuda_graph_scope) {
      throw config::ConfigError("--compare sets the CUDA-graph mode of every run; drop --cuda_graph_impl/--cuda_graph_scope "
                        "(write the mode into --compare, e.g. transformer_engine:attn+mlp)");
    }
    for (const std::string& text : o.overrides) {
      const std::string key = override_key(text);
      if (key == "model.cuda_graph_impl" || key == "model.cuda_graph_scope") {
        throw config::ConfigError("--compare sets the CUDA-graph mode of every run; drop the override '" + text +
                          "' (write the mode into --compare, e.g. transformer_engine:attn+mlp)");
      }
    }
    parse_mode_list(*o.compare);
  }
}

config::Config bench_config(const BenchOptions& options, const CudaGraphFlags& graph) {
  config::Config config = config::load_config(recipe_name(options), options.overrides);
  config::apply_overrides(config, options.bridge.overrides);  // flags win over the trailing overrides
  if (options.micro_batch_size) config.train.micro_batch_size = *options.micro_batch_size;
  if (options.global_batch_size) config.train.global_batch_size = *options.global_batch_size;
  if (options.seq_length) {
    config.model.seq_length = *options.seq_length;
    config.dataset.seq_length = *options.seq_length;
  }
  apply_cuda_graph_overrides(config, graph);
  // Bridge's run_script.py defaults to --data mock; the bench always measures on mock data.
  config.dataset.mock = true;
  if (options.warmup) config.model.cuda_graph_warmup_steps = *options.warmup;
  return config;
}

CudaGraphFlags graph_flags(const GraphMode& mode) { return CudaGraphFlags{mode.impl, mode.scope}; }

CudaGraphFlags graph_flags(const BenchOptions& options) {
  CudaGraphFlags flags;
  flags.impl = options.cuda_graph_impl;
  if (options.cuda_graph_scope) flags.scope = parse_scope_flag(*options.cuda_graph_scope);
  return flags;
}

}  // namespace sg::bench
