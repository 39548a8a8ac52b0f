#include "bench/bench_options.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <utility>

#include "core/error.h"
#include "core/strings.h"

namespace sg::bench {
namespace {

// Bridge's argparse choices (scripts/performance/argument_parser.py).
// --task: lora in current Bridge, peft in older releases.
const std::vector<std::string> kTasks = {"pretrain", "sft", "lora", "peft"};
// -g: Bridge's NUM_GPUS_PER_NODE_MAP keys, and h200 (the GPU stepgraph is measured on).
const std::vector<std::string> kGpus = {"h100", "h200", "b200", "b300", "gb200", "gb300", "vr200", "r100"};
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
      {{"--task"}, FlagType::text, "TASK", "pretrain (sft, lora or peft: not implemented yet)"},
      {{"-g", "--gpu"}, FlagType::text, "GPU",
       "target GPU, recorded in the JSON: " + join(kGpus, ", ") + "; the peak comes from the device name"},
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

// A step count (--steps, --warmup, --floor-steps): kMaxStepsPerMode at most, so a mode's total fits an int.
int to_steps(const std::string& flag, int64_t value) {
  if (value > kMaxStepsPerMode) {
    throw config::ConfigError(strprintf("%s %lld: at most %lld steps per mode", flag.c_str(),
                                        static_cast<long long>(value), static_cast<long long>(kMaxStepsPerMode)));
  }
  return to_int(flag, value);
}

// An output file flag's value: a name, not "" (which would silently write nothing).
std::string output_path(const std::string& flag, const std::string& value) {
  if (trim(value).empty()) throw config::ConfigError(flag + " needs a file name: " + flag + " FILE");
  return value;
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
    o.steps = to_steps(flag, integer());
    o.steps_given = true;
  }
  else if (canonical == "--warmup") o.warmup = to_steps(flag, integer());
  else if (canonical == "--floor-steps") o.floor_steps = to_steps(flag, integer());
  else if (canonical == "--json") o.json_path = output_path(flag, value);
  else if (canonical == "--trace") o.trace_path = output_path(flag, value);
  else if (canonical == "--plain") o.plain = true;
  else if (canonical == "--no-power") o.power = false;
  else if (canonical == "--html") o.html_path = output_path(flag, value);
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
      // Values run to the next flag or the first trailing override (section.key=value). A value with an '=' of
      // another shape is a value: -cb "export NCCL_DEBUG=INFO", as Bridge's commands are.
      while (i + 1 < args.size() && !is_flag(args[i + 1]) && !config::looks_like_dotted_override(args[i + 1])) {
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
  // A flag given twice would keep only its last value (argparse's choice); refused so neither is lost.
  std::vector<std::pair<std::string, std::string>> seen;  // canonical name -> as first written
  const auto once = [&seen](const std::string& canonical, const std::string& name) {
    for (const auto& [c, first] : seen) {
      if (c == canonical) {
        throw config::ConfigError("stepgraph bench: " + name + " is given twice" +
                                  (first == name ? std::string() : " (as " + first + " and " + name + ")") +
                                  "; give it once");
      }
    }
    seen.emplace_back(canonical, name);
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() > 1 && arg[0] == '-' && !(arg.size() > 1 && std::isdigit(static_cast<unsigned char>(arg[1])))) {
      const size_t eq = arg.find('=');
      const std::string name = arg.substr(0, eq);
      const FlagSpec* spec = find_flag(name);
      if (spec == nullptr) {
        if (const BridgeFlag* bridge = find_bridge_flag(name)) {
          // Bridge's -E/--env and -cb append (action="append"): repeating them is their use.
          const std::string canonical = bridge->names.back();
          if (canonical != "--env" && canonical != "--custom_bash_cmds") once(canonical, name);
          apply_bridge_flag(*bridge, name, bridge_flag_values(*bridge, name, eq, args, i), options.bridge);
          continue;
        }
        throw config::ConfigError("stepgraph bench: unknown option '" + name + "'" + did_you_mean(name, all_names) +
                          "; see stepgraph bench --help");
      }
      const std::string canonical = spec->names.back();
      once(canonical, name);
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

namespace {

// A recipe of another family with this -mr (llama/tiny_moe -> moe/tiny_moe): load_config would suggest the
// closest spelling in -m's family instead.
void check_recipe_family(const BenchOptions& o) {
  const std::string name = recipe_name(o);
  const std::vector<std::string> shipped = config::shipped_recipe_names();
  if (contains(shipped, name) || std::filesystem::exists(name)) return;
  const std::string recipe = lower(trim(o.model_recipe));
  for (const std::string& other : shipped) {
    const size_t slash = other.find('/');
    if (slash != std::string::npos && other.substr(slash + 1) == recipe) {
      throw config::ConfigError("no recipe " + name + ": " + recipe + " is in family " + other.substr(0, slash) +
                                "; use -m " + other.substr(0, slash) + " -mr " + recipe);
    }
  }
}

// Keys the bench never reads whose override asks for something it does not do (a length, an evaluation, a
// checkpoint): refused rather than accepted and changing nothing. The value says why and what to use instead.
std::optional<std::string> refused_key_reason(const std::string& key) {
  if (key == "train.train_iters" || key == "train.train_samples") {
    return "each mode runs warmup + capture + --steps + --floor-steps steps (or -ms/--max_steps in all); "
           "the learning-rate decay length is scheduler.lr_decay_iters";
  }
  if (key.rfind("validation.", 0) == 0 || key == "train.eval_interval" || key == "train.eval_iters" ||
      key == "train.skip_train") {
    return "the bench runs no evaluation";
  }
  if (key == "dataset.split" || key == "dataset.valid_data_path") {
    return "the bench measures on mock data and runs no evaluation";
  }
  if (key.rfind("checkpoint.", 0) == 0) return "the bench starts from initialization and saves nothing";
  return std::nullopt;
}

// Keys that only say how `stepgraph train` logs: Megatron-Bridge perf command lines carry them routinely and
// they do not change what the bench measures, so they are accepted (and validated as train validates them),
// then named by unused_overrides_note.
bool is_train_logging_key(const std::string& key) { return key.rfind("logger.", 0) == 0; }

// An output file must be writable before any GPU work, not after the whole benchmark ran: its folder exists
// and is writable, and the path is not a folder.
void check_output_path(const std::string& flag, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    throw config::ConfigError(flag + " " + path + " is a folder; give a file name, e.g. " + flag + " " +
                              (fs::path(path) / (flag == "--html" ? "bench.html" : "bench.json")).string());
  }
  fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) parent = ".";
  if (!fs::is_directory(parent, ec)) {
    throw config::ConfigError(flag + " " + path + ": the folder " + parent.string() +
                              " does not exist; create it first or write elsewhere");
  }
  if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    throw config::ConfigError(flag + " " + path + ": cannot write into the folder " + parent.string() + " (" +
                              std::strerror(errno) + "); write elsewhere");
  }
  if (fs::exists(path, ec) && ::access(path.c_str(), W_OK) != 0) {
    throw config::ConfigError(flag + " " + path + ": the file exists and cannot be overwritten (" +
                              std::strerror(errno) + "); write elsewhere");
  }
}

void check_output_paths(const BenchOptions& o) {
  namespace fs = std::filesystem;
  const std::vector<std::pair<const char*, const std::string*>> outputs = {
      {"--json", &o.json_path}, {"--html", &o.html_path}, {"--trace", &o.trace_path}};
  std::vector<std::pair<const char*, fs::path>> given;
  for (const auto& [flag, path] : outputs) {
    if (path->empty()) continue;
    check_output_path(flag, *path);
    std::error_code ec;
    const fs::path canonical = fs::weakly_canonical(fs::absolute(*path), ec);
    for (const auto& [other_flag, other] : given) {
      if (!ec && other == canonical) {
        throw config::ConfigError(std::string(other_flag) + " and " + flag + " both write " + *path +
                                  "; give each report its own file");
      }
    }
    given.emplace_back(flag, canonical);
  }
}

}  // namespace

void check_bench_options(const BenchOptions& o) {
  if (trim(o.model_family).empty() || trim(o.model_recipe).empty()) {
    throw config::ConfigError("stepgraph bench needs -m (model family) and -mr (model recipe), e.g. -m llama -mr tiny; "
                      "shipped recipes: " + join(config::shipped_recipe_names(), ", "));
  }
  check_recipe_family(o);
  if (!o.gpu.empty() && !contains(kGpus, lower(o.gpu))) {
    throw config::ConfigError("-g " + o.gpu + " is not a GPU Megatron-Bridge knows" +
                              did_you_mean(lower(o.gpu), kGpus) + "; use one of " + join(kGpus, ", ") +
                              " (recorded in the JSON; the peak comes from the device's name)");
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
  const std::pair<const char*, int64_t> counts[] = {
      {"--steps", o.steps}, {"--warmup", o.warmup.value_or(0)}, {"--floor-steps", o.floor_steps},
      {"-ms/--max_steps", o.bridge.max_steps.value_or(0)}};
  for (const auto& [flag, count] : counts) {
    if (count > kMaxStepsPerMode) {
      throw config::ConfigError(strprintf("%s %lld: at most %lld steps per mode", flag, static_cast<long long>(count),
                                          static_cast<long long>(kMaxStepsPerMode)));
    }
  }
  for (const std::string& text : o.overrides) {
    const std::string key = override_key(text);
    if (const std::optional<std::string> why = refused_key_reason(key)) {
      throw config::ConfigError("stepgraph bench does not read " + key + ": " + *why + "; drop the override '" +
                                text + "'");
    }
  }
  check_output_paths(o);
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

std::string unused_overrides_note(const BenchOptions& options) {
  std::vector<std::string> keys;
  for (const std::string& text : options.overrides) {
    const std::string key = override_key(text);
    if (is_train_logging_key(key) && !contains(keys, key)) keys.push_back(key);
  }
  if (keys.empty()) return "";
  return "stepgraph bench: accepted but not used: " + join(keys, ", ") +
         " (the bench writes its own report: --json, --html, --trace)";
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
  // Bridge's run_script.py defaults to --data mock; the bench always measures on mock data. A recipe or
  // override asking for real data is refused rather than quietly measured on random tokens.
  for (const std::string& text : options.overrides) {
    if (override_key(text) != "dataset.mock") continue;
    config::Config probe;
    config::apply_override(probe, text);
    if (!probe.dataset.mock) {
      throw config::ConfigError("'" + text + "': stepgraph bench always measures on mock data (random tokens); drop "
                                "the override (stepgraph train reads real data)");
    }
  }
  if (!config.dataset.data_path.empty()) {
    throw config::ConfigError(recipe_name(options) + " reads real data (dataset.data_path = [" +
                              join(config.dataset.data_path, ", ") + "]), but stepgraph bench always measures on "
                              "mock data (random tokens); add dataset.data_path=null to measure it on mock data");
  }
  config.dataset.mock = true;
  if (options.warmup) config.model.cuda_graph_warmup_steps = *options.warmup;
  return config;
}

CudaGraphFlags graph_flags(const GraphMode& mode) {
  return CudaGraphFlags{.impl = graph::graph_impl_name(mode.impl), .scope = mode.scope};
}

CudaGraphFlags graph_flags(const BenchOptions& options) {
  CudaGraphFlags flags;
  flags.impl = options.cuda_graph_impl;
  if (options.cuda_graph_scope) flags.scope = parse_scope_flag(*options.cuda_graph_scope);
  return flags;
}

}  // namespace sg::bench
