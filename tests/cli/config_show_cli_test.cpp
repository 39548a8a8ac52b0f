// `stepgraph config show` as a user runs it: the launcher's ranks count as in validate and train, validate's
// notes go to stderr, the printed command pastes back into a shell, moe_layer_freq is written in
// Megatron-Bridge's forms, and show -> validate -> show changes nothing for every shipped recipe.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/config.h"
#include "process_util.h"
#include "shipped_recipe_data.h"

namespace {

using sg::test::CommandResult;
using sg::test::shell_quote;

// `env ENV stepgraph ARGS` with the launchers' variables cleared; stderr merged, or dropped.
CommandResult run_with_env(const std::string& env, const std::vector<std::string>& args, bool merge_stderr = true) {
  std::string command = "env -u WORLD_SIZE -u RANK -u LOCAL_RANK -u SLURM_PROCID -u SLURM_NTASKS ";
  command.append(env).append(" ").append(shell_quote(sg::test::stepgraph_binary()));
  for (const auto& a : args) command.append(" ").append(shell_quote(a));
  return sg::test::run_command(command.append(merge_stderr ? " 2>&1" : " 2>/dev/null"));
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The YAML without its first two comment lines (the command and the file it was resolved from).
std::string body(const std::string& yaml) {
  const size_t second = yaml.find('\n', yaml.find('\n') + 1);
  return second == std::string::npos ? yaml : yaml.substr(second + 1);
}

std::filesystem::path temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(ConfigShowCli, CountsTheLaunchersRanksAsValidateDoes) {
  const CommandResult two =
      run_with_env("WORLD_SIZE=2", {"config", "show", "llama/tiny", "train.global_batch_size=null"}, false);
  EXPECT_EQ(two.exit_code, 0) << two.output;
  EXPECT_TRUE(has(two.output, "  global_batch_size: 8\n")) << "micro batch 4 x 2 ranks: " << two.output;
  const CommandResult one = run_with_env("", {"config", "show", "llama/tiny", "train.global_batch_size=null"}, false);
  EXPECT_TRUE(has(one.output, "  global_batch_size: 4\n")) << one.output;
  const CommandResult bad = run_with_env("WORLD_SIZE=abc", {"config", "show", "llama/tiny"});
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_TRUE(has(bad.output, "WORLD_SIZE = 'abc'")) << bad.output;
}

TEST(ConfigShowCli, NotesGoToStderrAndStdoutStaysYaml) {
  const std::vector<std::string> args = {"config", "show", "llama/tiny", "model.cuda_graph_impl=none",
                                         "model.cuda_graph_scope=attn"};
  const CommandResult merged = run_with_env("", args);
  EXPECT_EQ(merged.exit_code, 0) << merged.output;
  EXPECT_TRUE(has(merged.output, "note [rule 2]")) << "the dropped scope is said: " << merged.output;
  const CommandResult yaml = run_with_env("", args, false);
  EXPECT_FALSE(has(yaml.output, "note [rule 2]")) << yaml.output;
  EXPECT_TRUE(has(yaml.output, "  cuda_graph_scope: []\n")) << yaml.output;
}

TEST(ConfigShowCli, ThePrintedCommandPastesBack) {
  const std::string spaced = "checkpoint.save=/tmp/my run's dir";
  const CommandResult r = run_with_env(
      "", {"config", "show", "llama/tiny", spaced, "model.cuda_graph_impl=local", "rng.te_rng_tracker=false"});
  const std::string quoted = "'checkpoint.save=/tmp/my run'\\''s dir'";
  EXPECT_TRUE(has(r.output, "# stepgraph config show llama/tiny " + quoted +
                                " model.cuda_graph_impl=local rng.te_rng_tracker=false\n"))
      << r.output;
  EXPECT_TRUE(has(r.output, "`stepgraph validate llama/tiny " + quoted)) << "the warning's command: " << r.output;
  // The shell reads the printed words back as the arguments given.
  const size_t start = r.output.find("llama/tiny ", r.output.find("# stepgraph config show "));
  const std::string words = r.output.substr(start, r.output.find('\n', start) - start);
  const CommandResult echoed = sg::test::run_command("printf '%s\\n' " + words);
  EXPECT_EQ(echoed.output, "llama/tiny\n" + spaced + "\nmodel.cuda_graph_impl=local\nrng.te_rng_tracker=false\n");
}

TEST(ConfigShowCli, HelpSaysWhatItPrintsAndWhenItExitsNonZero) {
  const CommandResult r = run_with_env("", {"config", "show", "--help"});
  EXPECT_TRUE(has(r.output, "`#` comment lines")) << r.output;
  EXPECT_TRUE(has(r.output, "notes")) << r.output;
  EXPECT_TRUE(has(r.output, "Exit 0 when the configuration resolves")) << r.output;
}

TEST(ConfigShowCli, MoeLayerFreqIsWrittenInBridgesForms) {
  const auto show = [](const std::string& value) {
    return run_with_env("", {"config", "show", "moe/tiny_moe", "model.moe_layer_freq=" + value}, false).output;
  };
  EXPECT_TRUE(has(show("1"), "  moe_layer_freq: 1\n")) << show("1");
  EXPECT_TRUE(has(show("[1,0,1,1]"), "  moe_layer_freq: [1, 0, 1, 1]\n")) << show("[1,0,1,1]");
  EXPECT_TRUE(has(show("([1]*1+[0])*2"), "  moe_layer_freq: \"([1]*1+[0])*2\"\n")) << show("([1]*1+[0])*2");
}

// model.is_hybrid_model is a model key (no longer one Bridge key accepted without effect, printed only when set):
// `config show` prints it, the hybrid recipes' true and an override's value, and reads its own output back.
TEST(ConfigShowCli, IsHybridModelIsPrintedAndReadBack) {
  EXPECT_TRUE(has(run_with_env("", {"config", "show", "llama/tiny"}, false).output, "  is_hybrid_model: false\n"));
  EXPECT_TRUE(
      has(run_with_env("", {"config", "show", "hybrid/tiny_hybrid"}, false).output, "  is_hybrid_model: true\n"));
  const CommandResult set = run_with_env("", {"config", "show", "llama/tiny", "model.is_hybrid_model=true"});
  ASSERT_EQ(set.exit_code, 0) << set.output;
  EXPECT_TRUE(has(set.output, "  is_hybrid_model: true\n")) << set.output;
  EXPECT_FALSE(has(set.output, "no effect in stepgraph")) << "no Bridge-key note: " << set.output;
  const auto dir = temp_dir("sg_config_show_is_hybrid");
  const std::string file = (dir / "shown.yaml").string();
  std::ofstream(file) << run_with_env("", {"config", "show", "llama/tiny", "model.is_hybrid_model=true"}, false).output;
  const CommandResult again = run_with_env("", {"config", "show", file}, false);
  EXPECT_TRUE(has(again.output, "  is_hybrid_model: true\n")) << again.output;
  std::filesystem::remove_all(dir);
}

TEST(ConfigShowCli, ShowValidateShowChangesNothingForEveryShippedRecipe) {
  const sg::test::InShippedRecipeDataDir in_data_dir;  // llama/demo's dataset, as after `stepgraph data synth`
  const auto dir = temp_dir("sg_config_show_round_trip");
  std::vector<std::pair<std::string, std::vector<std::string>>> cases;
  for (const std::string& name : sg::config::shipped_recipe_names()) cases.push_back({name, {}});
  cases.push_back({"moe/tiny_moe", {"model.moe_layer_freq=[1,0,1,1]"}});
  cases.push_back({"moe/tiny_moe", {"model.moe_layer_freq=([1]*1+[0])*2"}});
  cases.push_back({"moe/tiny_moe", {"model.moe_layer_freq=2"}});
  for (const auto& [name, overrides] : cases) {
    std::vector<std::string> args = {"config", "show", name};
    args.insert(args.end(), overrides.begin(), overrides.end());
    const CommandResult first = run_with_env("", args, false);
    ASSERT_EQ(first.exit_code, 0) << name << ": " << first.output;
    const std::string file = (dir / "resolved.yaml").string();
    std::ofstream(file) << first.output;
    const CommandResult valid = run_with_env("", {"validate", file});
    EXPECT_EQ(valid.exit_code, 0) << name << ": " << valid.output;
    const CommandResult second = run_with_env("", {"config", "show", file}, false);
    EXPECT_EQ(body(second.output), body(first.output)) << name;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
