// The configuration as the CLI reads it: `validate` counts the launcher's ranks as `train` does, the
// graph flags' help lists every scope (and says what happens to the NaN check), a --cuda_graph_scope that
// would be dropped is refused, so is an empty one, a recipe file with '=' in its name is the recipe for every
// command, and an out-of-range warmup never reaches the plan.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "config/graph_flags.h"
#include "process_util.h"
#include "test_dir.h"

namespace {

using sg::test::CommandResult;

// `env stepgraph args...` (env: "WORLD_SIZE=2 ..."), stderr merged.
CommandResult run_with_env(const std::string& env, const std::vector<std::string>& args) {
  std::string command = "env -u WORLD_SIZE -u RANK -u LOCAL_RANK -u SLURM_PROCID -u SLURM_NTASKS ";
  command.append(env).append(" ").append(sg::test::shell_quote(sg::test::stepgraph_binary()));
  for (const auto& a : args) command.append(" ").append(sg::test::shell_quote(a));
  return sg::test::run_command(command.append(" 2>&1"));
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ConfigFlagsCli, ValidateCountsTheLaunchersRanks) {
  const CommandResult two = run_with_env("WORLD_SIZE=2", {"validate", "llama/tiny"});
  EXPECT_EQ(two.exit_code, 1) << two.output;
  EXPECT_TRUE(contains(two.output, "micro_batch_size x data_parallel_size = 4 x 2")) << two.output;
  const CommandResult fits = run_with_env("WORLD_SIZE=2", {"validate", "llama/tiny", "train.global_batch_size=8"});
  EXPECT_EQ(fits.exit_code, 0) << fits.output;
  const CommandResult slurm =
      run_with_env("SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_LOCALID=0", {"validate", "llama/tiny", "--json"});
  EXPECT_EQ(slurm.exit_code, 1) << slurm.output;
  const CommandResult one = run_with_env("", {"validate", "llama/tiny"});
  EXPECT_EQ(one.exit_code, 0) << one.output;
  // Every shipped recipe at once reads the same world.
  const CommandResult all = run_with_env("WORLD_SIZE=2", {"validate", "--all"});
  EXPECT_EQ(all.exit_code, 1) << all.output;
}

TEST(ConfigFlagsCli, GraphFlagHelpListsEveryScopeAndTheNanCheckStays) {
  const CommandResult help = sg::test::run_stepgraph({"train", "--help"});
  ASSERT_EQ(help.exit_code, 0) << help.output;
  EXPECT_TRUE(contains(help.output, sg::config::cuda_graph_scope_list())) << help.output;
  for (const std::string& scope : sg::config::cuda_graph_scope_names()) {
    EXPECT_TRUE(contains(help.output, scope)) << scope;
  }
  EXPECT_FALSE(contains(help.output, "NaN check off")) << help.output;
}

TEST(ConfigFlagsCli, TrainRefusesAScopeWithoutGraphs) {
  const std::filesystem::path dir = sg::test::fresh_test_dir("config_flags_cli");
  const std::string run_dir = (dir / "run").string();
  const CommandResult r = sg::test::run_stepgraph({"train", "llama/tiny", "--cuda_graph_scope", "attn", "--cpu",
                                                   "--plain", "train.train_iters=1", "--run-dir", run_dir});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "add --cuda_graph_impl transformer_engine")) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "run" / "config.yaml")) << "it trained eagerly";
  std::filesystem::remove_all(dir);
}

// An empty graph flag (an unset shell variable) is refused, as bench refuses it, not read as absent.
TEST(ConfigFlagsCli, TrainRefusesAnEmptyGraphFlag) {
  const std::filesystem::path dir = sg::test::fresh_test_dir("config_flags_empty");
  for (const char* flag : {"--cuda_graph_impl", "--cuda_graph_scope"}) {
    const CommandResult r = sg::test::run_stepgraph({"train", "llama/tiny", flag, "", "--cpu", "--plain",
                                                     "train.train_iters=1", "--run-dir", (dir / "run").string()});
    EXPECT_EQ(r.exit_code, 2) << flag << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, std::string("error: ") + flag + ": ")) << r.output;
    EXPECT_TRUE(contains(r.output, "''")) << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir / "run" / "config.yaml")) << flag << ": it trained";
  }
  std::filesystem::remove_all(dir);
}

// A recipe file whose name holds an '=' is the recipe, for train as for validate and config show.
TEST(ConfigFlagsCli, ARecipeFileWithAnEqualsSignInItsNameIsTheRecipe) {
  const std::filesystem::path dir = sg::test::fresh_test_dir("config_flags_equals");
  const std::string recipe = (dir / "lr=3e-4.yaml").string();
  std::filesystem::copy_file(std::string(STEPGRAPH_SOURCE_DIR) + "/recipes/llama/tiny.yaml", recipe);
  const CommandResult r = sg::test::run_stepgraph({"train", recipe, "--cpu", "--plain", "train.train_iters=1",
                                                   "scheduler.lr_warmup_iters=0", "--run-dir", (dir / "run").string()});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "run" / "config.yaml")) << r.output;
  for (const char* command : {"validate", "config"}) {
    std::vector<std::string> args = {command};
    if (std::string(command) == "config") args.push_back("show");
    args.push_back(recipe);
    const CommandResult other = sg::test::run_stepgraph(args);
    EXPECT_EQ(other.exit_code, 0) << command << "\n" << other.output;
  }
  std::filesystem::remove_all(dir);
}

TEST(ConfigFlagsCli, AnOutOfRangeWarmupIsRefusedBeforeThePlan) {
  const CommandResult r = sg::test::run_stepgraph(
      {"validate", "llama/tiny", "model.cuda_graph_impl=local", "model.cuda_graph_warmup_steps=4294967295"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "[rule 15]")) << r.output;
  EXPECT_FALSE(contains(r.output, "-1 eager warmup")) << r.output;
}

}  // namespace
