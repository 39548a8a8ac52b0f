// SIGPIPE by command (src/cli/main.cpp, docs/reliability.md). A command whose product is what it prints (config
// show, validate, data inspect, generate) ends at once and quietly, by SIGPIPE's default action, when nobody reads
// its output any more (`| head`), as before; a command whose product is files (data synth, train, launch) ignores
// SIGPIPE and finishes its work (`train ... 2>&1 | tee log` and Ctrl-C killed the run before its checkpoint:
// tests/train/trainer_output_cli_test.cpp). Both are set explicitly, so the disposition stepgraph inherits (a
// parent that ignores SIGPIPE, `stepgraph launch` for its ranks) changes neither.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "process_util.h"
#include "test_dir.h"

namespace {

namespace fs = std::filesystem;

struct Outcome {
  int status = -1;  // as the shell shows it: the exit code, or 128 + the signal that ended the process
  std::string err;
};

using sg::test::read_file;

// Runs stepgraph with stdout into a pipe nobody reads (its read end closed before the start), stderr into
// `err_path`, and SIGPIPE's disposition at exec `inherited` (SIG_DFL or SIG_IGN).
Outcome run_with_stdout_unread(const std::vector<std::string>& args, void (*inherited)(int), const fs::path& err_path) {
  Outcome outcome;
  int fds[2];
  if (::pipe(fds) != 0) return outcome;
  ::close(fds[0]);
  sg::test::StepgraphArgv argv(args);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (err < 0) ::_exit(126);
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    ::signal(SIGPIPE, inherited);
    argv.exec();
  }
  ::close(fds[1]);
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return outcome;
  outcome.status = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
  outcome.err = read_file(err_path);
  return outcome;
}

class SigpipeCli : public ::testing::TestWithParam<bool> {  // the parameter: the parent ignores SIGPIPE
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::current_path() / ("sigpipe_cli_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // A dataset for `data inspect` and a one-step checkpoint for `generate` (mock data, the CPU).
    setup_output_ =
        sg::test::run_stepgraph({"data", "synth", "--out", (dir_ / "corpus").string(), "--tokens", "5000"}).output;
    const sg::test::CommandResult trained = sg::test::run_stepgraph(
        {"train", "llama/tiny", "--cpu", "--plain", "--run-dir", (dir_ / "run").string(), "train.train_iters=1",
         "model.num_layers=1", "model.hidden_size=32", "model.num_attention_heads=2", "model.num_query_groups=2",
         "model.ffn_hidden_size=64", "model.seq_length=16", "dataset.seq_length=16", "model.vocab_size=256",
         "train.micro_batch_size=1", "train.global_batch_size=1", "scheduler.lr_warmup_iters=0",
         "checkpoint.save=" + (dir_ / "ckpt").string()});
    setup_output_ += trained.output;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  void SetUp() override {
    ASSERT_TRUE(fs::exists(dir_ / "corpus.idx") && fs::exists(dir_ / "ckpt" / "latest_checkpointed_iteration.txt"))
        << setup_output_;
  }
  Outcome run(const std::vector<std::string>& args) {
    return run_with_stdout_unread(args, GetParam() ? SIG_IGN : SIG_DFL, dir_ / "err.txt");
  }
  static inline fs::path dir_;
  static inline std::string setup_output_;
};

TEST_P(SigpipeCli, ACommandWhoseProductIsItsOutputEndsByTheDefaultAction) {
  const std::vector<std::vector<std::string>> commands = {
      {"config", "show", "llama/tiny"},
      {"validate", "llama/tiny"},
      {"data", "inspect", (dir_ / "corpus").string()},
      {"generate", (dir_ / "ckpt").string(), "--prompt-tokens", "1,2", "--cpu", "--max-new-tokens", "4"},
  };
  for (const auto& args : commands) {
    SCOPED_TRACE(args[0] + " " + args[1]);
    const Outcome o = run(args);
    EXPECT_EQ(o.status, 128 + SIGPIPE) << o.err;
    EXPECT_EQ(o.err.find("error"), std::string::npos) << o.err;
  }
}

TEST_P(SigpipeCli, ACommandThatWritesFilesFinishesThemWithoutAReader) {
  const fs::path out = dir_ / "synth";
  const Outcome o = run({"data", "synth", "--out", out.string(), "--tokens", "5000", "--force"});
  EXPECT_EQ(o.status, 0) << "141: killed by SIGPIPE\n" << o.err;
  EXPECT_TRUE(fs::exists(out.string() + ".bin") && fs::exists(out.string() + ".idx")) << o.err;
}

// The launcher ignores SIGPIPE (its ranks' work is files), and its ranks inherit that; a printing rank still
// takes the default back.
TEST_P(SigpipeCli, ALaunchedRankHasItsCommandsDisposition) {
  const Outcome printing = run({"launch", "-n", "1", "--", "config", "show", "llama/tiny"});
  EXPECT_EQ(printing.status, 128 + SIGPIPE) << printing.err;
  EXPECT_NE(printing.err.find("rank 0 failed with exit status 141"), std::string::npos) << printing.err;
  const fs::path out = dir_ / "launched_synth";
  const Outcome writing =
      run({"launch", "-n", "1", "--", "data", "synth", "--out", out.string(), "--tokens", "5000", "--force"});
  EXPECT_EQ(writing.status, 0) << writing.err;
  EXPECT_TRUE(fs::exists(out.string() + ".idx")) << writing.err;
}

INSTANTIATE_TEST_SUITE_P(ParentDisposition, SigpipeCli, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "Ignored" : "Default"; });

}  // namespace
