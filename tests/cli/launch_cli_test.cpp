// `stepgraph launch` and a data-parallel `stepgraph train` as a user runs them, without a GPU: the
// ranks start, a failing rank's status comes back, a bad launcher environment or an indivisible global
// batch is a clear error on every rank, and the CPU backend refuses data parallelism — after a real
// rendezvous of the ranks on loopback.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "cuda/device.h"
#include "process_util.h"

namespace {

using Result = sg::test::CommandResult;
using sg::test::run_stepgraph;
using sg::test::shell_quote;

bool has(const Result& r, const std::string& text) { return r.output.find(text) != std::string::npos; }

TEST(LaunchCli, RunsEveryRankAndSucceedsWhenTheyDo) {
  // validate counts the ranks (the global batch 12 is a multiple of 3 ranks x micro batch 4).
  const Result r = run_stepgraph({"launch", "-n", "3", "--", "validate", "llama/tiny", "train.global_batch_size=12"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(LaunchCli, AFailingCommandGivesItsStatus) {
  const Result r = run_stepgraph({"launch", "-n", "2", "--", "validate", "no_such_recipe"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r, "failed with exit status 2")) << r.output;
}

TEST(LaunchCli, UsageErrors) {
  EXPECT_EQ(run_stepgraph({"launch", "--", "validate"}).exit_code, 2) << "-n is required";
  const Result nothing = run_stepgraph({"launch", "-n", "2"});
  EXPECT_EQ(nothing.exit_code, 2) << nothing.output;
  EXPECT_TRUE(has(nothing, "needs a command")) << nothing.output;
  EXPECT_EQ(run_stepgraph({"launch", "-n", "0", "--", "validate"}).exit_code, 2);
  EXPECT_TRUE(has(run_stepgraph({"launch", "--help"}), "--kill-grace"));
}

// `stepgraph launch -n RANKS -- train --cpu --plain llama/tiny dataset.mock=true OVERRIDES --run-dir TMP/DIR`.
Result launch_cpu_training(int ranks, const std::vector<std::string>& overrides, const std::string& dir) {
  std::vector<std::string> args = {"launch", "-n", std::to_string(ranks), "--", "train", "--cpu", "--plain",
                                   "llama/tiny", "dataset.mock=true"};
  args.insert(args.end(), overrides.begin(), overrides.end());
  // One folder per test process: two test runs on one machine would otherwise meet at the folder's lock.
  args.insert(args.end(), {"--run-dir", ::testing::TempDir() + dir + "_" + std::to_string(::getpid())});
  return run_stepgraph(args);
}

TEST(LaunchCli, DataParallelTrainingNeedsGpusAndSaysSoOnEveryRank) {
  const Result r = launch_cpu_training(2, {"train.global_batch_size=8", "train.train_iters=10"}, "launch_cpu_run");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has(r, "data parallelism (2 ranks) runs one rank per GPU")) << r.output;
  EXPECT_TRUE(has(r, "--cpu was given")) << r.output;
}

TEST(LaunchCli, OneRankJoinsTheRendezvousAndTrainsOnTheCpu) {
  // launch -n 1 takes the data-parallel path (rendezvous on loopback; NCCL on a GPU); with nothing to
  // reduce, the CPU backend trains the one rank.
  const Result r = launch_cpu_training(1,
                                       {"train.train_iters=2", "scheduler.lr_warmup_iters=0", "model.num_layers=1",
                                        "model.seq_length=64", "dataset.seq_length=64"},
                                       "launch_one_rank_cpu");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r, "rank 0 of 1 (local rank 0, torchrun)")) << r.output;
  EXPECT_TRUE(has(r, "trained 2 steps")) << r.output;
}

TEST(LaunchCli, AnIndivisibleGlobalBatchIsARuleViolation) {
  // llama/tiny: micro batch 4, global batch 4: two ranks cannot split it.
  const Result r = run_stepgraph({"launch", "-n", "2", "--", "train", "--plain", "llama/tiny", "train.train_iters=1",
                                  "dataset.mock=true", "--run-dir", ::testing::TempDir() + "launch_indivisible"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has(r, "micro_batch_size x data_parallel_size = 4 x 2")) << r.output;
}

TEST(LaunchCli, ABrokenLauncherEnvironmentIsNamed) {
  const std::string command = "RANK=0 WORLD_SIZE=2 " + shell_quote(STEPGRAPH_BIN) +
                              " train --plain llama/tiny train.train_iters=1 dataset.mock=true 2>&1";
  const Result r = sg::test::run_command("env -u LOCAL_RANK " + command);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has(r, "LOCAL_RANK is not set")) << r.output;
  const Result no_master = sg::test::run_command("env -u MASTER_ADDR RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 " +
                                                 shell_quote(STEPGRAPH_BIN) +
                                                 " train --plain llama/tiny train.train_iters=1 2>&1");
  EXPECT_EQ(no_master.exit_code, 1) << no_master.output;
  EXPECT_TRUE(has(no_master, "MASTER_ADDR is not set")) << no_master.output;
}

}  // namespace
