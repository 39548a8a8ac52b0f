// stepgraph config show [RECIPE] [section.key=value ...]: the resolved configuration as YAML.
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "config/config.h"
#include "config/model_config.h"
#include "config/validate.h"
#include "core/strings.h"
#include "train/pretrained.h"

namespace sg::cli {
namespace {

int config_show(const std::vector<std::string>& args, const std::vector<std::string>& config_files) {
  std::string recipe = config::kDefaultRecipe;
  std::vector<std::string> overrides = args;
  if (!args.empty() && config::is_recipe_argument(args[0])) {
    recipe = args[0];
    overrides.erase(overrides.begin());
  }
  const config::RecipeText text = config::find_recipe(recipe);
  config::Config config = config::load_config(text, config_files, overrides);
  // The ranks of the launcher's environment, as validate and train count them (global_batch_size = null
  // resolves to micro batch x ranks).
  config.data_parallel_size = data_parallel_size_from_env();
  const config::ValidationReport report = config::validate(train::apply_pretrained_shapes(config));
  // Quoted so that the printed command pastes back into a shell.
  std::vector<std::string> shown;
  for (const std::string& file : config_files) shown.insert(shown.end(), {"--config-file", file});
  for (const std::string& word : args.empty() ? std::vector<std::string>{recipe} : args) shown.push_back(word);
  const std::string words = shell_join(shown);

  std::string header = "stepgraph config show " + words;
  header += "\nresolved from " + text.source + (text.embedded ? " (built into stepgraph)" : "");
  header += "\ndefaults filled in and normalized as `stepgraph validate` does";
  if (const std::string layers = config::describe_layers(report.config); !layers.empty()) {
    header += "\nmodel: " + layers;
  }
  for (const std::string& line : config::describe_derived_shapes(report.config)) header += "\n" + line;
  for (const std::string& line : config::describe_activations(report.config)) header += "\n" + line;
  std::fputs(config::emit_yaml(report.config, header).c_str(), stdout);
  // What validate notes (a setting without effect, a value normalized away) is said, as train says it:
  // on stderr, so that stdout stays YAML.
  for (const config::Note& note : report.notes) std::fputs(config::format_note(note).c_str(), stderr);
  if (!report.ok()) {
    std::fprintf(stderr, "warning: this configuration breaks %zu rule(s); `stepgraph validate %s` lists them\n",
                 report.violations.size(), words.c_str());
  }
  return 0;
}

const CommandRegistration registration("config", 20, [](CLI::App& app, int& exit_code) {
  CLI::App* config = app.add_subcommand("config", "Inspect configurations");
  config->require_subcommand(1);
  CLI::App* show = config->add_subcommand(
      "show",
      "Print the resolved configuration (recipe + overrides, defaults filled in, normalized) as "
      "YAML. RECIPE is a .yaml path or a shipped recipe name (llama/tiny, tiny); default " +
          std::string(config::kDefaultRecipe) +
          ". The YAML starts with `#` comment lines: the command, the recipe's source, the model's layers, "
          "what a null model.mamba_num_heads resolves to, and the activation sizes. validate's notes (settings "
          "without effect, values normalized, e.g. a graph scope dropped with model.cuda_graph_impl=none) go to stderr. The ranks are the launcher's, as for validate "
          "and train (WORLD_SIZE, or SLURM_NTASKS in an srun task). Exit 0 when the configuration resolves, "
          "even one that breaks rules (then a warning on stderr; `stepgraph validate` lists the violations), 1 "
          "when it cannot be resolved (an unreadable pretrained checkpoint, a malformed launcher variable), 2 a "
          "parse error.");
  auto args = std::make_shared<std::vector<std::string>>();
  show->add_option("args", *args, "[RECIPE] [section.key=value ...]");
  auto config_files = std::make_shared<std::vector<std::string>>();
  add_config_file_option(*show, *config_files);
  show->footer(
      "Example: stepgraph config show llama/tiny model.cuda_graph_impl=local train.train_iters=50");
  show->callback([args, config_files, &exit_code] {
    try {
      exit_code = config_show(*args, *config_files);
    } catch (const config::ConfigError& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      exit_code = e.exit_code();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      exit_code = 1;
    }
  });
});

}  // namespace
}  // namespace sg::cli
