// `stepgraph launch` and a data-parallel `stepgraph train` as a user runs them, without a GPU: the
// ranks start, a failing rank's status comes back, a bad launcher environment or an indivisible global
// batch is a clear error on every rank, and the CPU backend refuses data parallelism — after a real
// rendezvous of the ranks on loopback.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
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
  // NaN passes `<= 0`, and neither it nor inf is a number of seconds a timer can wait.
  for (const char* grace : {"nan", "inf", "-inf"}) {
    const Result r = run_stepgraph({"launch", "-n", "1", "--kill-grace", grace, "--", "validate", "llama/tiny"});
    EXPECT_EQ(r.exit_code, 2) << grace << ": " << r.output;
    EXPECT_TRUE(has(r, "--kill-grace")) << r.output;
  }
  const Result empty_addr = run_stepgraph({"launch", "-n", "1", "--master-addr", "", "--", "validate", "llama/tiny"});
  EXPECT_EQ(empty_addr.exit_code, 2) << empty_addr.output;
  EXPECT_TRUE(has(empty_addr, "--master-addr")) << empty_addr.output;
  EXPECT_TRUE(has(empty_addr, "is empty")) << empty_addr.output;
  const Result word_n = run_stepgraph({"launch", "-n", "abc", "--", "validate"});
  EXPECT_EQ(word_n.exit_code, 2) << word_n.output;
  EXPECT_TRUE(has(word_n, "'abc' is not an integer")) << word_n.output;
  const Result word_port = run_stepgraph({"launch", "-n", "1", "--master-port", "abc", "--", "validate"});
  EXPECT_EQ(word_port.exit_code, 2) << word_port.output;
  EXPECT_TRUE(has(word_port, "'abc' is not an integer")) << word_port.output;
  const Result big_port = run_stepgraph({"launch", "-n", "1", "--master-port", "70000", "--", "validate"});
  EXPECT_EQ(big_port.exit_code, 2) << big_port.output;
  EXPECT_TRUE(has(big_port, "[0, 65535]")) << big_port.output;
}

TEST(LaunchCli, TheCpuBackendRefusesRanksBeforeTheRendezvous) {
  // Rank 0 of 2 alone: the rendezvous would wait for rank 1 (here up to 60 s) before the backend is chosen.
  const auto start = std::chrono::steady_clock::now();
  const Result r = sg::test::run_command(
      "env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29555 STEPGRAPH_RENDEZVOUS_TIMEOUT=60 " +
      shell_quote(STEPGRAPH_BIN) + " train --cpu --plain llama/tiny train.train_iters=1 --run-dir " +
      shell_quote(::testing::TempDir() + "cpu_refused_" + std::to_string(::getpid())) + " 2>&1");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has(r, "the CPU reference backend trains in one process only (--cpu was given)")) << r.output;
  EXPECT_LT(seconds, 20.0) << r.output;
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
  // llama/tiny: micro batch 4, global batch 4: two ranks cannot split it. validate counts the launch's ranks.
  const Result checked = run_stepgraph({"launch", "-n", "2", "--", "validate", "llama/tiny"});
  EXPECT_EQ(checked.exit_code, 1) << checked.output;
  EXPECT_TRUE(has(checked, "micro_batch_size x data_parallel_size = 4 x 2")) << checked.output;
  // Without a GPU, train refuses two ranks for the CPU backend before it joins them (the test above).
  if (sg::cuda::device_count() == 0) GTEST_SKIP() << "train's own check needs GPUs to reach the rendezvous";
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
  // One rank: on a machine without a GPU two would be refused for the CPU backend before the rendezvous.
  const Result no_master = sg::test::run_command("env -u MASTER_ADDR RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 " +
                                                 shell_quote(STEPGRAPH_BIN) +
                                                 " train --plain llama/tiny train.train_iters=1 2>&1");
  EXPECT_EQ(no_master.exit_code, 1) << no_master.output;
  EXPECT_TRUE(has(no_master, "MASTER_ADDR is not set")) << no_master.output;
}

}  // namespace
