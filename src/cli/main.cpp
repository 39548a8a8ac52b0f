// stepgraph: train Llama-style models with the training step as CUDA graphs.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>

#include "cli/command.h"
#include "config/config.h"
#include "core/crash_report.h"
#include "core/error.h"

namespace sg::cli {
std::vector<CommandInfo>& command_registry() {
  static std::vector<CommandInfo> registry;
  return registry;
}
}  // namespace sg::cli

int main(int argc, char** argv) {
  sg::crash::install_crash_reporter("stepgraph");  // no death without a message (docs/reliability.md)
  // The recipe list comes from the recipes embedded in the binary (one source of truth).
  std::string recipes;
  for (const std::string& name : sg::config::shipped_recipe_names()) recipes += (recipes.empty() ? "" : ", ") + name;
  CLI::App app{
      "stepgraph: trains Llama-style transformers (dense, Mixture-of-Experts and hybrid Mamba2) with the training "
      "step captured as CUDA graphs.\nConfiguration speaks Megatron-Bridge: recipes/<family>/<name>.yaml plus "
      "dotted overrides such as model.cuda_graph_impl=local train.train_iters=50.\nShipped recipes: " +
      recipes +
      ".\nYour own text: tools/train_tokenizer.py and tools/preprocess_data.py, then `stepgraph train` with the "
      "tokenizer section (README \"Your own data\")."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "stepgraph 0.1.0");
  int exit_code = 0;
  auto& registry = sg::cli::command_registry();
  std::sort(registry.begin(), registry.end(),
            [](const auto& a, const auto& b) { return a.order < b.order; });
  for (auto& command : registry) command.setup(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (const std::string unknown = sg::cli::unknown_subcommand_message(app, argc, argv); !unknown.empty()) {
      std::fprintf(stderr, "error: %s\n", unknown.c_str());
      return 2;
    }
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  } catch (const sg::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return exit_code != 0 ? exit_code : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "error: an exception of unknown type ended the command (a bug; please report it)\n");
    return 1;
  }
  return exit_code;
}
