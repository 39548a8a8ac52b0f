// stepgraph: train Llama-style models with the training step as CUDA graphs.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <initializer_list>
#include <string>

#include "cli/command.h"
#include "config/config.h"
#include "core/crash_report.h"
#include "core/error.h"
#include "core/inherited_signals.h"

namespace sg::cli {
std::vector<CommandInfo>& command_registry() {
  static std::vector<CommandInfo> registry;
  return registry;
}
}  // namespace sg::cli

namespace {

// SIGPIPE (docs/reliability.md). A command whose product is files (train, launch, bench, data synth) ignores it:
// when the reader of its output goes away (`stepgraph train ... 2>&1 | tee log` and Ctrl-C, which reaches tee
// too), a write to the pipe fails with EPIPE (log and progress output ignore it), and the run still stops
// cleanly, saves its checkpoint and writes its report, instead of dying on the next progress line with nothing
// saved. A command whose product is what it prints ends at once and quietly when its reader goes, as a Unix
// filter does (`stepgraph config show llama/tiny | head -3`): the default action. Set explicitly both ways, so
// that neither a parent that ignores SIGPIPE nor `stepgraph launch` (whose ranks inherit its dispositions)
// changes it.
void set_sigpipe(void (*disposition)(int)) {
  struct sigaction action {};
  action.sa_handler = disposition;
  sigemptyset(&action.sa_mask);
  (void)sigaction(SIGPIPE, &action, nullptr);
}

// The commands whose product is their standard output, as the words that name them.
const std::initializer_list<std::initializer_list<const char*>> kPrintingCommands = {
    {"config"}, {"validate"}, {"generate"}, {"data", "inspect"}};

// The default action for the printing commands once CLI11 reaches their name; "" or what is missing (a command
// renamed without this table: a bug the SIGPIPE tests catch).
std::string restore_sigpipe_for_printing_commands(CLI::App& app) {
  for (const auto& words : kPrintingCommands) {
    CLI::App* command = &app;
    std::string name;
    for (const char* word : words) {
      name += (name.empty() ? "" : " ") + std::string(word);
      try {
        command = command->get_subcommand(word);
      } catch (const CLI::OptionNotFound&) {
        return name;
      }
    }
    command->preparse_callback([](size_t) { set_sigpipe(SIG_DFL); });
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  sg::crash::install_crash_reporter("stepgraph");  // no death without a message (docs/reliability.md)
  (void)sg::hangup_ignored_at_start();  // read before any stop handler replaces it (nohup keeps SIGHUP ignored)
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
  set_sigpipe(SIG_IGN);  // help and usage errors included; the printing commands take the default back
  if (const std::string missing = restore_sigpipe_for_printing_commands(app); !missing.empty()) {
    std::fprintf(stderr, "stepgraph: internal error: no command '%s' for the SIGPIPE table in src/cli/main.cpp\n",
                 missing.c_str());
    return 1;
  }
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
