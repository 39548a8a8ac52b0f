// stepgraph config show [RECIPE] [section.key=value ...]: the resolved configuration as YAML.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/command.h"
#include "core/strings.h"
#include "config/config.h"
#include "config/model_config.h"
#include "config/validate.h"
#include "train/pretrained.h"

namespace sg::cli {
namespace {

bool is_file(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

int config_show(const std::vector<std::string>& args) {
  std::string recipe = config::kDefaultRecipe;
  std::vector<std::string> overrides = args;
  // A first argument without '=' is the recipe (so is an existing file whose name has one).
  if (!args.empty() && (!config::looks_like_override(args[0]) || is_file(args[0]))) {
    recipe = args[0];
    overrides.erase(overrides.begin());
  }
  const config::RecipeText text = config::find_recipe(recipe);
  config::Config config = config::load_config_yaml(text.text, text.source);
  config::apply_overrides(config, overrides);
  const config::ValidationReport report = config::validate(train::apply_pretrained_shapes(config));

  std::string header =
      "stepgraph config show " + join(args.empty() ? std::vector<std::string>{recipe} : args, " ");
  header += "\nresolved from " + text.source + (text.embedded ? " (built into stepgraph)" : "");
  header += "\ndefaults filled in and normalized as `stepgraph validate` does";
  if (const std::string layers = config::describe_layers(report.config); !layers.empty()) {
    header += "\nmodel: " + layers;
  }
  for (const std::string& line : config::describe_activations(report.config)) header += "\n" + line;
  std::fputs(config::emit_yaml(report.config, header).c_str(), stdout);
  if (!report.ok()) {
    std::fprintf(
        stderr,
        "warning: this configuration breaks %zu rule(s); `stepgraph validate %s` lists them\n",
        report.violations.size(),
        join(args.empty() ? std::vector<std::string>{recipe} : args, " ").c_str());
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
          std::string(config::kDefaultRecipe) + ".");
  auto args = std::make_shared<std::vector<std::string>>();
  show->add_option("args", *args, "[RECIPE] [section.key=value ...]");
  show->footer(
      "Example: stepgraph config show llama/tiny model.cuda_graph_impl=local train.train_iters=50");
  show->callback([args, &exit_code] {
    try {
      exit_code = config_show(*args);
    } catch (const config::ConfigError& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      exit_code = e.exit_code();
    } catch (const sg::Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      exit_code = 1;
    }
  });
});

}  // namespace
}  // namespace sg::cli
