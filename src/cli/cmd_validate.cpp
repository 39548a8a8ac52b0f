// stepgraph validate [RECIPE] [section.key=value ...] [--json] [--all]
// One recipe: every rule violation (rule, keys = values, fix) and the notes. No recipe, or --all:
// every shipped recipe, as a summary table. Exit 0 valid (notes allowed), 1 rule violations,
// 2 usage or parse error.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/command.h"
#include "config/config.h"
#include "config/graph_keys.h"
#include "config/model_config.h"
#include "config/validate.h"
#include "core/strings.h"
#include "dist/world_env.h"
#include "model/activation_account.h"
#include "model/recompute.h"
#include "train/pretrained.h"
#include "train/run_plan.h"

namespace sg::cli {
namespace {

struct Outcome {
  std::string name;
  std::string source;
  std::optional<config::ValidationReport> report;  // empty when the config did not parse or load
  std::string error;
  int error_exit_code = 2;  // without a report: 2 a usage or parse error, 1 another (a pretrained folder)
  int exit_code() const { return !report ? error_exit_code : report->ok() ? 0 : 1; }
};

// `data_parallel_size`: std::nullopt reads the launcher's environment here, so that a malformed variable is
// this recipe's error (with --json, in its report).
Outcome evaluate(const std::string& recipe, const std::vector<std::string>& config_files,
                 const std::vector<std::string>& overrides, std::optional<int64_t> data_parallel_size) {
  Outcome outcome;
  outcome.name = recipe;
  try {
    const config::RecipeText text = config::find_recipe(recipe);
    outcome.name = text.name;
    outcome.source = text.source;
    config::Config config = config::load_config(text, config_files, overrides);
    config.data_parallel_size = data_parallel_size ? *data_parallel_size : data_parallel_size_from_env();
    // Shape keys a pretrained_checkpoint folder provides are filled in (or checked) as `train` does.
    outcome.report = config::validate(train::apply_pretrained_shapes(config));
  } catch (const config::ConfigError& e) {
    outcome.error = e.what();
  } catch (const std::exception& e) {
    // A pretrained_checkpoint folder that cannot be read, a malformed WORLD_SIZE: the request fails (1),
    // and --json still reports it.
    outcome.error = e.what();
    outcome.error_exit_code = 1;
  }
  return outcome;
}

// Values echo the user's bytes, which need not be UTF-8: U+FFFD stands in rather than the dump throwing.
std::string dump_json(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json to_json(const std::vector<config::KeyValue>& values) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& kv : values) out.push_back({{"key", kv.key}, {"value", kv.value}});
  return out;
}

// Activation bytes of one microbatch, per layer, with and without recompute (no GPU needed); null when
// the config does not describe a model the engine builds.
nlohmann::json activations_json(const config::Config& c) {
  if (c.train.micro_batch_size.value_or(0) <= 0) return nullptr;
  try {
    const model::ModelSpec spec = config::model_spec(c);
    const model::ActivationAccount account = model::activation_account(spec, config::batch_spec(c));
    nlohmann::json out = {{"recompute", model::describe_recompute(spec.recompute)},
                          {"bytes", account.without_recompute()},
                          {"with_recompute_bytes", account.with_recompute()},
                          {"recompute_buffer_bytes", account.recompute_buffer_bytes},
                          {"layers", nlohmann::json::array()}};
    for (const model::LayerActivations& l : account.layers) {
      out["layers"].push_back({{"layer", l.layer},
                               {"kind", model::layer_kind_name(l.kind)},
                               {"bytes", l.bytes},
                               {"with_recompute_bytes", l.kept()}});
    }
    return out;
  } catch (const Error&) {
    return nullptr;
  }
}

// The run plan of a valid config (model, tokens per step, GPU memory plan, graphs), computed without a
// device; empty when the plan itself cannot be made (a shape the kernels refuse).
std::vector<std::string> run_plan_lines(const config::ValidationReport& report) {
  if (const auto missing = config::unimplemented_features(report.config); !missing.empty()) {
    return {"no run plan: stepgraph does not train this yet (" + join(missing, "; ") + ")"};
  }
  try {
    return train::describe_run_plan(report.config);
  } catch (const sg::Error& e) {
    return {std::string("no run plan: ") + e.what()};
  }
}

nlohmann::json to_json(const Outcome& o) {
  nlohmann::json out = {{"recipe", o.name}, {"source", o.source}};
  if (!o.report) {
    out["valid"] = false;
    out["error"] = o.error;
    return out;
  }
  out["valid"] = o.report->ok();
  out["error"] = nullptr;  // every report has the field: a string when the config did not parse or load
  out["violations"] = nlohmann::json::array();
  for (const auto& v : o.report->violations) {
    out["violations"].push_back({{"rule", v.rule},
                                 {"rule_summary", config::rule_summary(v.rule)},
                                 {"message", v.message},
                                 {"values", to_json(v.values)},
                                 {"fix", v.fix}});
  }
  out["notes"] = nlohmann::json::array();
  for (const auto& n : o.report->notes) {
    out["notes"].push_back(
        {{"rule", n.rule}, {"message", n.message}, {"values", to_json(n.values)}});
  }
  out["unimplemented"] = config::unimplemented_features(o.report->config);
  if (o.report->ok()) out["plan"] = run_plan_lines(*o.report);
  out["activations"] = activations_json(o.report->config);
  return out;
}

std::string plural(size_t n, const char* word) {
  return strprintf("%zu %s%s", n, word, n == 1 ? "" : "s");
}

std::string result_text(const Outcome& o) {
  if (!o.report) return "ERROR (does not parse)";
  const size_t notes = o.report->notes.size();
  if (o.report->ok()) return notes ? "valid (" + plural(notes, "note") + ")" : "valid";
  return "INVALID: " + plural(o.report->violations.size(), "violation");
}

int validate_one(const std::string& recipe, const std::vector<std::string>& config_files,
                 const std::vector<std::string>& overrides, bool json) {
  const Outcome o = evaluate(recipe, config_files, overrides, std::nullopt);
  if (json) {
    std::printf("%s\n", dump_json(to_json(o)).c_str());
    if (!o.report) std::fprintf(stderr, "error: %s\n", o.error.c_str());
    return o.exit_code();
  }
  if (!o.report) {
    std::fprintf(stderr, "error: %s\n", o.error.c_str());
    return o.exit_code();
  }
  std::printf("%s (%s): %s\n", o.name.c_str(), o.source.c_str(), result_text(o).c_str());
  for (const auto& v : o.report->violations)
    std::printf("\n%s", config::format_violation(v).c_str());
  if (!o.report->notes.empty()) std::printf("\n");
  for (const auto& n : o.report->notes) std::printf("%s", config::format_note(n).c_str());
  if (o.report->ok()) {
    std::printf("\n");
    for (const auto& line : run_plan_lines(*o.report)) std::printf("%s\n", line.c_str());
  }
  return o.exit_code();
}

std::string model_text(const config::Config& c) {
  const auto spec = config::model_spec(c);
  std::string kind =
      spec.num_moe_experts > 0
          ? strprintf("MoE %lldx top-%lld", static_cast<long long>(spec.num_moe_experts),
                      static_cast<long long>(spec.moe_router_topk))
          : std::string("dense");
  if (c.model.hybrid_override_pattern) kind = "hybrid";
  std::string layers = config::describe_layers(c);
  if (layers.empty()) layers = strprintf("num_layers %lld", static_cast<long long>(spec.num_layers));
  return strprintf("%s, %s, hidden %lld, seq %lld", kind.c_str(), layers.c_str(),
                   static_cast<long long>(spec.hidden_size),
                   static_cast<long long>(spec.seq_length));
}

std::string graphs_text(const config::Config& c) {
  if (config::graph_impl_is(c.model, graph::GraphImpl::none)) return "none";
  return c.model.cuda_graph_impl + " " + config::format_value(c, "model.cuda_graph_scope");
}

int validate_all(const std::vector<std::string>& config_files, const std::vector<std::string>& overrides, bool json) {
  std::vector<Outcome> outcomes;
  const int64_t data_parallel_size = data_parallel_size_from_env();
  for (const auto& name : config::shipped_recipe_names())
    outcomes.push_back(evaluate(name, config_files, overrides, data_parallel_size));
  int exit_code = 0;
  for (const auto& o : outcomes) exit_code = std::max(exit_code, o.exit_code());
  if (json) {
    nlohmann::json out = {
        {"valid", exit_code == 0}, {"error", nullptr}, {"overrides", overrides}, {"recipes", nlohmann::json::array()}};
    for (const auto& o : outcomes) out["recipes"].push_back(to_json(o));
    std::printf("%s\n", dump_json(out).c_str());
    return exit_code;
  }

  std::vector<std::vector<std::string>> rows = {{"recipe", "model", "cuda graphs", "result"}};
  for (const auto& o : outcomes) {
    if (o.report) {
      rows.push_back(
          {o.name, model_text(o.report->config), graphs_text(o.report->config), result_text(o)});
    } else {
      rows.push_back({o.name, "-", "-", result_text(o)});
    }
  }
  std::vector<size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::printf("stepgraph validate: %s%s\n\n", plural(outcomes.size(), "shipped recipe").c_str(),
              overrides.empty() ? "" : (" with " + join(overrides, " ")).c_str());
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    std::printf("  %s\n", line.c_str());
  }

  size_t valid = 0;
  for (const auto& o : outcomes) {
    if (!o.report) {
      std::printf("\n%s: error: %s\n", o.name.c_str(), o.error.c_str());
      continue;
    }
    if (o.report->ok()) ++valid;
    if (!o.report->ok()) std::printf("\n%s:\n", o.name.c_str());
    for (const auto& v : o.report->violations)
      std::printf("%s", config::format_violation(v).c_str());
  }
  bool any_notes = false;
  for (const auto& o : outcomes) {
    if (!o.report) continue;
    for (const auto& n : o.report->notes) {
      if (!any_notes) std::printf("\nnotes:\n");
      any_notes = true;
      std::printf("  %s: %s", o.name.c_str(), config::format_note(n).c_str());
    }
  }
  std::printf("\n%zu of %zu valid. Details of one recipe: stepgraph validate RECIPE [--json]\n",
              valid, outcomes.size());
  return exit_code;
}

int run_validate(const std::vector<std::string>& args, const std::vector<std::string>& config_files, bool json,
                 bool all) {
  const bool has_recipe = !args.empty() && config::is_recipe_argument(args[0]);
  if (all && has_recipe) {
    throw config::ConfigError("--all validates every shipped recipe; give overrides only, not '" +
                             args[0] + "'");
  }
  if (all || !has_recipe) return validate_all(config_files, args, json);
  return validate_one(args[0], config_files, std::vector<std::string>(args.begin() + 1, args.end()), json);
}

const CommandRegistration registration("validate", 30, [](CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "validate",
      "Check a configuration against every rule (CUDA-graph rules included) before any GPU work. "
      "Exit 0 valid (notes allowed), 1 rule violations or another failure (an unreadable "
      "checkpoint.pretrained_checkpoint, a malformed launcher variable), 2 usage or parse error; with --json "
      "every outcome is a JSON object on stdout (`error`: null, or what went wrong). Without RECIPE (or "
      "with --all): every shipped recipe, as a table. The number of ranks (the batch's data-parallel size) is "
      "the launcher's, as for train: WORLD_SIZE (torchrun, stepgraph launch), or SLURM_NTASKS inside an srun task "
      "(SLURM_PROCID set; a shell in an allocation is one process), else 1.");
  auto args = std::make_shared<std::vector<std::string>>();
  auto json = std::make_shared<bool>(false);
  auto all = std::make_shared<bool>(false);
  cmd->add_option(
      "args", *args,
      "[RECIPE] [section.key=value ...]: a .yaml path or shipped name (llama/tiny, tiny), "
      "then Megatron-Bridge style overrides");
  auto config_files = std::make_shared<std::vector<std::string>>();
  add_config_file_option(*cmd, *config_files);
  cmd->add_flag("--json", *json, "machine-readable report on stdout");
  cmd->add_flag("--all", *all, "validate every shipped recipe (the overrides apply to each)");
  cmd->footer(
      "Examples:\n  stepgraph validate\n  stepgraph validate llama/tiny "
      "model.cuda_graph_impl=local\n"
      "  stepgraph validate moe/tiny_moe model.cuda_graph_impl=transformer_engine "
      "model.cuda_graph_scope=attn,moe_router,moe_preprocess --json");
  cmd->callback([args, config_files, json, all, &exit_code] {
    // With --json every outcome is a JSON object on stdout, errors included (an `error` string).
    const auto fail = [&json](const std::string& message, int code) {
      if (*json) {
        std::printf("%s\n", dump_json({{"valid", false}, {"error", message}}).c_str());
      }
      std::fprintf(stderr, "error: %s\n", message.c_str());
      return code;
    };
    try {
      exit_code = run_validate(*args, *config_files, *json, *all);
    } catch (const config::ConfigError& e) {
      exit_code = fail(e.what(), e.exit_code());
    } catch (const std::exception& e) {
      exit_code = fail(e.what(), 1);
    }
  });
});

}  // namespace
}  // namespace sg::cli
